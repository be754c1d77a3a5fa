//! JVMTI events → jitdump records. Everything here is safe Rust over data `ffi` already copied
//! out of the VM.
//!
//! - CompiledMethodLoad: SAMPLY DEBUG_INFO2 (inline tree and lines), CODE_LOAD named
//!   `pkg.Class.method`. No JIT_TIER: HotSpot does not say which compiler (C1 or C2) made
//!   an nmethod through JVMTI (docs/java.md).
//! - DynamicCodeGenerated: JIT_TIER (interpreter or stub) + CODE_LOAD with the VM's name.
//!
//! CODE_LOADs carry the code's size but not its bytes (no reader looks at them), and the JVMTI
//! answers about a method (name, file, line table) are kept for the next body that compiles or
//! inlines it: what the agent costs the JVM is mostly per compiled method (docs/performance.md).
//! - CompiledMethodUnload: jprof's CODE_UNLOAD, when the address still holds that method.

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use jprof_format::jitdump::TierKind;
use jprof_format::jitdump_write::{self, CodeLoad};

use crate::clock::Clock;
use crate::debug::{DebugTables, IdMap, MethodInfo, PcStacks};
use crate::dump::Dump;
use crate::ffi::{self, JClass, JavaVm, JniEnv, Jvmti, MethodId};
use crate::j9;
use crate::naming::{self, Batch, Worker};

pub struct Agent {
    pub jvmti: Jvmti,
    /// To attach the naming thread.
    vm: JavaVm,
    /// Prepared classes waiting for the naming thread.
    naming: naming::Queue,
    /// Replaced when the agent is attached again (a new jprof session).
    current: Mutex<Arc<Dump>>,
    pid: u32,
    /// The VM is OpenJ9: compile_info is J9 metadata (docs/openj9.md).
    pub openj9: bool,
    /// A jmethodID's first word is the VM's method ([`ids_point_at_methods`]).
    ids_are_pointers: bool,
    j9_names: Mutex<j9::MethodNames<MethodId>>,
    /// What JVMTI said of each method a compiled body named (HotSpot only: OpenJ9 reuses the
    /// ids of unloaded classes).
    method_infos: Mutex<MethodInfos>,
    /// Reused from one compiled method to the next (the service thread posts them one by one).
    scratch: Mutex<Scratch>,
}

/// The buffers a compiled method's records are built in, kept for their capacity: allocating
/// and copying them afresh for every compiled method showed in the VM's CPU time.
#[derive(Default)]
struct Scratch {
    pcs: PcStacks<MethodId>,
    tables: DebugTables<MethodId>,
    records: Vec<u8>,
}

/// A method as the cache of JVMTI answers knows it: the jmethodID, and where the VM's method
/// is when ids are pointers (HotSpot may hand a freed id's slot to a redefined method; an
/// opaque id of JDK 26+ is never reused).
type MethodKey = (MethodId, u64);

/// Methods remembered at most; the cache starts over past this, so a VM that loads ever more
/// classes does not grow it without bound (javac over java.sql: 2,639).
const MAX_METHOD_INFOS: usize = 65_536;

/// JVMTI's answers about methods (name, file, line table), each asked once: a method is
/// compiled several times (C1, C2, again after deoptimisation) and inlined into many others,
/// and asking again for every body was a large part of what the agent cost the JVM.
struct MethodInfos {
    by_method: IdMap<MethodKey, Arc<MethodInfo>>,
    limit: usize,
}

impl MethodInfos {
    fn with_limit(limit: usize) -> Self {
        Self {
            by_method: IdMap::default(),
            limit,
        }
    }

    /// What is known of `key`, calling `ask` the first time (a `None` answer is not kept).
    fn get(
        &mut self,
        key: MethodKey,
        ask: impl FnOnce() -> Option<MethodInfo>,
    ) -> Option<Arc<MethodInfo>> {
        if let Some(info) = self.by_method.get(&key) {
            return Some(info.clone());
        }
        let info = Arc::new(ask()?);
        if self.by_method.len() >= self.limit {
            self.by_method.clear();
        }
        self.by_method.insert(key, info.clone());
        Some(info)
    }
}

impl Agent {
    fn dump(&self) -> Arc<Dump> {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Where the jitdump goes: `dir=PATH` in the agent options, else `$JPROF_JITDUMP_DIR`, else
/// the working directory; `/tmp` if none of those takes it.
fn dump_dirs(options: &str) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(dir) = options.split(',').find_map(|o| o.strip_prefix("dir=")) {
        dirs.push(PathBuf::from(dir));
    } else if let Some(dir) = std::env::var_os("JPROF_JITDUMP_DIR").filter(|d| !d.is_empty()) {
        dirs.push(PathBuf::from(dir));
    } else if let Ok(cwd) = std::env::current_dir() {
        dirs.push(cwd);
    }
    dirs.push(PathBuf::from("/tmp"));
    dirs
}

pub fn start(vm: JavaVm, jvmti: Jvmti, options: &str) -> Result<Agent, String> {
    let pid = std::process::id();
    let dump = Dump::create(&dump_dirs(options), pid, Clock::detect())
        .map_err(|e| format!("cannot create the jitdump: {e}"))?;
    let vm_name = jvmti.system_property(c"java.vm.name").unwrap_or_default();
    let openj9 = is_openj9(&vm_name);
    let spec_version = jvmti.system_property(c"java.vm.specification.version");
    let forced_opaque = std::env::var_os(OPAQUE_IDS_VAR).is_some_and(|v| v == "1");
    let ids_are_pointers =
        !forced_opaque && ids_point_at_methods(&vm_name, spec_version.as_deref());
    Ok(Agent {
        jvmti,
        vm,
        naming: naming::Queue::default(),
        current: Mutex::new(dump),
        pid,
        openj9,
        ids_are_pointers,
        j9_names: Mutex::default(),
        method_infos: Mutex::new(MethodInfos::with_limit(MAX_METHOD_INFOS)),
        scratch: Mutex::default(),
    })
}

/// Set to `1`, the agent treats jmethodIDs as opaque whatever the JVM's version, as it does on
/// JDK 26+ (to test that path on the JDKs that can be installed).
const OPAQUE_IDS_VAR: &str = "JPROF_AGENT_OPAQUE_METHOD_IDS";

/// The major Java version in a `java.vm.specification.version` ("17", "25", "1.8" → 8).
fn java_major(version: &str) -> Option<u32> {
    let mut parts = version.trim().split('.');
    match parts.next()?.parse().ok()? {
        1 => parts.next()?.parse().ok(),
        major => Some(major),
    }
}

/// Whether a jmethodID's first word is the VM's method, so that [`ffi::vm_method`] may read
/// it: OpenJ9's ids start with the J9Method; HotSpot's pointed at a slot holding the `Method*`
/// until JDK-8268406 (JDK 26) made them keys into a table, where reading the first word would
/// crash or read garbage. An unknown or unreadable version counts as new.
pub fn ids_point_at_methods(vm_name: &str, spec_version: Option<&str>) -> bool {
    is_openj9(vm_name) || spec_version.and_then(java_major).is_some_and(|v| v < 26)
}

/// `java.vm.name` of OpenJ9 ("Eclipse OpenJ9 VM") and of IBM's J9 ("IBM J9 VM").
fn is_openj9(vm_name: &str) -> bool {
    vm_name.contains("OpenJ9") || vm_name.contains("J9 VM")
}

/// A second attach to the same VM (a new jprof session): the old file is closed and a fresh
/// `jit-<pid>.dump` started, which the caller fills by replaying the VM's code.
pub fn restart(agent: &Agent, options: &str) -> Result<(), String> {
    let mut current = agent.current.lock().unwrap_or_else(|e| e.into_inner());
    current.close();
    *current = Dump::create(&dump_dirs(options), agent.pid, Clock::detect())
        .map_err(|e| format!("cannot create the jitdump: {e}"))?;
    Ok(())
}

/// HotSpot's thread that compiler threads hand each new compiled method to, and that posts
/// CompiledMethodLoad, CompiledMethodUnload and DynamicCodeGenerated to agents (JDK 9 on).
const SERVICE_THREAD: &str = "Service Thread";

/// Runs before each CompiledMethodLoad callback: on a thread's first, HotSpot's Service Thread
/// is moved to SCHED_BATCH. Woken once per compiled method (thousands a second while a JVM warms up), in
/// the normal class it preempted the compiler and Java threads at each wake-up; in the batch
/// class it runs when its fair share comes and posts several methods a run: javac under jprof
/// made 6,100 voluntary and 5,000 involuntary context switches instead of 2,400 and 1,600
/// without the agent, and the agent's CPU cost was lost in the noise with it
/// (docs/performance.md, "The agent and HotSpot's Service Thread").
pub fn first_compiled_method_on_this_thread() {
    thread_local!(static SEEN: Cell<bool> = const { Cell::new(false) });
    if SEEN.replace(true) {
        return;
    }
    if ffi::this_thread_name().as_deref() == Some(SERVICE_THREAD) {
        ffi::batch_this_thread();
    }
}

fn tid() -> u32 {
    nix::unistd::gettid().as_raw() as u32
}

/// The key of `method` in the cache of JVMTI answers (HotSpot).
fn method_key(agent: &Agent, method: MethodId) -> MethodKey {
    let vm_method = if agent.ids_are_pointers {
        ffi::vm_method(method)
    } else {
        0
    };
    (method, vm_method)
}

/// The records of one compiled method: its inline tree and lines (DEBUG_INFO2), on OpenJ9 its
/// metadata, and its CODE_LOAD. `read_pcs` fills in the method's PC descriptors (HotSpot).
pub fn compiled_method_load(
    agent: &Agent,
    method: MethodId,
    code_addr: u64,
    code_size: u32,
    read_pcs: impl FnOnce(&mut PcStacks<MethodId>),
    j9_metadata: Option<(u64, Vec<u8>)>,
) {
    let mut scratch = agent.scratch.lock().unwrap_or_else(|e| e.into_inner());
    let Scratch {
        pcs,
        tables,
        records,
    } = &mut *scratch;
    read_pcs(pcs);
    if agent.openj9 {
        tables.fill(method, code_size, pcs, |m| {
            agent.jvmti.method_info(m).map(Arc::new)
        });
    } else {
        // JVMTI's answers about each method are asked once (HotSpot); the cache is locked once
        // per compiled method.
        let mut infos = agent.method_infos.lock().unwrap_or_else(|e| e.into_inner());
        tables.fill(method, code_size, pcs, |m| {
            infos.get(method_key(agent, m), || agent.jvmti.method_info(m))
        });
    }
    let names = tables.names();
    let name = names.first().copied().unwrap_or_default();
    records.clear();
    if !tables.inlines.is_empty() || !tables.lines.is_empty() {
        jitdump_write::debug_info2_into(
            records,
            0,
            &tables.files(),
            &names,
            &tables.functions,
            &tables.inlines,
            &tables.lines,
        );
    }
    if let Some((metadata_addr, image)) = j9_metadata {
        records.extend(j9_record(agent, method, code_addr, metadata_addr, &image));
    }
    let dump = agent.dump();
    let code_index = dump.next_index();
    let load = CodeLoad {
        pid: agent.pid,
        tid: tid(),
        code_addr,
        code_index,
        name,
        code: &[],
    };
    jitdump_write::code_load_without_code_into(records, 0, &load, code_size.into());
    dump.write_load(code_addr, method.raw(), code_index, records);
}

/// JPROF_J9_METADATA for an OpenJ9 body: the compiled method is named from the event, inlined
/// ones through the loaded classes (`j9::MethodNames`).
fn j9_record(
    agent: &Agent,
    method: MethodId,
    code_addr: u64,
    metadata_addr: u64,
    image: &[u8],
) -> Vec<u8> {
    let mut names = agent.j9_names.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(name) = agent.jvmti.j9_name(method) {
        names.insert(ffi::vm_method(method), name);
    }
    let jvmti = &agent.jvmti;
    j9::record(image, metadata_addr, code_addr, |m| {
        names.name(m, || jvmti.openj9_loaded_methods(), |id| jvmti.j9_name(id))
    })
    .unwrap_or_default()
}

pub fn compiled_method_unload(agent: &Agent, method: MethodId, code_addr: u64) {
    agent
        .dump()
        .write_unload(code_addr, method.raw(), |code_index| {
            jitdump_write::code_unload(0, code_addr, code_index)
        });
}

/// HotSpot's names: "Interpreter" for the template interpreter; everything else is a stub,
/// adapter or runtime blob.
fn tier_of(name: &str) -> (TierKind, &'static str) {
    if name == "Interpreter" {
        (TierKind::INTERPRETER, "template interpreter")
    } else {
        (TierKind::STUB, "")
    }
}

pub fn dynamic_code_generated(agent: &Agent, name: &str, address: u64, code_size: u32) {
    let (kind, tier) = tier_of(name);
    let dump = agent.dump();
    let mut records = jitdump_write::jit_tier(0, address, kind, tier);
    let load = CodeLoad {
        pid: agent.pid,
        tid: tid(),
        code_addr: address,
        code_index: dump.next_index(),
        name,
        code: &[],
    };
    records.extend(jitdump_write::code_load_without_code(
        0,
        &load,
        code_size.into(),
    ));
    dump.write(records);
}

/// Names per JPROF_METHOD_NAMES record.
const NAMES_PER_RECORD: usize = 2048;

/// The VM method address of `id` when it can be read: never when jmethodIDs are not pointers
/// (`readable` false: `read` is not called), and not a null address.
fn method_address(readable: bool, id: MethodId, read: impl Fn(MethodId) -> u64) -> Option<u64> {
    if !readable {
        return None;
    }
    Some(read(id)).filter(|&address| address != 0)
}

/// Whether the agent publishes `Method*` names (HotSpot before JDK 26), so a prepared class's
/// methods are worth listing.
pub fn names_methods(agent: &Agent) -> bool {
    !agent.openj9 && agent.ids_are_pointers
}

/// JPROF_METHOD_NAMES for the methods of `classes` (HotSpot: `Method*` → name), so the report
/// can name interpreted frames by the `Method*` HotSpot keeps in each (docs/java.md), named
/// now. Nothing on JDK 26+, where a jmethodID no longer leads to its `Method*` (interpreted
/// frames stay `Interpreter` there).
pub fn classes_prepared(agent: &Agent, classes: &[JClass]) {
    if !names_methods(agent) {
        return;
    }
    let mut names = Names::new(agent, agent.dump().now());
    for &class in classes {
        names.add_class(class);
    }
    names.write();
}

/// The JPROF_METHOD_NAMES records of classes prepared at one time, built in one buffer as the
/// VM answers (no list of names first), and written at once, stamped with that time.
struct Names<'a> {
    agent: &'a Agent,
    at: u64,
    records: Vec<u8>,
    writer: jitdump_write::MethodNamesInto,
    /// The name being made, reused from one method to the next.
    name: String,
}

impl<'a> Names<'a> {
    fn new(agent: &'a Agent, at: u64) -> Self {
        Self {
            agent,
            at,
            records: Vec::new(),
            writer: jitdump_write::MethodNamesInto::new(0, NAMES_PER_RECORD),
            name: String::new(),
        }
    }

    fn add_class(&mut self, class: JClass) {
        let Names {
            agent,
            records,
            writer,
            name,
            ..
        } = self;
        agent.jvmti.for_each_named_method(class, name, |id, name| {
            if let Some(address) = method_address(agent.ids_are_pointers, id, ffi::vm_method) {
                writer.push(records, address, name);
            }
        });
    }

    fn write(self) {
        let Names {
            agent,
            at,
            mut records,
            writer,
            ..
        } = self;
        writer.finish(&mut records);
        if !records.is_empty() {
            agent.dump().write_at(records, at);
        }
    }
}

/// JPROF_METHOD_NAMES for every class loaded so far, named now (when attached).
pub fn all_loaded_classes(agent: &Agent) {
    if names_methods(agent) {
        classes_prepared(agent, &agent.jvmti.loaded_classes());
    }
}

/// ClassPrepare: `classes` go to the naming thread, held by weak references, with the time;
/// without a JNI environment, or when that thread could not start, they are named here.
pub fn prepared(agent: &Agent, jni: Option<JniEnv>, classes: &[JClass]) {
    if !names_methods(agent) {
        return;
    }
    let Some(jni) = jni else {
        return classes_prepared(agent, classes);
    };
    let prepared_at = agent.dump().now();
    let mut held = Vec::with_capacity(classes.len());
    let mut unheld = Vec::new();
    for &class in classes {
        match jni.weak(class) {
            Some(weak) => held.push(weak),
            // No reference could be made (the VM out of memory): named now, as before.
            None => unheld.push(class),
        }
    }
    if !unheld.is_empty() {
        classes_prepared(agent, &unheld);
    }
    let batch = Batch {
        classes: held,
        prepared_at,
    };
    for batch in agent.naming.push(batch) {
        name_batch(agent, jni, batch);
    }
}

/// Names a batch's classes still loaded; a class unloaded before its turn is skipped: no frame
/// of its methods can be sampled after that, and one sampled before keeps `Interpreter`.
fn name_batch(agent: &Agent, jni: JniEnv, batch: Batch) {
    let mut names = Names::new(agent, batch.prepared_at);
    for weak in batch.classes {
        jni.with_class(&weak, |class| names.add_class(class));
        jni.delete_weak(weak);
    }
    names.write();
}

/// VM init: the classes loaded before it (they got no ClassPrepare, or got it before the
/// naming thread could run) go to the naming thread, which starts.
pub fn vm_init(agent: &'static Agent, jni: Option<JniEnv>) {
    if !names_methods(agent) {
        return;
    }
    prepared(agent, jni, &agent.jvmti.loaded_classes());
    start_naming(agent);
}

/// Starts the naming thread (live phase only): attached to the VM as a daemon, it names what
/// ClassPrepare queues.
pub fn start_naming(agent: &'static Agent) {
    if !names_methods(agent) {
        return;
    }
    agent.naming.set_worker(Worker::Running);
    let started = std::thread::Builder::new()
        .name("jprof names".into())
        .spawn(move || {
            let jni = match agent.vm.attach_daemon(c"jprof names") {
                Ok(jni) => jni,
                Err(e) => {
                    eprintln!("jprof agent: {e}; prepared classes are named where they load");
                    agent.naming.set_worker(Worker::Failed);
                    return;
                }
            };
            let mut finished_one = false;
            while let Some(batches) = agent.naming.next(finished_one) {
                for batch in batches {
                    name_batch(agent, jni, batch);
                }
                finished_one = true;
            }
            // Closed at VM death, which waits for this: a Java thread in native code (as this
            // one is, idle) delays HotSpot's exit by up to 300 ms.
            agent.vm.detach_current_thread();
            agent.naming.set_worker(Worker::Detached);
        });
    if started.is_err() {
        agent.naming.set_worker(Worker::Failed);
    }
}

pub fn flush(agent: &Agent) {
    agent.dump().flush();
}

/// VM death (or unload): what is still queued is named by the calling thread (with its JNI
/// environment) and the naming thread's batch in hand waited for; then the file is flushed and
/// closed.
pub fn close(agent: &Agent, jni: Option<JniEnv>) {
    let left = agent.naming.close();
    if let Some(jni) = jni {
        for batch in left {
            name_batch(agent, jni, batch);
        }
    }
    agent.naming.wait_idle();
    agent.dump().close();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_dir_precedence() {
        assert_eq!(
            dump_dirs("dir=/x/y,other"),
            [PathBuf::from("/x/y"), PathBuf::from("/tmp")]
        );
        assert_eq!(dump_dirs("").last(), Some(&PathBuf::from("/tmp")));
    }

    #[test]
    fn openj9_is_recognized_by_its_vm_name() {
        assert!(is_openj9("Eclipse OpenJ9 VM"));
        assert!(is_openj9("IBM J9 VM"));
        assert!(!is_openj9("OpenJDK 64-Bit Server VM"));
    }

    #[test]
    fn java_versions_are_read_as_the_jvm_writes_them() {
        assert_eq!(java_major("1.8"), Some(8));
        assert_eq!(java_major("17"), Some(17));
        assert_eq!(java_major("25"), Some(25));
        assert_eq!(java_major("26"), Some(26));
        assert_eq!(java_major(" 27 "), Some(27));
        assert_eq!(java_major("x"), None);
        assert_eq!(java_major(""), None);
    }

    /// JDK-8268406: from JDK 26 on, HotSpot's jmethodIDs are not pointers.
    #[test]
    fn method_ids_are_read_only_before_jdk_26_or_on_openj9() {
        let hotspot = "OpenJDK 64-Bit Server VM";
        for old in ["1.8", "11", "17", "21", "25"] {
            assert!(ids_point_at_methods(hotspot, Some(old)), "{old}");
        }
        for new in ["26", "27", "30"] {
            assert!(!ids_point_at_methods(hotspot, Some(new)), "{new}");
        }
        assert!(!ids_point_at_methods(hotspot, None));
        assert!(!ids_point_at_methods(hotspot, Some("unknown")));
        assert!(ids_point_at_methods("Eclipse OpenJ9 VM", Some("26")));
    }

    /// The JDK 26+ path never touches an id's memory, and names nothing.
    #[test]
    fn opaque_ids_are_never_dereferenced() {
        let never = |_| panic!("an opaque id was read");
        assert_eq!(method_address(false, MethodId::from_raw(8), never), None);
        let read = |id: MethodId| if id.raw() == 8 { 0 } else { 0x1000 };
        assert_eq!(method_address(true, MethodId::from_raw(8), read), None);
        assert_eq!(
            method_address(true, MethodId::from_raw(16), read),
            Some(0x1000)
        );
    }

    /// JVMTI is asked once per method; the same id with another `Method*` behind it (a slot
    /// reused) is asked again; an unanswered question is asked again; the cache is bounded.
    #[test]
    fn each_method_is_asked_about_once() {
        let mut infos = MethodInfos::with_limit(3);
        let asked = std::cell::Cell::new(0);
        let mut get = |id: usize, method: u64, answer: bool| {
            infos
                .get((MethodId::from_raw(id), method), || {
                    asked.set(asked.get() + 1);
                    answer.then(|| MethodInfo {
                        name: format!("m{id}"),
                        ..MethodInfo::default()
                    })
                })
                .map(|i| i.name.clone())
        };
        assert_eq!(get(8, 0x100, true).as_deref(), Some("m8"));
        assert_eq!(get(8, 0x100, true).as_deref(), Some("m8"));
        assert_eq!(asked.get(), 1);
        assert_eq!(get(8, 0x200, true).as_deref(), Some("m8"));
        assert_eq!(asked.get(), 2);
        assert_eq!(get(16, 0x300, false), None);
        assert_eq!(get(16, 0x300, true).as_deref(), Some("m16"));
        assert_eq!(asked.get(), 4);
        // Full (3 kept): the next new method starts the cache over.
        get(24, 0x400, true);
        assert_eq!(asked.get(), 5);
        get(8, 0x100, true);
        assert_eq!(asked.get(), 6);
    }

    #[test]
    fn interpreter_and_stubs() {
        assert_eq!(tier_of("Interpreter").0, TierKind::INTERPRETER);
        assert_eq!(tier_of("StubRoutines (1)").0, TierKind::STUB);
    }
}
