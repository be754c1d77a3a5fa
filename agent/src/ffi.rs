//! The agent's boundary with the VM, and every `unsafe` line of it: hand-written JVMTI bindings
//! (only the functions called, at their 1-based numbers in jdk/include/jvmti.h; the slot in the
//! table is number − 1), the VM's pointers decoded into owned Rust data (inline
//! records, OpenJ9 metadata, strings), the jitdump marker mmap and rdtsc. It calls nothing
//! above it: `entry` (the exported functions and event callbacks) hands what it decodes here
//! to `events`.

use std::borrow::Cow;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::fs::File;
use std::os::fd::AsRawFd;

use crate::debug::{MethodInfo, PcStacks};
use crate::j9;
use crate::names;

pub(crate) type Jint = i32;
type JvmtiError = c_int;
const JVMTI_ERROR_NONE: JvmtiError = 0;
pub(crate) const JNI_OK: Jint = 0;
/// What GetEnv returns for a JVMTI env asked for between the OnLoad and the live phase (a VM
/// still starting), and what `Agent_OnAttach` then returns: the attaching jprof asks again.
pub(crate) const JNI_EDETACHED: Jint = -2;
/// [`open_jvmti`]'s error when the VM is not in its live phase yet.
pub(crate) const NOT_LIVE: &str = "the VM is not in its live phase yet";
/// `JVMTI_VERSION_1_2` (jvmti.h): every HotSpot since JDK 7 provides it.
const JVMTI_VERSION_1_2: Jint = 0x3001_0200;
const JVMTI_ENABLE: c_int = 1;

/// Event numbers (jvmtiEvent in jvmti.h).
const EVENT_VM_INIT: c_int = 50;
const EVENT_VM_DEATH: c_int = 51;
const EVENT_CLASS_PREPARE: c_int = 56;
pub(crate) const EVENT_COMPILED_METHOD_LOAD: c_int = 68;
const EVENT_COMPILED_METHOD_UNLOAD: c_int = 69;
pub(crate) const EVENT_DYNAMIC_CODE_GENERATED: c_int = 70;
/// jvmtiEventCallbacks has one slot per event from 50 (VMInit) to 86 in JDK 17 (88 in JDK 21+);
/// SetEventCallbacks takes the size, so the JDK 17 length works on every version.
const CALLBACK_SLOTS: usize = 37;

/// jvmtiCapabilities is a 128-bit bitfield (LSB first on x86_64): the bits the agent adds.
const CAN_GET_SOURCE_FILE_NAME: u32 = 1 << 11;
const CAN_GET_LINE_NUMBERS: u32 = 1 << 12;
const CAN_GENERATE_COMPILED_METHOD_LOAD_EVENTS: u32 = 1 << 27;

/// jvmticmlr.h.
const JVMTI_CMLR_INLINE_INFO: c_int = 2;
const JVMTI_CMLR_MAJOR_VERSION_1: Jint = 1;

/// `jvmtiEnv` / `JavaVM`: a pointer to a function table.
#[repr(C)]
pub struct FunctionTable {
    functions: *const *const c_void,
}

pub(crate) type RawEnv = *mut FunctionTable;
pub(crate) type JMethodId = *mut c_void;
pub(crate) type JClass = *mut c_void;

#[repr(C)]
struct LineNumberEntry {
    start_location: i64,
    line_number: Jint,
}

#[repr(C)]
struct CmlrHeader {
    kind: c_int,
    major: Jint,
    minor: Jint,
    next: *const CmlrHeader,
}

#[repr(C)]
struct PcStackInfo {
    pc: *const c_void,
    numstackframes: Jint,
    methods: *const JMethodId,
    bcis: *const Jint,
}

#[repr(C)]
struct InlineRecord {
    header: CmlrHeader,
    numpcs: Jint,
    pcinfo: *const PcStackInfo,
}

/// Reads function number `$n` of a JVMTI (or JNI invoke) table as `$ty`; `None` if the slot is
/// empty.
macro_rules! table_fn {
    ($env:expr, $n:expr, $ty:ty) => {{
        // SAFETY: `$env` is a live env the VM gave us; every table in jvmti.h/jni.h has more
        // than `$n` pointer-sized slots, and the slot holds a function of type `$ty` (the
        // signature copied from the header) or null.
        unsafe {
            let slot = *(*$env).functions.add($n - 1);
            if slot.is_null() {
                None
            } else {
                Some(std::mem::transmute::<*const c_void, $ty>(slot))
            }
        }
    }};
}

type GetEnvFn = unsafe extern "C" fn(*mut FunctionTable, *mut *mut c_void, Jint) -> Jint;
type SetEventNotificationModeFn =
    unsafe extern "C" fn(RawEnv, c_int, c_int, *mut c_void, ...) -> JvmtiError;
type DeallocateFn = unsafe extern "C" fn(RawEnv, *mut u8) -> JvmtiError;
type GetClassSignatureFn =
    unsafe extern "C" fn(RawEnv, JClass, *mut *mut c_char, *mut *mut c_char) -> JvmtiError;
type GetSourceFileNameFn = unsafe extern "C" fn(RawEnv, JClass, *mut *mut c_char) -> JvmtiError;
type GetMethodNameFn = unsafe extern "C" fn(
    RawEnv,
    JMethodId,
    *mut *mut c_char,
    *mut *mut c_char,
    *mut *mut c_char,
) -> JvmtiError;
type GetMethodDeclaringClassFn = unsafe extern "C" fn(RawEnv, JMethodId, *mut JClass) -> JvmtiError;
type GetLineNumberTableFn =
    unsafe extern "C" fn(RawEnv, JMethodId, *mut Jint, *mut *mut LineNumberEntry) -> JvmtiError;
type GetClassMethodsFn =
    unsafe extern "C" fn(RawEnv, JClass, *mut Jint, *mut *mut JMethodId) -> JvmtiError;
type GetLoadedClassesFn = unsafe extern "C" fn(RawEnv, *mut Jint, *mut *mut JClass) -> JvmtiError;
type GetSystemPropertyFn =
    unsafe extern "C" fn(RawEnv, *const c_char, *mut *mut c_char) -> JvmtiError;
type SetEventCallbacksFn = unsafe extern "C" fn(RawEnv, *const c_void, Jint) -> JvmtiError;
type GenerateEventsFn = unsafe extern "C" fn(RawEnv, c_int) -> JvmtiError;
type CapabilitiesFn = unsafe extern "C" fn(RawEnv, *mut [u32; 4]) -> JvmtiError;

/// A method of the running VM. Only the VM's callbacks create one, so JVMTI is never asked
/// about a made-up id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MethodId(usize);

impl MethodId {
    /// For matching a load with its unload only; never passed back to JVMTI from there.
    pub fn raw(self) -> usize {
        self.0
    }

    /// The id of a jmethodID the VM passed to a callback.
    pub(crate) fn of_vm(method: JMethodId) -> Self {
        Self(method as usize)
    }

    /// A made-up id, for tests that must show it is never used.
    #[cfg(test)]
    pub fn from_raw(raw: usize) -> Self {
        Self(raw)
    }
}

/// The JVMTI environment. JVMTI functions may be called from any thread.
pub struct Jvmti {
    env: RawEnv,
    lines: bool,
    source_files: bool,
}

// SAFETY: a jvmtiEnv is usable from every thread (JVMTI spec, "Function Execution"); the
// struct holds only the pointer and two flags.
unsafe impl Send for Jvmti {}
// SAFETY: as above; no interior mutability.
unsafe impl Sync for Jvmti {}

/// A string the VM allocated, given back with Deallocate when dropped.
struct VmString<'a> {
    jvmti: &'a Jvmti,
    ptr: *mut c_char,
}

impl VmString<'_> {
    fn text(&self) -> Option<String> {
        self.borrowed().map(Cow::into_owned)
    }

    /// The text without copying it when it is valid UTF-8 (nearly always).
    fn borrowed(&self) -> Option<Cow<'_, str>> {
        if self.ptr.is_null() {
            return None;
        }
        // SAFETY: JVMTI returns NUL-terminated modified-UTF-8 strings, alive until Deallocate
        // (when `self` is dropped; the borrow ends before that).
        let bytes = unsafe { CStr::from_ptr(self.ptr) }.to_bytes();
        // Checked as UTF-8 first (word at a time over ASCII, as names nearly always are); the
        // lossy form only for the rest (modified UTF-8's encoded NUL and surrogates).
        Some(match std::str::from_utf8(bytes) {
            Ok(text) => Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(bytes),
        })
    }
}

impl Drop for VmString<'_> {
    fn drop(&mut self) {
        self.jvmti.deallocate(self.ptr.cast());
    }
}

impl Jvmti {
    fn deallocate(&self, ptr: *mut u8) {
        if ptr.is_null() {
            return;
        }
        if let Some(f) = table_fn!(self.env, 47, DeallocateFn) {
            // SAFETY: `ptr` was allocated by this env (a JVMTI out-parameter) and is freed once.
            unsafe { f(self.env, ptr) };
        }
    }

    fn vm_string(&self, ptr: *mut c_char) -> VmString<'_> {
        VmString { jvmti: self, ptr }
    }

    /// The method's name and, when `with_signature`, its descriptor.
    fn name_and_descriptor(
        &self,
        method: MethodId,
        with_signature: bool,
    ) -> Option<(String, Option<String>)> {
        self.with_name_and_descriptor(method, with_signature, |name, descriptor| {
            (name.to_string(), descriptor.map(str::to_string))
        })
    }

    /// `f` of the method's name and, when `with_signature`, its descriptor, borrowed from the
    /// VM's strings (no copy); `None` when the VM cannot tell.
    fn with_name_and_descriptor<T>(
        &self,
        method: MethodId,
        with_signature: bool,
        f: impl FnOnce(&str, Option<&str>) -> T,
    ) -> Option<T> {
        let id = method.0 as JMethodId;
        let get_name = table_fn!(self.env, 64, GetMethodNameFn)?;
        let mut name = std::ptr::null_mut();
        let mut method_signature = std::ptr::null_mut();
        let signature_out = if with_signature {
            &mut method_signature as *mut *mut c_char
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: `id` came from the VM (a callback or GetClassMethods); out-pointers are valid
        // locals; a null signature/generic pointer means "not wanted" (JVMTI spec).
        let err = unsafe { get_name(self.env, id, &mut name, signature_out, std::ptr::null_mut()) };
        let name = self.vm_string(name);
        let method_signature = self.vm_string(method_signature);
        if err != JVMTI_ERROR_NONE {
            return None;
        }
        let descriptor = method_signature.borrowed();
        Some(f(&name.borrowed()?, descriptor.as_deref()))
    }

    /// The class's signature (`Lpkg/Class;`).
    fn class_signature(&self, class: JClass) -> Option<String> {
        let get_signature = table_fn!(self.env, 48, GetClassSignatureFn)?;
        let mut signature = std::ptr::null_mut();
        // SAFETY: `class` is a live reference from the VM.
        let err = unsafe { get_signature(self.env, class, &mut signature, std::ptr::null_mut()) };
        let signature = self.vm_string(signature);
        if err != JVMTI_ERROR_NONE {
            return None;
        }
        signature.text()
    }

    /// The method's name, its signature when `with_signature`, its class and the class's
    /// signature (`Lpkg/Class;`).
    fn name_parts(
        &self,
        method: MethodId,
        with_signature: bool,
    ) -> Option<(String, Option<String>, JClass, String)> {
        let (name, descriptor) = self.name_and_descriptor(method, with_signature)?;
        let get_class = table_fn!(self.env, 65, GetMethodDeclaringClassFn)?;
        let mut class: JClass = std::ptr::null_mut();
        // SAFETY: `method` came from the VM; the class is a JNI local reference freed with the
        // event's frame.
        let err = unsafe { get_class(self.env, method.0 as JMethodId, &mut class) };
        if err != JVMTI_ERROR_NONE || class.is_null() {
            return None;
        }
        Some((name, descriptor, class, self.class_signature(class)?))
    }

    /// OpenJ9's form of a method name, `pkg/Class.method(Sig)Ret` (JPROF_J9_METADATA).
    pub fn j9_name(&self, method: MethodId) -> Option<String> {
        let (name, method_signature, _, class_signature) = self.name_parts(method, true)?;
        let class = class_signature
            .strip_prefix('L')
            .and_then(|c| c.strip_suffix(';'))
            .unwrap_or(&class_signature);
        Some(format!(
            "{class}.{name}{}",
            method_signature.unwrap_or_default()
        ))
    }

    /// A system property (`java.vm.name`, ...).
    pub fn system_property(&self, property: &CStr) -> Option<String> {
        let get = table_fn!(self.env, 131, GetSystemPropertyFn)?;
        let mut value = std::ptr::null_mut();
        // SAFETY: live env; `property` is NUL-terminated; `value` is a valid out-pointer.
        let err = unsafe { get(self.env, property.as_ptr(), &mut value) };
        let value = self.vm_string(value);
        (err == JVMTI_ERROR_NONE).then(|| value.text()).flatten()
    }

    /// Every loaded class (JNI local references, valid in the calling event).
    pub fn loaded_classes(&self) -> Vec<JClass> {
        let Some(get_classes) = table_fn!(self.env, 78, GetLoadedClassesFn) else {
            return Vec::new();
        };
        let mut count: Jint = 0;
        let mut classes: *mut JClass = std::ptr::null_mut();
        // SAFETY: live env, valid out-pointers; the array is freed below.
        if unsafe { get_classes(self.env, &mut count, &mut classes) } != JVMTI_ERROR_NONE
            || classes.is_null()
        {
            return Vec::new();
        }
        // SAFETY: JVMTI returned `count` class references at `classes`.
        let list = unsafe { std::slice::from_raw_parts(classes, count.max(0) as usize) }.to_vec();
        self.deallocate(classes.cast());
        list
    }

    /// The ids of `class`'s methods; empty for a class not yet prepared.
    pub fn methods_of(&self, class: JClass) -> Vec<MethodId> {
        let Some(get_methods) = table_fn!(self.env, 52, GetClassMethodsFn) else {
            return Vec::new();
        };
        let mut n: Jint = 0;
        let mut methods: *mut JMethodId = std::ptr::null_mut();
        // SAFETY: `class` is a live reference from the VM; fails for classes not yet
        // prepared, leaving `methods` null.
        let err = unsafe { get_methods(self.env, class, &mut n, &mut methods) };
        let mut out = Vec::new();
        if err == JVMTI_ERROR_NONE && !methods.is_null() {
            // SAFETY: JVMTI returned `n` method ids at `methods`, freed just below.
            let ids = unsafe { std::slice::from_raw_parts(methods, n.max(0) as usize) };
            out.extend(ids.iter().map(|&id| MethodId(id as usize)));
        }
        self.deallocate(methods.cast());
        out
    }

    /// Every loaded class's methods as (J9Method address, id), on OpenJ9 (whose jmethodIDs
    /// always start with the J9Method).
    pub fn openj9_loaded_methods(&self) -> Vec<(u64, MethodId)> {
        self.loaded_classes()
            .into_iter()
            .flat_map(|class| self.methods_of(class))
            .map(|id| (vm_method(id), id))
            .collect()
    }

    /// Calls `f` with each of `class`'s methods and the name jprof's records use
    /// (`pkg.Class.method(int, java.lang.String)`), written into `name` (reused, so no
    /// allocation per method) straight from the VM's strings; the class's signature is asked and
    /// made readable once. Nothing for a class not yet prepared. This runs for every method of
    /// every class the VM prepares.
    pub fn for_each_named_method(
        &self,
        class: JClass,
        name: &mut String,
        mut f: impl FnMut(MethodId, &str),
    ) {
        let Some(get_methods) = table_fn!(self.env, 52, GetClassMethodsFn) else {
            return;
        };
        let mut n: Jint = 0;
        let mut methods: *mut JMethodId = std::ptr::null_mut();
        // SAFETY: `class` is a live reference from the VM; fails for classes not yet
        // prepared, leaving `methods` null.
        let err = unsafe { get_methods(self.env, class, &mut n, &mut methods) };
        if err == JVMTI_ERROR_NONE && !methods.is_null() && n > 0 {
            // SAFETY: JVMTI returned `n` method ids at `methods`, freed only below, after
            // their last use.
            let ids = unsafe { std::slice::from_raw_parts(methods, n as usize) };
            if let Some(signature) = self.class_signature(class) {
                let class = names::class_name(&signature);
                for &id in ids {
                    let id = MethodId(id as usize);
                    let named = self.with_name_and_descriptor(id, true, |method, descriptor| {
                        name.clear();
                        names::push_method_name(name, &class, method, descriptor);
                    });
                    if named.is_some() {
                        f(id, name);
                    }
                }
            }
        }
        self.deallocate(methods.cast());
    }

    /// Name, source file and line table of `method`; `None` if the VM cannot tell (e.g. the
    /// class is being unloaded).
    pub fn method_info(&self, method: MethodId) -> Option<MethodInfo> {
        let id = method.0 as JMethodId;
        let (name, descriptor, class, signature) = self.name_parts(method, true)?;
        let mut info = MethodInfo {
            name: full_name(&signature, &name, descriptor.as_deref()),
            ..MethodInfo::default()
        };
        if self.source_files {
            if let Some(get_source) = table_fn!(self.env, 50, GetSourceFileNameFn) {
                let mut source = std::ptr::null_mut();
                // SAFETY: `class` is live; fails with ABSENT_INFORMATION when there is none.
                let err = unsafe { get_source(self.env, class, &mut source) };
                let source = self.vm_string(source);
                if err == JVMTI_ERROR_NONE {
                    info.file = source
                        .text()
                        .map(|file| names::source_path(&signature, &file));
                }
            }
        }
        if self.lines {
            if let Some(get_lines) = table_fn!(self.env, 70, GetLineNumberTableFn) {
                let mut count: Jint = 0;
                let mut table: *mut LineNumberEntry = std::ptr::null_mut();
                // SAFETY: `id` is live; fails for native/abstract methods, leaving table null.
                let err = unsafe { get_lines(self.env, id, &mut count, &mut table) };
                if err == JVMTI_ERROR_NONE && !table.is_null() && count > 0 {
                    // SAFETY: JVMTI returned `count` entries at `table`, freed just below.
                    let entries = unsafe { std::slice::from_raw_parts(table, count as usize) };
                    info.lines = entries
                        .iter()
                        .map(|e| (e.start_location, e.line_number))
                        .collect();
                    info.lines.sort_unstable();
                }
                self.deallocate(table.cast());
            }
        }
        Some(info)
    }

    /// Asks the VM to post again the events of kind `event` for what exists already.
    pub(crate) fn generate_events(&self, event: c_int) {
        if let Some(f) = table_fn!(self.env, 123, GenerateEventsFn) {
            // SAFETY: live env; the event number is one of jvmti.h's.
            unsafe { f(self.env, event) };
        }
    }
}

/// `pkg.Class.method(int, java.lang.String)`, or without the parameters when the VM gave no
/// descriptor.
fn full_name(class_signature: &str, name: &str, descriptor: Option<&str>) -> String {
    match descriptor {
        Some(descriptor) => names::method_name_with_signature(class_signature, name, descriptor),
        None => names::method_name(class_signature, name),
    }
}

/// The VM's method behind a jmethodID: its first word (HotSpot before JDK 26: the `Method*`
/// in the slot it points at; OpenJ9: the J9Method a `J9JNIMethodID*` starts with); 0 for a
/// null id. Only for VMs where `events::ids_point_at_methods` holds: since JDK 26
/// (JDK-8268406) a HotSpot jmethodID is a key into a table, not a pointer.
pub fn vm_method(method: MethodId) -> u64 {
    let id = method.0 as *const u64;
    if id.is_null() {
        return 0;
    }
    // SAFETY: callers pass only ids of a VM whose jmethodIDs are pointers
    // (`events::ids_point_at_methods`: OpenJ9, HotSpot before 26); such an id the VM just
    // handed out points at live VM memory whose first word is the method (HotSpot's jmethodID
    // slot, OpenJ9's J9JNIMethodID); the VM never frees the ids of loaded classes.
    unsafe { id.read_unaligned() }
}

/// A copy of OpenJ9's metadata for the body at `code_addr`: `compile_info` is its
/// J9JITExceptionTable*. `None` when it is null or does not describe this body.
pub fn copy_openj9_metadata(compile_info: *const c_void, code_addr: u64) -> Option<Vec<u8>> {
    if compile_info.is_null() {
        return None;
    }
    // SAFETY: OpenJ9 passes the body's J9JITExceptionTable as compile_info (jvmtiHook.c); every
    // build's struct has at least MIN_STRUCT bytes, and the table lives as long as the body.
    let head = unsafe { std::slice::from_raw_parts(compile_info.cast::<u8>(), j9::MIN_STRUCT) };
    let eyecatchers = j9::eyecatchers(head, code_addr)?;
    let len = j9::image_len(head, eyecatchers);
    // SAFETY: `len` is the table's own `size` (its allocation: the struct and its
    // variable-length section, bounded by MAX_IMAGE) or MIN_STRUCT; only copied.
    Some(unsafe { std::slice::from_raw_parts(compile_info.cast::<u8>(), len) }.to_vec())
}

/// The inline records of `compile_info` (a chain of jvmticmlr.h records), copied into `out`
/// (emptied first).
pub(crate) fn read_pc_stacks(
    compile_info: *const c_void,
    code_addr: u64,
    out: &mut PcStacks<MethodId>,
) {
    out.clear();
    let mut record = compile_info.cast::<CmlrHeader>();
    // A bound on the chain, so a corrupt `next` cannot loop forever.
    for _ in 0..64 {
        if record.is_null() {
            break;
        }
        // SAFETY: `compile_info` is null or a chain of records valid during the callback
        // (jvmticmlr.h); each starts with the common header.
        let header = unsafe { &*record };
        if header.kind == JVMTI_CMLR_INLINE_INFO && header.major == JVMTI_CMLR_MAJOR_VERSION_1 {
            // SAFETY: kind INLINE_INFO means the record is a jvmtiCompiledMethodLoadInlineRecord.
            let inline = unsafe { &*record.cast::<InlineRecord>() };
            if !inline.pcinfo.is_null() && inline.numpcs > 0 {
                // SAFETY: `pcinfo` points at `numpcs` PCStackInfo entries.
                let pcs =
                    unsafe { std::slice::from_raw_parts(inline.pcinfo, inline.numpcs as usize) };
                out.clear();
                for pc in pcs {
                    let offset = (pc.pc as u64).wrapping_sub(code_addr);
                    let Ok(pc_offset) = u32::try_from(offset) else {
                        continue;
                    };
                    let n = pc.numstackframes.max(0) as usize;
                    let (methods, bcis): (&[JMethodId], &[Jint]) =
                        if n > 0 && !pc.methods.is_null() && !pc.bcis.is_null() {
                            // SAFETY: both arrays have `numstackframes` entries.
                            unsafe {
                                (
                                    std::slice::from_raw_parts(pc.methods, n),
                                    std::slice::from_raw_parts(pc.bcis, n),
                                )
                            }
                        } else {
                            (&[], &[])
                        };
                    out.push(
                        pc_offset,
                        methods
                            .iter()
                            .zip(bcis)
                            .map(|(m, bci)| (MethodId(*m as usize), *bci)),
                    );
                }
            }
        }
        record = header.next;
    }
}

/// A NUL-terminated string the VM passed (options, a stub's name), or `None` for null.
pub(crate) fn vm_text(text: *const c_char) -> Option<String> {
    if text.is_null() {
        return None;
    }
    // SAFETY: the VM passes NUL-terminated strings valid during the call.
    Some(
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// The JVMTI 1.2 env of `vm`, with the capabilities the agent needs added (line numbers and
/// source files when the VM has them). `Err` says what failed.
pub(crate) fn open_jvmti(vm: *mut FunctionTable) -> Result<Jvmti, String> {
    if vm.is_null() {
        return Err("no JavaVM".into());
    }
    let get_env = table_fn!(vm, 7, GetEnvFn).ok_or("JNI GetEnv missing")?;
    let mut env: *mut c_void = std::ptr::null_mut();
    // SAFETY: `vm` is the JavaVM the VM passed to Agent_OnLoad/OnAttach.
    match unsafe { get_env(vm, &mut env, JVMTI_VERSION_1_2) } {
        JNI_OK if !env.is_null() => {}
        JNI_EDETACHED => return Err(NOT_LIVE.into()),
        _ => return Err("JVMTI 1.2 is not available".into()),
    }
    let env = env.cast::<FunctionTable>();

    let mut potential = [0u32; 4];
    if let Some(f) = table_fn!(env, 140, CapabilitiesFn) {
        // SAFETY: live env, `potential` is a 16-byte jvmtiCapabilities.
        unsafe { f(env, &mut potential) };
    }
    let wanted =
        CAN_GET_SOURCE_FILE_NAME | CAN_GET_LINE_NUMBERS | CAN_GENERATE_COMPILED_METHOD_LOAD_EVENTS;
    let mut caps = [potential[0] & wanted, 0, 0, 0];
    let add = table_fn!(env, 142, CapabilitiesFn).ok_or("AddCapabilities missing")?;
    // SAFETY: live env; `caps` is a valid jvmtiCapabilities with only potential bits set.
    if caps[0] & CAN_GENERATE_COMPILED_METHOD_LOAD_EVENTS == 0
        || unsafe { add(env, &mut caps) } != JVMTI_ERROR_NONE
    {
        return Err("the VM cannot generate CompiledMethodLoad events".into());
    }
    Ok(Jvmti {
        env,
        lines: caps[0] & CAN_GET_LINE_NUMBERS != 0,
        source_files: caps[0] & CAN_GET_SOURCE_FILE_NAME != 0,
    })
}

/// `JNI_VERSION_1_2` (jni.h): what an attaching thread asks for.
const JNI_VERSION_1_2: Jint = 0x0001_0002;

type AttachCurrentThreadFn =
    unsafe extern "C" fn(*mut FunctionTable, *mut *mut c_void, *mut c_void) -> Jint;
type DetachCurrentThreadFn = unsafe extern "C" fn(*mut FunctionTable) -> Jint;
type NewRefFn = unsafe extern "C" fn(RawEnv, *mut c_void) -> *mut c_void;
type DeleteRefFn = unsafe extern "C" fn(RawEnv, *mut c_void);

/// jni.h's `JavaVMAttachArgs`.
#[repr(C)]
struct AttachArgs {
    version: Jint,
    name: *const c_char,
    group: *mut c_void,
}

/// The VM (`JavaVM*`), kept from `Agent_OnLoad` / `Agent_OnAttach` to attach the agent's own
/// thread.
#[derive(Clone, Copy)]
pub struct JavaVm(*mut FunctionTable);

// SAFETY: a `JavaVM*` is process-wide and its invocation functions may be called from any
// thread (JNI spec, "Invocation API").
unsafe impl Send for JavaVm {}
// SAFETY: as above; the struct holds only the pointer.
unsafe impl Sync for JavaVm {}

impl JavaVm {
    pub(crate) fn of_vm(vm: *mut FunctionTable) -> Self {
        Self(vm)
    }

    /// Attaches the calling native thread to the VM as a daemon thread named `name` (a
    /// daemon: the VM does not wait for it to exit), so it may call JVMTI functions that need
    /// a Java thread; its JNI environment. Only in the live phase.
    pub fn attach_daemon(&self, name: &CStr) -> Result<JniEnv, String> {
        if self.0.is_null() {
            return Err("no JavaVM".into());
        }
        let attach = table_fn!(self.0, 8, AttachCurrentThreadFn)
            .ok_or("AttachCurrentThreadAsDaemon missing")?;
        let mut args = AttachArgs {
            version: JNI_VERSION_1_2,
            name: name.as_ptr(),
            group: std::ptr::null_mut(),
        };
        let mut env: *mut c_void = std::ptr::null_mut();
        // SAFETY: `self.0` is the VM's JavaVM; `env` and `args` are valid for the call (the VM
        // copies the name).
        let err = unsafe { attach(self.0, &mut env, (&mut args as *mut AttachArgs).cast()) };
        if err != JNI_OK || env.is_null() {
            return Err(format!("AttachCurrentThreadAsDaemon failed ({err})"));
        }
        Ok(JniEnv(env.cast()))
    }

    /// Detaches the calling thread, attached by [`JavaVm::attach_daemon`]; its [`JniEnv`] must
    /// not be used after this.
    pub fn detach_current_thread(&self) {
        if self.0.is_null() {
            return;
        }
        if let Some(detach) = table_fn!(self.0, 6, DetachCurrentThreadFn) {
            // SAFETY: `self.0` is the VM's JavaVM; the calling thread was attached and has no
            // Java frames (a native thread), as DetachCurrentThread requires.
            unsafe { detach(self.0) };
        }
    }
}

/// A thread's JNI environment (`JNIEnv*`): usable on that thread only, so it is neither `Send`
/// nor `Sync`.
#[derive(Clone, Copy)]
pub struct JniEnv(*mut FunctionTable);

/// A class held by a JNI weak global reference: it does not keep the class loaded. Deleted
/// with [`JniEnv::delete_weak`] (from any thread).
pub struct WeakClass(usize);

impl JniEnv {
    /// The environment the VM passed to an event callback; `None` for null.
    pub(crate) fn of_vm(env: *mut c_void) -> Option<Self> {
        (!env.is_null()).then(|| Self(env.cast()))
    }

    /// A weak global reference to `class` (a live reference from the VM).
    pub fn weak(self, class: JClass) -> Option<WeakClass> {
        let new_weak = table_fn!(self.0, 227, NewRefFn)?;
        // SAFETY: `self` is the calling thread's env; `class` a live reference from the VM.
        let weak = unsafe { new_weak(self.0, class) };
        (!weak.is_null()).then_some(WeakClass(weak as usize))
    }

    /// `f` of the class `weak` holds, while a local reference keeps it loaded; `None` when
    /// the class was unloaded.
    pub fn with_class<T>(self, weak: &WeakClass, f: impl FnOnce(JClass) -> T) -> Option<T> {
        let new_local = table_fn!(self.0, 26, NewRefFn)?;
        let delete_local = table_fn!(self.0, 24, DeleteRefFn)?;
        // SAFETY: `self` is the calling thread's env; `weak` a weak global reference not yet
        // deleted; a collected class gives null.
        let class = unsafe { new_local(self.0, weak.0 as *mut c_void) };
        if class.is_null() {
            return None;
        }
        let out = f(class);
        // SAFETY: `class` is the local reference made above, deleted once (an attached native
        // thread has no frame whose return would free it).
        unsafe { delete_local(self.0, class) };
        Some(out)
    }

    /// Deletes a weak global reference.
    pub fn delete_weak(self, weak: WeakClass) {
        if let Some(delete_weak) = table_fn!(self.0, 228, DeleteRefFn) {
            // SAFETY: `weak` is a weak global reference not yet deleted (taken by value).
            unsafe { delete_weak(self.0, weak.0 as *mut c_void) };
        }
    }
}

/// The event callbacks the agent installs, with jvmti.h's signatures.
pub(crate) struct Callbacks {
    pub(crate) vm_init: extern "C" fn(RawEnv, *mut c_void, *mut c_void),
    pub(crate) vm_death: extern "C" fn(RawEnv, *mut c_void),
    pub(crate) class_prepare: extern "C" fn(RawEnv, *mut c_void, *mut c_void, JClass),
    pub(crate) compiled_method_load:
        extern "C" fn(RawEnv, JMethodId, Jint, *const c_void, Jint, *const c_void, *const c_void),
    pub(crate) compiled_method_unload: extern "C" fn(RawEnv, JMethodId, *const c_void),
    pub(crate) dynamic_code_generated: extern "C" fn(RawEnv, *const c_char, *const c_void, Jint),
}

impl Jvmti {
    /// Installs `callbacks` and enables their events. `Err` says what failed.
    pub(crate) fn enable_events(&self, callbacks: &Callbacks) -> Result<(), String> {
        let env = self.env;
        let mut table = [std::ptr::null::<c_void>(); CALLBACK_SLOTS];
        let slot = |event: c_int| (event - EVENT_VM_INIT) as usize;
        table[slot(EVENT_VM_INIT)] = callbacks.vm_init as *const c_void;
        table[slot(EVENT_VM_DEATH)] = callbacks.vm_death as *const c_void;
        table[slot(EVENT_CLASS_PREPARE)] = callbacks.class_prepare as *const c_void;
        table[slot(EVENT_COMPILED_METHOD_LOAD)] = callbacks.compiled_method_load as *const c_void;
        table[slot(EVENT_COMPILED_METHOD_UNLOAD)] =
            callbacks.compiled_method_unload as *const c_void;
        table[slot(EVENT_DYNAMIC_CODE_GENERATED)] =
            callbacks.dynamic_code_generated as *const c_void;
        let set_callbacks =
            table_fn!(env, 122, SetEventCallbacksFn).ok_or("SetEventCallbacks missing")?;
        // SAFETY: the array has the layout of jvmtiEventCallbacks' first CALLBACK_SLOTS fields
        // (one function pointer per event from 50, each with jvmti.h's signature); the VM
        // copies it.
        let err = unsafe {
            set_callbacks(
                env,
                table.as_ptr().cast(),
                std::mem::size_of_val(&table) as Jint,
            )
        };
        if err != JVMTI_ERROR_NONE {
            return Err(format!("SetEventCallbacks failed ({err})"));
        }
        let enable = table_fn!(env, 2, SetEventNotificationModeFn)
            .ok_or("SetEventNotificationMode missing")?;
        for event in [
            EVENT_VM_INIT,
            EVENT_VM_DEATH,
            EVENT_CLASS_PREPARE,
            EVENT_COMPILED_METHOD_LOAD,
            EVENT_COMPILED_METHOD_UNLOAD,
            EVENT_DYNAMIC_CODE_GENERATED,
        ] {
            // SAFETY: live env; a null thread means all threads.
            let err = unsafe { enable(env, JVMTI_ENABLE, event, std::ptr::null_mut()) };
            if err != JVMTI_ERROR_NONE {
                return Err(format!("enabling event {event} failed ({err})"));
            }
        }
        Ok(())
    }
}

/// The calling thread's name as the kernel has it (`comm`: at most 15 bytes).
pub(crate) fn this_thread_name() -> Option<String> {
    nix::sys::prctl::get_name()
        .ok()
        .map(|name| name.to_string_lossy().into_owned())
}

/// Moves the calling thread from SCHED_OTHER to SCHED_BATCH, keeping its nice value: it keeps
/// its fair share of CPU time but no longer preempts the thread running where it wakes, so
/// work posted to it one item at a time is done in runs. Any other policy (a real-time or idle
/// JVM) is left alone. Whether it moved.
pub(crate) fn batch_this_thread() -> bool {
    // SAFETY: sched_getscheduler(0) only reads the calling thread's policy.
    if unsafe { libc::sched_getscheduler(0) } != libc::SCHED_OTHER {
        return false;
    }
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler only reads `param`, a valid sched_param that outlives the
    // call, and changes nothing but the calling thread's scheduling (pid 0: this thread).
    unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) == 0 }
}

/// The jitdump marker: an executable private mapping of the file's first page, which the
/// kernel reports to perf as an MMAP2 record. Deliberately never unmapped (perf's agent keeps
/// it until exit too).
pub fn map_marker(file: &File) -> std::io::Result<()> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = if page > 0 { page as usize } else { 4096 };
    // SAFETY: a fresh mapping chosen by the kernel over a valid fd; nothing is read through it.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            page,
            libc::PROT_READ | libc::PROT_EXEC,
            libc::MAP_PRIVATE,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The time-stamp counter.
#[cfg(target_arch = "x86_64")]
pub fn rdtsc() -> Option<u64> {
    // SAFETY: rdtsc exists on every x86_64 CPU and has no memory effects.
    #[allow(unused_unsafe)]
    Some(unsafe { core::arch::x86_64::_rdtsc() })
}

#[cfg(not(target_arch = "x86_64"))]
pub fn rdtsc() -> Option<u64> {
    None
}
