//! `jprof record -- java ...` end to end on the JDKs installed on this machine (found in
//! /usr/lib/jvm by version: OpenJDK 17 and Temurin 25 here; `JPROF_TEST_JDKS=17=/path/to/java,...` overrides):
//! jprof adds its JVMTI agent, and the folded stacks show the demo's JIT-compiled methods with
//! the method C2 inlined under its caller, the interpreter and stubs by name, and JVM native and
//! kernel frames in the same stacks. A stress run (thousands of compiled methods, class
//! unloading, exit while compilations are in flight) must leave the JVM exiting normally.
//!
//! `cargo test` does not build other packages' cdylibs, so the first test that needs the agent
//! runs `cargo build -p jprof-agent` with the profile of the jprof binary under test (same
//! target directory); jprof then finds `libjprof_agent.so` next to itself.

use crate::cli_support;
use cli_support::{jprof, JPROF};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

use jprof::format::jitdump::{self, RecordBody, TierKind};

/// JVM runs are CPU-heavy and the machine may have two cores: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

use crate::jdk_support;
use jdk_support::{jdk, jdks};

fn javac() -> PathBuf {
    let java = &jdks()[0].1;
    let javac = java.with_file_name("javac");
    assert!(javac.is_file(), "no javac next to {}", java.display());
    javac
}

/// Builds the agent with the same profile and target directory as the jprof under test.
pub(crate) fn agent() -> &'static Path {
    static AGENT: OnceLock<PathBuf> = OnceLock::new();
    AGENT.get_or_init(|| {
        let bin_dir = Path::new(JPROF)
            .parent()
            .expect("jprof has a directory")
            .to_path_buf();
        let mut cargo = Command::new(env!("CARGO"));
        cargo
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["build", "-p", "jprof-agent"]);
        match bin_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") => {}
            Some("release") => {
                cargo.arg("--release");
            }
            Some(profile) => {
                cargo.args(["--profile", profile]);
            }
            None => panic!("unexpected binary directory {}", bin_dir.display()),
        }
        let out = cargo.output().expect("run cargo build -p jprof-agent");
        assert!(
            out.status.success(),
            "building the agent failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let so = bin_dir.join("libjprof_agent.so");
        assert!(so.is_file(), "{} was not built", so.display());
        so
    })
}

fn compile(dir: &Path, sources: &[PathBuf]) {
    let out = Command::new(javac())
        .arg("-d")
        .arg(dir)
        .args(sources)
        .output()
        .expect("run javac");
    assert!(
        out.status.success(),
        "javac failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// From the summary's deep-frames note ("N samples' frame chains went past the 1 KiB stack
/// copy; ... read at sample time for M"): (N, M).
pub(crate) fn deep_frames_read(summary: &str) -> (u64, u64) {
    let counts: Vec<u64> = summary
        .lines()
        .find(|l| l.contains("frame chains went past the 1 KiB stack copy"))
        .unwrap_or_else(|| panic!("no deep-frames note\n{summary}"))
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    (counts[0], counts[2])
}

/// One example source (a path under the repository), compiled into a fresh directory.
pub(crate) fn example_classes(source: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    compile(
        dir.path(),
        &[Path::new(env!("CARGO_MANIFEST_DIR")).join(source)],
    );
    dir
}

fn demo_classes() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/java/demo");
    compile(
        dir.path(),
        &[src.join("App.java"), src.join("matrix/Matrix.java")],
    );
    dir
}

/// `jprof record` in `work` (where the agent writes its jitdump), then the folded stacks.
fn record(work: &Path, args: &[&str], command: &[&str]) -> (Output, Vec<(Vec<String>, u64)>) {
    let out = record_only(work, args, command);
    (out, folded(work))
}

fn record_only(work: &Path, args: &[&str], command: &[&str]) -> Output {
    agent();
    let data = work.join("java.data");
    let out = jprof()
        .current_dir(work)
        .env_remove("JPROF_AGENT")
        .args(["record", "-o"])
        .arg(&data)
        .args(args)
        .arg("--")
        .args(command)
        .output()
        .expect("run jprof record");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "jprof record failed: {stderr}");
    out
}

/// The folded stacks of `work/java.data`: (frames root first, weight).
fn folded(work: &Path) -> Vec<(Vec<String>, u64)> {
    folded_with(work, &[])
}

/// The same with more `report` options (`--weight off-cpu`, filters).
fn folded_with(work: &Path, options: &[&str]) -> Vec<(Vec<String>, u64)> {
    let data = work.join("java.data");
    let folded = work.join("java.folded");
    let report = jprof()
        .args(["report", "-f", "collapsed"])
        .args(options)
        .arg("-i")
        .arg(&data)
        .arg("-o")
        .arg(&folded)
        .output()
        .expect("run jprof report");
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let text = std::fs::read_to_string(&folded).expect("folded output");
    text.lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(stack, n)| {
            (
                stack.split(';').map(str::to_string).collect(),
                n.parse().expect("count"),
            )
        })
        .collect()
}

fn jitdumps(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("jit-") && n.ends_with(".dump"))
        })
        .collect()
}

fn invariant_tsc() -> bool {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    cpuinfo.contains(" constant_tsc") && cpuinfo.contains(" nonstop_tsc")
}

fn total(stacks: &[(Vec<String>, u64)], pred: impl Fn(&[String]) -> bool) -> u64 {
    stacks.iter().filter(|(s, _)| pred(s)).map(|(_, n)| n).sum()
}

fn demo_run(jdk_name: &str, keep_side_files: bool) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let java = jdk(jdk_name);
    let classes = demo_classes();
    let work = tempfile::tempdir().expect("tempdir");
    let java_arg = java.to_str().expect("utf-8 path");
    let cp = classes.path().to_str().expect("utf-8 path");
    let keep: &[&str] = if keep_side_files {
        &["--keep-side-files"]
    } else {
        &[]
    };
    let (out, stacks) = record(work.path(), keep, &[java_arg, "-cp", cp, "demo.App", "2"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("rounds"),
        "the demo did not finish: {stdout}"
    );
    assert!(
        stderr.contains("jprof's JVMTI agent wrote its jitdump"),
        "{stderr}"
    );
    assert!(!stderr.contains("jprof agent: not active"), "{stderr}");

    let is_multiply = |f: &str| f == "demo.matrix.Matrix.multiply_[j]";
    let in_dot = |s: &[String]| s.iter().any(|f| f.starts_with("demo.matrix.Matrix.dot_["));
    let dot_inlined = |s: &[String]| {
        s.windows(2)
            .any(|w| is_multiply(&w[0]) && w[1] == "demo.matrix.Matrix.dot_[i]")
    };
    let all = total(&stacks, |_| true);
    let dot = total(&stacks, in_dot);
    let inlined = total(&stacks, dot_inlined);
    assert!(
        dot * 4 > all,
        "JDK {jdk_name}: Matrix.dot has {dot} of {all} sample weight; Java JIT frames missing?"
    );
    assert!(
        inlined * 10 >= dot * 7,
        "JDK {jdk_name}: only {inlined} of {dot} dot samples show dot_[i] under multiply_[j]"
    );
    let has = |name: &str| total(&stacks, |s| s.iter().any(|f| f == name)) > 0;
    assert!(has("Interpreter_[j]"), "no interpreter frames");
    assert!(has("call_stub_[j]"), "no call_stub frames");
    // Java JIT frames sit on JVM native frames in the same stack, and kernel frames on top.
    assert!(
        total(&stacks, |s| {
            let native = s
                .iter()
                .position(|f| f.starts_with("JavaCalls::call_helper"));
            let java = s.iter().position(|f| is_multiply(f));
            matches!((native, java), (Some(n), Some(j)) if n < j)
        }) > 0,
        "no stack with JVM native frames under Java frames"
    );
    assert!(
        total(&stacks, |s| s.iter().any(|f| f.starts_with("demo."))
            && s.last().is_some_and(|f| f.ends_with("_[k]")))
            > 0,
        "no stack from Java code into the kernel"
    );

    let dumps = jitdumps(work.path());
    if !keep_side_files {
        assert!(dumps.is_empty(), "jitdump not removed: {dumps:?}");
        return;
    }
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    let bytes = std::fs::read(&dumps[0]).expect("read jitdump");
    let header = jitdump::parse_header(&bytes).expect("header");
    assert_eq!(header.arch_timestamp(), invariant_tsc());
    let batch = jitdump::parse_records(&bytes, &header, 0);
    assert!(batch.error.is_none(), "{:?}", batch.error);
    let mut pending_info2 = None;
    let mut interpreter_tier = false;
    let mut multiply_inlines_dot = false;
    let mut last_ts = 0;
    for r in &batch.records {
        // File order is time order, but for method names: written later by the agent's
        // naming thread, they carry the time their class was prepared.
        if !matches!(r.body, RecordBody::MethodNames(_)) {
            assert!(r.timestamp >= last_ts, "timestamps go back at {}", r.offset);
            last_ts = r.timestamp;
        }
        match &r.body {
            RecordBody::JitTier(t) if t.kind == TierKind::INTERPRETER => interpreter_tier = true,
            RecordBody::DebugInfo2(info) => pending_info2 = Some(info.clone()),
            RecordBody::CodeLoad { name, .. } => {
                // The agent writes names with their parameter types (docs/java.md).
                if name.starts_with("demo.matrix.Matrix.multiply(") {
                    multiply_inlines_dot |= pending_info2.as_ref().is_some_and(|i| {
                        i.functions[0].name == *name
                            && i.functions[0].file.as_deref() == Some("demo/matrix/Matrix.java")
                            && i.inline_calls.iter().any(|c| {
                                i.functions[c.function as usize]
                                    .name
                                    .starts_with("demo.matrix.Matrix.dot(")
                                    && c.call_line == 32
                            })
                    });
                }
                pending_info2 = None;
            }
            _ => {}
        }
    }
    assert!(interpreter_tier, "no interpreter tier record");
    assert!(
        multiply_inlines_dot,
        "no multiply load with dot inlined at line 32"
    );
    agent_writes_no_code_and_no_plain_line_tables(&bytes[header.records_start()..], &header);
}

/// The agent's CODE_LOADs give the code's size but not its bytes (the record ends with the
/// name's padding), and it writes no plain line table (DEBUG_INFO) beside the inline tree that
/// names and places a body: what the JVM would otherwise spend writing what no reader looks at.
fn agent_writes_no_code_and_no_plain_line_tables(records: &[u8], header: &jitdump::Header) {
    let (records, rest) = jitdump::split_records(records, header.endian);
    assert!(
        rest.is_empty(),
        "{} bytes after the last whole record",
        rest.len()
    );
    let mut loads = 0;
    for (id, record) in records {
        assert_ne!(
            id,
            jitdump::RecordId::CODE_DEBUG_INFO,
            "a DEBUG_INFO record"
        );
        if id != jitdump::RecordId::CODE_LOAD {
            continue;
        }
        loads += 1;
        let code_size = u64::from_le_bytes(record[40..48].try_into().expect("8 bytes"));
        let name_end = 56 + record[56..].iter().position(|&b| b == 0).expect("a NUL") + 1;
        assert!(code_size > 0, "a CODE_LOAD of no code");
        assert_eq!(
            record.len(),
            name_end.div_ceil(8) * 8,
            "code bytes after the name"
        );
    }
    assert!(loads > 100, "only {loads} CODE_LOADs");
}

#[test]
fn jdk17_inlined_method_under_its_caller() {
    demo_run("17", true);
}

#[test]
fn jdk25_inlined_method_under_its_caller() {
    demo_run("25", false);
}

/// Java source for the stress run: `Many` with `n` small methods (each gets compiled), a
/// `Plugin` loaded again and again by throw-away class loaders (unloaded at GC), and `Stress`,
/// which runs both and exits while a thread is still loading and compiling plugins.
fn stress_sources(dir: &Path, n: usize) -> (Vec<PathBuf>, PathBuf) {
    // Callers of 1500 methods are over HotSpot's HugeMethodLimit (8000 bytecode bytes), so they
    // stay interpreted and every `m<i>` is compiled on its own instead of inlined into them.
    const CHUNK: usize = 1500;
    let mut many = String::from("public final class Many {\n");
    for i in 0..n {
        many += &format!("    static int m{i}(int x) {{ return x * {i} + (x >>> 3) ^ {i}; }}\n");
    }
    for chunk in 0..n.div_ceil(CHUNK) {
        many += &format!("    static long run{chunk}(int x) {{ long s = 0;\n");
        for i in chunk * CHUNK..((chunk + 1) * CHUNK).min(n) {
            many += &format!("        s += m{i}(x);\n");
        }
        many += "        return s; }\n";
    }
    many += "    static long runAll(int rounds) { long s = 0;\n        for (int r = 0; r < rounds; r++) {\n";
    for chunk in 0..n.div_ceil(CHUNK) {
        many += &format!("            s += run{chunk}(r);\n");
    }
    many += "        }\n        return s; }\n}\n";

    let plugin = "public final class Plugin {\n    public static int work(int x) { int s = 0; for (int i = 0; i < 50; i++) { s += (x ^ i) * 31; } return s; }\n}\n";
    let stress = r#"import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;

public final class Stress {
    static long plugins(URL url, int count) throws Exception {
        long s = 0;
        for (int r = 0; r < count; r++) {
            try (URLClassLoader loader = new URLClassLoader(new URL[] {url}, null)) {
                Method work = loader.loadClass("Plugin").getMethod("work", int.class);
                for (int i = 0; i < 20000; i++) {
                    s += (Integer) work.invoke(null, i);
                }
            }
        }
        return s;
    }

    public static void main(String[] args) throws Exception {
        URL url = new java.io.File(args[0]).toURI().toURL();
        long s = Many.runAll(2000);
        s += plugins(url, 20);
        System.gc();
        System.gc();
        Thread.sleep(300);
        Thread busy = new Thread(() -> {
            try {
                while (true) {
                    plugins(url, 1);
                }
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        busy.setDaemon(true);
        busy.start();
        Thread.sleep(150);
        System.out.println("stress done " + (s != 0));
        System.exit(0);
    }
}
"#;
    let main_dir = dir.join("src");
    let plugin_dir = dir.join("plugin-src");
    std::fs::create_dir_all(&main_dir).expect("mkdir");
    std::fs::create_dir_all(&plugin_dir).expect("mkdir");
    std::fs::write(main_dir.join("Many.java"), many).expect("write");
    std::fs::write(main_dir.join("Stress.java"), stress).expect("write");
    std::fs::write(plugin_dir.join("Plugin.java"), plugin).expect("write");
    (
        vec![main_dir.join("Many.java"), main_dir.join("Stress.java")],
        plugin_dir.join("Plugin.java"),
    )
}

fn stress_run(jdk_name: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let java = jdk(jdk_name);
    let build = tempfile::tempdir().expect("tempdir");
    let methods = 3000;
    let (main_sources, plugin_source) = stress_sources(build.path(), methods);
    let classes = build.path().join("classes");
    let plugin_classes = build.path().join("plugin");
    compile(&classes, &main_sources);
    compile(&plugin_classes, &[plugin_source]);

    let work = tempfile::tempdir().expect("tempdir");
    let (out, _stacks) = record(
        work.path(),
        &["--keep-side-files"],
        &[
            java.to_str().expect("utf-8"),
            // Compile in the calling thread: every method is compiled at its threshold (no
            // queue-length scaling), and at exit a thread is waiting on a compilation.
            "-Xbatch",
            "-cp",
            classes.to_str().expect("utf-8"),
            "Stress",
            plugin_classes.to_str().expect("utf-8"),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("stress done"), "{stdout}\n{stderr}");
    assert!(stderr.contains("target exit code 0"), "{stderr}");

    let dumps = jitdumps(work.path());
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    let bytes = std::fs::read(&dumps[0]).expect("read jitdump");
    let header = jitdump::parse_header(&bytes).expect("header");
    let batch = jitdump::parse_records(&bytes, &header, 0);
    assert!(batch.error.is_none(), "{:?}", batch.error);
    let mut many_loads = std::collections::HashSet::new();
    let mut plugin_loads = 0;
    let mut unloads = 0;
    for r in &batch.records {
        match &r.body {
            RecordBody::CodeLoad { name, .. } if name.starts_with("Many.m") => {
                many_loads.insert(name.clone());
            }
            RecordBody::CodeLoad { name, .. } if name == "Plugin.work(int)" => plugin_loads += 1,
            RecordBody::CodeUnload { .. } => unloads += 1,
            _ => {}
        }
    }
    assert_eq!(
        many_loads.len(),
        methods,
        "JDK {jdk_name}: not every compiled method was written"
    );
    assert!(
        plugin_loads >= 20,
        "JDK {jdk_name}: {plugin_loads} Plugin.work loads"
    );
    assert!(
        unloads > 0,
        "JDK {jdk_name}: no unload records after class unloading"
    );
}

#[test]
fn jdk17_stress_many_methods_unloading_and_exit() {
    stress_run("17");
}

#[test]
fn jdk25_stress_many_methods_unloading_and_exit() {
    stress_run("25");
}

/// Waits until the JVM has initialized: it creates its perf data file `hsperfdata_USER/PID`
/// in `tmp` before it runs `main` (the readiness jprof's attach needs).
fn wait_until_jvm_ready(tmp: &Path, pid: &str) {
    let start = std::time::Instant::now();
    loop {
        let ready = std::fs::read_dir(tmp)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| {
                e.file_name().to_string_lossy().starts_with("hsperfdata_")
                    && e.path().join(pid).exists()
            });
        if ready {
            return;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "the JVM {pid} never created {}/hsperfdata_*/{pid}",
            tmp.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// demo.App's work (examples/java/demo) until its standard input closes: the test, not a
/// fixed run time, decides how long the JVM runs (two sessions and their ends take far longer
/// than usual on a loaded machine; a 25 s demo.App once ended during the second).
const UNTIL_CLOSED: &str = "import demo.matrix.Matrix;\n\
public final class UntilClosed {\n\
  static volatile boolean closed;\n\
  public static void main(String[] a) {\n\
    Thread reader = new Thread(() -> {\n\
      try { while (System.in.read() >= 0) {} } catch (java.io.IOException e) {}\n\
      closed = true;\n\
    });\n\
    reader.setDaemon(true);\n\
    reader.start();\n\
    Matrix m = new Matrix(96, 1);\n\
    Matrix acc = new Matrix(96, 2);\n\
    double check = 0;\n\
    int rounds = 0;\n\
    while (!closed) { acc = m.multiply(acc); check += acc.trace(); acc = new Matrix(96, rounds++); }\n\
    System.out.println(\"rounds \" + rounds + \" check \" + (check > 0));\n\
  }\n\
}\n";

/// `jprof record -p` on a JVM started with no flags: the agent is loaded through the HotSpot
/// attach protocol and replays the compiled code, the summary says how to get full stacks, the
/// JVM keeps running after jprof stops, and a second session on the same JVM works too.
fn attach_run(jdk_name: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Build the agent before the JVM starts: the first build can outlast the JVM's run.
    agent();
    let java = jdk(jdk_name);
    let classes = tempfile::tempdir().expect("tempdir");
    let until_closed = classes.path().join("UntilClosed.java");
    std::fs::write(&until_closed, UNTIL_CLOSED).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/java/demo");
    compile(
        classes.path(),
        &[
            src.join("App.java"),
            src.join("matrix/Matrix.java"),
            until_closed,
        ],
    );
    let work = tempfile::tempdir().expect("tempdir");
    let mut jvm = Command::new(&java)
        .current_dir(work.path())
        .env_remove("JAVA_TOOL_OPTIONS")
        .args(["-cp"])
        .arg(classes.path())
        .arg("UntilClosed")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the JVM");
    let pid = jvm.id().to_string();
    wait_until_jvm_ready(Path::new("/tmp"), &pid);
    for session in 0..2 {
        if let Some(status) = jvm.try_wait().expect("wait") {
            let out = jvm.wait_with_output().expect("JVM output");
            panic!(
                "JDK {jdk_name}: the JVM exited before session {session}: {status:?} {} {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let out = record_only(work.path(), &["-p", &pid, "--duration", "2"], &[]);
        assert!(
            jvm.try_wait().expect("wait").is_none(),
            "JDK {jdk_name}: the JVM stopped during session {session}"
        );
        let stacks = folded(work.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("loaded jprof's JVMTI agent"),
            "session {session}: {stderr}"
        );
        assert!(
            stderr.contains("without -XX:+PreserveFramePointer"),
            "{stderr}"
        );
        let has = |suffix: &str| {
            total(&stacks, |s| {
                s.iter()
                    .any(|f| f == &format!("demo.matrix.Matrix.{suffix}"))
            })
        };
        assert!(
            has("multiply_[j]") > 0 && has("dot_[i]") > 0,
            "JDK {jdk_name} session {session}: no named Java frames"
        );
        let left = jitdumps(work.path());
        assert!(
            left.is_empty(),
            "session {session}: jitdump left behind: {left:?}\n{stderr}"
        );
    }
    // Closing its stdin ends the JVM's loop: it exits as it would on its own.
    drop(jvm.stdin.take());
    let done = jvm.wait_with_output().expect("JVM output");
    assert!(done.status.success(), "JVM exit: {:?}", done.status);
    assert!(String::from_utf8_lossy(&done.stdout).contains("rounds"));
}

#[test]
fn jdk17_attach_to_a_running_jvm() {
    attach_run("17");
}

#[test]
fn jdk25_attach_to_a_running_jvm() {
    attach_run("25");
}

/// `jprof record -p` on a JVM in a container-like sandbox: its own mount namespace with a
/// private `/tmp` (where it runs, so its jitdump and attach socket are invisible from here
/// except through `/proc/PID/root`) and its own PID namespace (it is pid 1 there, so its files
/// are named `jit-1.dump`, `.java_pid1`). jprof must copy its agent in, find the jitdump, and
/// name Java frames.
#[test]
fn jdk17_attach_to_a_jvm_in_other_mount_and_pid_namespaces() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    agent();
    // Outside /tmp, which the sandbox covers with its own tmpfs.
    let classes = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/java/demo");
    compile(
        classes.path(),
        &[src.join("App.java"), src.join("matrix/Matrix.java")],
    );
    let java = jdk("17");
    let script = format!(
        // Killed at the end: a run time far longer than the test on a loaded machine.
        "mount -t tmpfs tmpfs /tmp && cd /tmp && exec {} -cp {} demo.App 600",
        java.display(),
        classes.path().display()
    );
    let mut sandbox = Command::new("unshare")
        .args([
            "--mount",
            "--pid",
            "--fork",
            "--mount-proc",
            "--propagation",
            "private",
        ])
        .args(["sh", "-c", &script])
        .env_remove("JAVA_TOOL_OPTIONS")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run unshare");
    // The JVM is the child of unshare (pid 1 inside).
    let mut jvm_pid = None;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let children =
            std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", sandbox.id()))
                .unwrap_or_default();
        if let Some(pid) = children.split_whitespace().next() {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm.trim() == "java" {
                jvm_pid = Some(pid.to_string());
                break;
            }
        }
    }
    let Some(pid) = jvm_pid else {
        let _ = sandbox.kill();
        let out = sandbox.wait_with_output().expect("sandbox output");
        panic!(
            "the sandboxed JVM did not start in 60 s: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // Pid 1 in its own pid namespace, with its own /tmp.
    wait_until_jvm_ready(&PathBuf::from(format!("/proc/{pid}/root/tmp")), "1");
    let work = tempfile::tempdir().expect("tempdir");
    let out = record_only(work.path(), &["-p", &pid, "--duration", "2"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let container_tmp = PathBuf::from(format!("/proc/{pid}/root/tmp"));
    let left: Vec<String> = std::fs::read_dir(&container_tmp)
        .expect("the sandbox's /tmp")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let _ = sandbox.kill();
    let _ = Command::new("kill").arg(&pid).status();
    let _ = sandbox.wait();
    assert!(stderr.contains("loaded jprof's JVMTI agent"), "{stderr}");
    assert!(
        stderr.contains(&format!("jitdump {}/jit-1.dump", container_tmp.display())),
        "the sandbox's jitdump was not found: {stderr}"
    );
    assert!(
        !left.iter().any(|n| n.starts_with("jprof-agent")),
        "the agent copy was left in the sandbox: {left:?}"
    );
    let stacks = folded(work.path());
    let has = |name: &str| total(&stacks, |s| s.iter().any(|f| f == name));
    assert!(
        has("demo.matrix.Matrix.multiply_[j]") > 0,
        "no named Java frames from the sandboxed JVM: {stderr}"
    );
}

/// `record --off-cpu` of a Java thread napping 500 × 2 ms in `Thread.sleep` through
/// `Sleeper.napOnce` (examples/offcpu/Sleeper.java), in fp mode: the wait is under
/// `JVM_Sleep` with its Java callers (libc's futex path has no frame pointers; the stack copy
/// is walked through it), and once HotSpot compiled `napOnce` its JIT frame is named.
#[test]
fn jdk17_off_cpu_time_in_thread_sleep_is_under_its_java_frames() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let java = jdk("17");
    let classes = example_classes("examples/offcpu/Sleeper.java");
    let work = tempfile::tempdir().expect("tempdir");
    let out = record_only(
        work.path(),
        &["--off-cpu"],
        &[
            java.to_str().unwrap(),
            "-cp",
            classes.path().to_str().unwrap(),
            "Sleeper",
            "500",
        ],
    );
    let waited_ms = sleeper_waited_ms(&out);
    let stacks = folded_with(work.path(), &["--weight", "off-cpu", "--comm", "java"]);
    let sleeping = total(&stacks, |s| s.iter().any(|f| f == "JVM_Sleep"));
    let named = total(&stacks, |s| {
        s.iter().any(|f| f == "Sleeper.napOnce_[j]") && s.iter().any(|f| f == "JVM_Sleep")
    });
    // 500 naps of 2 ms: at least 1 s asleep (timer slack makes each nap a little longer), and
    // at most the time the program measured around its naps (+5%): on a busy machine a thread
    // woken from its nap may wait for a CPU, which counts as off the CPU (1.88 s once).
    assert!(
        (1e9..=1.05e6 * waited_ms.max(1000.0)).contains(&(sleeping as f64)),
        "{sleeping} ns under JVM_Sleep, expected between 1 s and the {waited_ms} ms the \
         program waited (+5%): {stacks:?}"
    );
    assert!(
        named * 5 > sleeping,
        "only {named} of {sleeping} ns asleep under a named Sleeper.napOnce JIT frame"
    );
}

/// How long Sleeper measured its naps to take, from its output (`waited 1012.3 ms`).
fn sleeper_waited_ms(out: &Output) -> f64 {
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("waited ")?.strip_suffix(" ms")?.parse().ok())
        .unwrap_or_else(|| panic!("Sleeper did not say how long it waited: {stdout}"))
}

/// `record --off-cpu` of Sleeper run interpreted only (`-Xint`): each switch-out happens in a
/// futex call of libc, which keeps no frame pointer, so the kernel's callchain is the IP alone
/// and the stack is the walk of the copy. The time the program measured around its 500 naps is
/// under `frame`, interpreted and named, not under an anonymous `Interpreter`.
fn off_cpu_time_under_an_interpreted_frame(jdk_name: &str, frame: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let java = jdk(jdk_name);
    let classes = example_classes("examples/offcpu/Sleeper.java");
    let work = tempfile::tempdir().expect("tempdir");
    let out = record_only(
        work.path(),
        &["--off-cpu"],
        &[
            java.to_str().unwrap(),
            "-Xint",
            "-cp",
            classes.path().to_str().unwrap(),
            "Sleeper",
            "500",
        ],
    );
    let waited_ms = sleeper_waited_ms(&out);
    let stacks = folded_with(work.path(), &["--weight", "off-cpu", "--comm", "java"]);
    let named = total(&stacks, |s| {
        s.iter().any(|f| f == frame) && s.iter().any(|f| f.starts_with("JVM_Sleep"))
    });
    let waited_ns = waited_ms * 1e6;
    assert!(
        (0.9 * waited_ns..1.05 * waited_ns).contains(&(named as f64)),
        "{named} ns off the CPU under {frame}, the program waited {waited_ms} ms: \
         {stacks:?}"
    );
}

#[test]
fn jdk17_off_cpu_time_under_an_interpreted_frame_is_named() {
    off_cpu_time_under_an_interpreted_frame("17", "Sleeper.sleepLoop_[int]");
}

/// JDK 25's `Thread.sleep` goes through two more interpreted frames (`sleepNanos`,
/// `sleepNanos0`): `sleepLoop` lies past the 1 KiB copy, where a switch-out's frames are not
/// read (the BPF program follows the frame pointer, which libc's futex path does not keep), so
/// the innermost of Sleeper's frames is the one checked.
#[test]
fn jdk25_off_cpu_time_under_an_interpreted_frame_is_named() {
    off_cpu_time_under_an_interpreted_frame("25", "Sleeper.napOnce_[int]");
}

/// Overloads stay apart (examples/java/overloads): `Overloads.mix(int)` and `mix(long)` are two
/// frames, while a method with no overload is shown short (`Overloads.main`); `--signatures`
/// shows every parameter list.
#[test]
fn jdk17_overloads_are_two_frames_and_the_rest_is_short() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let java = jdk("17");
    let classes = example_classes("examples/java/overloads/Overloads.java");
    let work = tempfile::tempdir().expect("tempdir");
    let (_, stacks) = record(
        work.path(),
        &[],
        &[
            java.to_str().unwrap(),
            "-cp",
            classes.path().to_str().unwrap(),
            "Overloads",
            "2",
        ],
    );
    let under = |name: &str| {
        total(&stacks, |s| {
            s.iter()
                .any(|f| f.strip_suffix("_[j]").or(f.strip_suffix("_[i]")) == Some(name))
        })
    };
    let all = total(&stacks, |_| true);
    let (int, long) = (under("Overloads.mix(int)"), under("Overloads.mix(long)"));
    assert!(
        int * 10 > all && long * 10 > all,
        "mix(int) {int}, mix(long) {long} of {all}: {stacks:?}"
    );
    assert!(
        under("Overloads.main") > 0,
        "main is shown short: {stacks:?}"
    );
    assert!(
        !stacks
            .iter()
            .flat_map(|(s, _)| s)
            .any(|f| f.starts_with("Overloads.mix_") || f.starts_with("Overloads.main(")),
        "a short overload or a long unique name: {stacks:?}"
    );
    let full = jprof()
        .args(["report", "-f", "collapsed", "--signatures", "-i"])
        .arg(work.path().join("java.data"))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&full.stdout).contains("Overloads.main(java.lang.String[])_[j]")
    );
}

/// `java -Xint`: every Java method runs in HotSpot's interpreter, and each interpreted frame is
/// named by the `Method*` in its frame (agent-published names): ≥ 60% of the samples show
/// `Overloads.main` → `Overloads.mix(…)` as interpreted frames (`_[int]`), with `main` as the
/// parent, in fp and dwarf modes, on JDK 17 and 25.
fn interpreted_run(jdk_name: &str, call_graph: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let java = jdk(jdk_name);
    let classes = example_classes("examples/java/overloads/Overloads.java");
    let work = tempfile::tempdir().expect("tempdir");
    let (_, stacks) = record(
        work.path(),
        &["--call-graph", call_graph],
        &[
            java.to_str().unwrap(),
            "-Xint",
            "-cp",
            classes.path().to_str().unwrap(),
            "Overloads",
            "1",
        ],
    );
    let all = total(&stacks, |_| true);
    let named = total(&stacks, |s| {
        s.windows(2).any(|w| {
            w[0] == "Overloads.main_[int]"
                && (w[1] == "Overloads.mix(int)_[int]" || w[1] == "Overloads.mix(long)_[int]")
        })
    });
    assert!(
        named * 10 >= all * 6,
        "JDK {jdk_name} {call_graph}: {named} of {all} weight under named interpreted frames"
    );
    // Never a wrong name: every interpreted frame names a method of the program or the JDK.
    for (stack, _) in &stacks {
        for f in stack.iter().filter(|f| f.ends_with("_[int]")) {
            assert!(f.contains('.'), "odd interpreted frame {f}");
        }
    }
}

#[test]
fn jdk17_interpreted_frames_are_named_fp() {
    interpreted_run("17", "fp");
}

#[test]
fn jdk17_interpreted_frames_are_named_dwarf() {
    interpreted_run("17", "dwarf");
}

#[test]
fn jdk25_interpreted_frames_are_named_fp() {
    interpreted_run("25", "fp");
}

/// The agent's JDK 26+ path (jmethodIDs are opaque since JDK-8268406, so no `Method*` is read),
/// forced on the installed JDKs with `JPROF_AGENT_OPAQUE_METHOD_IDS=1`: the JVM runs normally,
/// compiled methods are still named, and interpreted frames stay `Interpreter` (never a name).
fn opaque_ids_run(jdk_name: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let java = jdk(jdk_name);
    let classes = example_classes("examples/java/overloads/Overloads.java");
    for interpreted in [true, false] {
        let work = tempfile::tempdir().expect("tempdir");
        let mut command = vec![
            "env",
            "JPROF_AGENT_OPAQUE_METHOD_IDS=1",
            java.to_str().unwrap(),
        ];
        if interpreted {
            command.push("-Xint");
        }
        command.extend(["-cp", classes.path().to_str().unwrap(), "Overloads", "1"]);
        let (out, stacks) = record(work.path(), &[], &command);
        let frames = || stacks.iter().flat_map(|(s, _)| s);
        assert!(
            !frames().any(|f| f.ends_with("_[int]")),
            "JDK {jdk_name}: an interpreted frame was named without Method* names"
        );
        if interpreted {
            assert!(
                frames().any(|f| f == "Interpreter_[j]"),
                "JDK {jdk_name}: no Interpreter frames: {stacks:?}"
            );
        } else {
            assert!(
                frames().any(|f| f.starts_with("Overloads.mix(") && f.ends_with("_[j]")),
                "JDK {jdk_name}: compiled mix not named: {stacks:?}"
            );
        }
        assert!(out.status.success());
    }
}

#[test]
fn jdk17_agent_with_opaque_method_ids() {
    opaque_ids_run("17");
}

#[test]
fn jdk25_agent_with_opaque_method_ids() {
    opaque_ids_run("25");
}

/// A Java program that compiles methods until HotSpot's Service Thread is in SCHED_BATCH
/// (policy 3 in `/proc/self/task/TID/stat`) or `args[0]` seconds pass, then prints its policy.
const SERVICE_THREAD_POLICY: &str = r#"import java.nio.file.Files;
import java.nio.file.Path;

/** Compiles methods until HotSpot's Service Thread is in SCHED_BATCH or args[0] seconds pass; prints its policy. */
public class ServiceThreadPolicy {
    static long work(int n) {
        long s = 0;
        for (int i = 0; i < n; i++) s += (i * 31L) ^ (s >>> 3);
        return s;
    }

    public static void main(String[] args) throws Exception {
        long deadline = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000_000L;
        String policy = "none";
        long sink = 0;
        do {
            for (int i = 0; i < 2000; i++) sink += work(1000 + i);
            policy = policyOf("Service Thread");
        } while (!policy.equals("3") && System.nanoTime() < deadline);
        System.out.println("Service Thread policy " + policy + " (" + (sink & 1) + ")");
    }

    /** Field 41 of the thread's stat (its scheduling policy), "none" without such a thread. */
    static String policyOf(String name) throws Exception {
        try (var tasks = Files.newDirectoryStream(Path.of("/proc/self/task"))) {
            for (Path task : tasks) {
                if (Files.readString(task.resolve("comm")).strip().equals(name)) {
                    String stat = Files.readString(task.resolve("stat"));
                    String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
                    return fields[41 - 3];
                }
            }
        }
        return "none";
    }
}
"#;

/// The agent moves HotSpot's Service Thread, which posts it every compiled method, to
/// SCHED_BATCH (no wake-up preemption: the context-switch storm it caused cost the JVM more
/// than the agent's own work); without the agent (`JAVA_TOOL_OPTIONS` taken out of the JVM's
/// environment) the thread stays in SCHED_OTHER (0), so the change is the agent's.
fn service_thread_run(jdk_name: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let java = jdk(jdk_name);
    let classes = tempfile::tempdir().expect("tempdir");
    let source = classes.path().join("ServiceThreadPolicy.java");
    std::fs::write(&source, SERVICE_THREAD_POLICY).expect("write the source");
    compile(classes.path(), &[source]);
    let run = |with_agent: bool, seconds: &str| {
        let work = tempfile::tempdir().expect("tempdir");
        let mut command = vec![];
        if !with_agent {
            command.extend(["env", "-u", "JAVA_TOOL_OPTIONS"]);
        }
        command.extend([
            java.to_str().unwrap(),
            "-cp",
            classes.path().to_str().unwrap(),
            "ServiceThreadPolicy",
            seconds,
        ]);
        let out = record_only(work.path(), &[], &command);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("Service Thread policy ").map(str::to_string))
            .unwrap_or_else(|| panic!("JDK {jdk_name}: no policy printed: {out:?}"))
    };
    let with = run(true, "20");
    assert!(
        with.starts_with("3 "),
        "JDK {jdk_name}: under the agent the Service Thread's policy is {with}, not SCHED_BATCH"
    );
    let without = run(false, "2");
    assert!(
        without.starts_with("0 "),
        "JDK {jdk_name}: without the agent the Service Thread's policy is {without}, not SCHED_OTHER"
    );
}

#[test]
fn jdk17_the_service_thread_runs_in_sched_batch_under_the_agent() {
    service_thread_run("17");
}

#[test]
fn jdk25_the_service_thread_runs_in_sched_batch_under_the_agent() {
    service_thread_run("25");
}

/// The agent names a prepared class's methods on its own thread, later, but stamps the names
/// with the time the class was prepared (a report names an interpreted frame only by a name
/// given at or before the sample): `Late` loads 300 classes just before `System.exit`, each
/// name must be in the jitdump (those still queued at VM death are named then), stamped between
/// the times `Late` read around the loading (the agent's clock forced to CLOCK_MONOTONIC, which
/// is `System.nanoTime`'s). And the agent's naming thread does not delay the exit: HotSpot's
/// last safepoint waits up to 300 ms for every Java thread in native code, which an attached
/// thread left idle is; from `Late`'s last time to its exit takes less than 250 ms (the best of
/// up to 3 runs, so a load spike does not fail it; with the thread left attached every run
/// took 320–340 ms).
fn late_classes_run(jdk_name: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let java = jdk(jdk_name);
    let build = tempfile::tempdir().expect("tempdir");
    let count = 300;
    let mut sources = Vec::new();
    for i in 0..count {
        let path = build.path().join(format!("C{i}.java"));
        let source = format!(
            "public final class C{i} {{ public static int f{i}(int x) {{ return x + {i}; }} }}\n"
        );
        std::fs::write(&path, source).expect("write");
        sources.push(path);
    }
    let late = build.path().join("Late.java");
    std::fs::write(
        &late,
        r#"public final class Late {
    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        long before = System.nanoTime();
        long s = 0;
        for (int i = 0; i < n; i++) {
            s += (Integer) Class.forName("C" + i).getMethod("f" + i, int.class).invoke(null, i);
        }
        long after = System.nanoTime();
        System.out.println("loaded " + before + " " + after + " " + s);
        System.exit(0);
    }
}
"#,
    )
    .expect("write");
    sources.push(late);
    let classes = build.path().join("classes");
    compile(&classes, &sources);

    let now = || {
        let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("clock");
        t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
    };
    // (work directory, Late's times before and after the loading, its exit's lateness in ns)
    let run = || {
        let work = tempfile::tempdir().expect("tempdir");
        let out = Command::new(&java)
            .env("JPROF_AGENT_CLOCK", "monotonic")
            .arg(format!(
                "-agentpath:{}=dir={}",
                agent().display(),
                work.path().display()
            ))
            .arg("-cp")
            .arg(&classes)
            .args(["Late", &count.to_string()])
            .output()
            .expect("run java");
        let exited = now();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let times: Vec<u64> = stdout
            .lines()
            .find_map(|l| l.strip_prefix("loaded "))
            .expect("Late's times")
            .split(' ')
            .take(2)
            .map(|t| t.parse().expect("a time"))
            .collect();
        (work, times[0], times[1], exited.saturating_sub(times[1]))
    };
    let (work, before, after, mut exit) = run();
    for _ in 1..3 {
        if exit < 250_000_000 {
            break;
        }
        exit = exit.min(run().3);
    }
    assert!(
        exit < 250_000_000,
        "JDK {jdk_name}: the JVM took {} ms to exit after its last line",
        exit / 1_000_000
    );

    let dumps = jitdumps(work.path());
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    let bytes = std::fs::read(&dumps[0]).expect("read jitdump");
    let header = jitdump::parse_header(&bytes).expect("header");
    assert!(
        !header.arch_timestamp(),
        "JPROF_AGENT_CLOCK=monotonic was not taken"
    );
    let batch = jitdump::parse_records(&bytes, &header, 0);
    assert!(batch.error.is_none(), "{:?}", batch.error);
    let mut named = std::collections::HashMap::new();
    for r in &batch.records {
        if let RecordBody::MethodNames(list) = &r.body {
            for (_, name) in list {
                named.insert(name.clone(), r.timestamp);
            }
        }
    }
    for i in 0..count {
        let name = format!("C{i}.f{i}(int)");
        let Some(&at) = named.get(&name) else {
            panic!(
                "JDK {jdk_name}: {name} was not named ({} names)",
                named.len()
            );
        };
        assert!(
            (before..=after).contains(&at),
            "JDK {jdk_name}: {name} stamped {at}, not when its class was prepared ({before}..{after})"
        );
    }
}

#[test]
fn jdk17_classes_loaded_just_before_exit_are_named_when_prepared_and_the_exit_is_prompt() {
    late_classes_run("17");
}

#[test]
fn jdk25_classes_loaded_just_before_exit_are_named_when_prepared_and_the_exit_is_prompt() {
    late_classes_run("25");
}

/// How [`deep_interpreted_run`] starts the JVM.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Launched {
    Directly,
    /// Through launchers jprof sees through (`timeout`, `sh -c '… exec "$0" "$@"'`).
    ThroughLaunchers,
    /// Through a script that runs "$JAVACMD" (Gradle's and Maven's wrappers): not foreseen
    /// from the command line, found as it maps libjvm.so.
    Hidden,
}

/// A stack far deeper than the kernel's largest copy (64 KiB) and its callchain limit (127
/// frames): `Deep.main` → 800 × `Deep.descend` → `Deep.spin`, interpreted (`-Xint`). The frames
/// past the 1 KiB copy are read at sample time by jprof's BPF program (docs/java.md): every
/// sample in `spin` has the whole stack, each `descend` named, down to `main` and the thread's
/// start. Where the kernel refuses the program (`JPROF_NO_BPF=1` stands in), the copy is 64 KiB.
/// Without the program (`--call-graph fp`: its 1 KiB copy, no program) no sample in `spin`
/// reaches `main`.
fn deep_interpreted_run(jdk_name: &str, launched: Launched) {
    const DEPTH: usize = 800;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let java = jdk(jdk_name);
    let classes = example_classes("examples/java/deep/Deep.java");
    // (summary, folded stacks, stack bytes copied per sample); `no_bpf`: as on a kernel that
    // refuses the program; `launcher`: the words before `java`.
    let run_by = |launcher: &[&str], args: &[&str], no_bpf: bool| {
        agent();
        let work = tempfile::tempdir().expect("tempdir");
        let data = work.path().join("java.data");
        let depth = DEPTH.to_string();
        let mut cmd = jprof();
        cmd.current_dir(work.path())
            .env_remove("JPROF_AGENT")
            .args(["record", "-o"])
            .arg(&data)
            .args(args)
            .arg("--")
            .args(launcher)
            .args([
                java.to_str().unwrap(),
                "-Xint",
                "-cp",
                classes.path().to_str().unwrap(),
                "Deep",
                &depth,
                "3",
            ]);
        if no_bpf {
            cmd.env("JPROF_NO_BPF", "1");
        }
        let out = cmd.output().expect("run jprof record");
        let summary = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "jprof record failed: {summary}");
        let copy = jprof::recording::Recording::open(&data)
            .expect("open recording")
            .meta
            .event
            .stack_user_bytes;
        (summary, folded(work.path()), copy)
    };
    let run = |args: &[&str], no_bpf: bool| run_by(&[], args, no_bpf);
    // As the user may launch it: through GNU time, timeout or a shell script, which fork the
    // JVM; jprof sees it there too (`runtimes::launches_jvm`).
    let launcher = ["timeout", "600", "sh", "-c", "cd . && exec \"$0\" \"$@\""];
    // As Gradle's and Maven's wrappers run it: a variable jprof cannot follow.
    let hidden = ["sh", "-c", "JAVACMD=$0; exec \"$JAVACMD\" \"$@\""];
    let (summary, stacks, copy) = match launched {
        Launched::Directly => run_by(&[], &[], false),
        Launched::ThroughLaunchers => run_by(&launcher, &[], false),
        Launched::Hidden => {
            // Where the kernel refuses the program (JPROF_NO_BPF=1 stands in): the 1 KiB copy
            // alone, and a note that says how to read the rest.
            let (summary, shallow, copy) = run_by(&hidden, &[], true);
            assert_eq!(copy, 1024, "{summary}");
            assert!(
                summary.contains("jprof did not see from the command line that it starts a JVM")
                    && summary.contains("`jprof record --jvm -- …` reads every frame"),
                "JDK {jdk_name}: no note on the unforeseen JVM\n{summary}"
            );
            assert!(
                !summary.contains("frame chains went past"),
                "JDK {jdk_name}: deep frames read without the program\n{summary}"
            );
            // A callchain from `spin` ends after 127 frames, far from main.
            let in_spin = |s: &[String]| s.iter().any(|f| f == "Deep.spin_[int]");
            let reach = total(&shallow, |s| {
                in_spin(s) && s.iter().any(|f| f == "Deep.main_[int]")
            });
            assert!(total(&shallow, in_spin) > 0, "{summary}");
            assert_eq!(reach, 0, "JDK {jdk_name}: main reached without the program");
            // Told: every frame read from the first sample, as for `java` itself.
            let (told, _, _) = run_by(&hidden, &["--jvm"], false);
            assert!(
                !told.contains("jprof did not see from the command line"),
                "{told}"
            );
            // Not told: the program, idle until the JVM maps libjvm.so, reads its frames from
            // then on (the checks below).
            let watched = run_by(&hidden, &[], false);
            assert!(
                watched
                    .0
                    .contains("were read from when it mapped libjvm.so on"),
                "JDK {jdk_name}: no note on the JVM found as it ran\n{}",
                watched.0
            );
            watched
        }
    };
    if summary.contains("the kernel refused jprof's BPF program") {
        // Only a kernel or user without BPF (CI runs as root on a kernel that has it).
        eprintln!("skipped: {summary}");
        return;
    }
    // The program reads the frames: the kernel copies 1 KiB a sample, not 64 KiB.
    assert_eq!(
        copy, 1024,
        "JDK {jdk_name}: stack copy per sample\n{summary}"
    );
    let (past, read) = deep_frames_read(&summary);
    assert!(
        past >= 500 && read * 10 >= past * 9,
        "JDK {jdk_name}: frames read for {read} of {past} deep samples\n{summary}"
    );
    let in_spin = |s: &[String]| s.iter().any(|f| f == "Deep.spin_[int]");
    let spin = total(&stacks, in_spin);
    let whole = total(&stacks, |s| {
        in_spin(s)
            && s.iter().any(|f| f == "Deep.main_[int]")
            && s.iter().filter(|f| *f == "Deep.descend_[int]").count() == DEPTH + 1
            && !s.iter().any(|f| f == "Interpreter_[j]")
            && s.get(1).is_some_and(|f| f == "start_thread")
    });
    assert!(
        spin > 0 && whole * 10 >= spin * 9,
        "JDK {jdk_name}: {whole} of {spin} weight in spin has the whole named stack\n{summary}"
    );
    if launched != Launched::Directly {
        return;
    }
    // Where the kernel refuses the program: the 64 KiB copy, cut down when written.
    let (summary, _, copy) = run(&[], true);
    assert_eq!(
        copy, 65528,
        "JDK {jdk_name}: fallback stack copy\n{summary}"
    );
    assert!(
        summary.contains(
            "JPROF_NO_BPF=1: jprof's BPF program was not loaded, so each sample copies 64 KiB"
        ),
        "{summary}"
    );
    // The 1 KiB copy alone: a callchain from `spin` ends after 127 frames, far from main.
    let (_, shallow, _) = run(&["--call-graph", "fp"], false);
    let reach = total(&shallow, |s| {
        in_spin(s) && s.iter().any(|f| f == "Deep.main_[int]")
    });
    assert!(total(&shallow, in_spin) > 0);
    assert_eq!(
        reach, 0,
        "JDK {jdk_name}: main reached without the deep frames"
    );
}

#[test]
fn jdk25_interpreted_frames_past_the_stack_copy_are_named() {
    deep_interpreted_run("25", Launched::Directly);
}

/// The same JVM started through launchers that fork it (`timeout`, a shell's last command):
/// jprof still records it as a JVM.
#[test]
fn jdk25_interpreted_frames_are_named_through_launchers_that_fork_the_jvm() {
    deep_interpreted_run("25", Launched::ThroughLaunchers);
}

/// Started by a script jprof cannot see through (`exec "$JAVACMD" "$@"`, as Gradle's and
/// Maven's wrappers do): the program that reads the frames past the copy waits for the JVM to
/// map libjvm.so and then reads them (≥ 90% of `spin`'s weight with the whole stack, as for
/// `java` itself), and the summary says so; where the kernel refuses the program, a note
/// names `--jvm`; with `--jvm`, no note.
#[test]
fn jdk25_a_jvm_jprof_cannot_foresee_has_its_deep_frames_read_once_found() {
    deep_interpreted_run("25", Launched::Hidden);
}

/// A launch whose JVM reads deep for a second and then leaves the recording quiet for ten:
/// the reader keeps pacing its drains of the frames' ring by the rate it last saw, let go of
/// drain after drain (session 21's first form of that pacing panicked after ~70 quiet drains,
/// the quarter-ring time of a vanishing rate overflowing a Duration: `record -a` beside a JVM
/// did so within seconds). The recording completes, the deep frames read.
#[test]
fn a_jvm_that_goes_quiet_leaves_the_recording_whole() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let java = jdk("25");
    let classes = example_classes("examples/java/deep/Deep.java");
    agent();
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("quiet.data");
    let script = format!(
        "{} -Xint -cp {} Deep 800 1; sleep 10",
        java.display(),
        classes.path().display()
    );
    let out = jprof()
        .current_dir(work.path())
        .env_remove("JPROF_AGENT")
        .args(["record", "-o"])
        .arg(&data)
        .args(["--", "sh", "-c", &script])
        .output()
        .expect("run jprof record");
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "jprof record failed: {summary}");
    assert!(!summary.contains("panicked"), "{summary}");
    let (past, read) = deep_frames_read(&summary);
    assert!(
        past > 500 && read * 10 >= past * 9,
        "{past} past the copy, {read} read\n{summary}"
    );
    jprof::recording::Recording::open(&data).expect("a complete recording");
}

#[test]
fn jdk17_interpreted_frames_past_the_stack_copy_are_named() {
    deep_interpreted_run("17", Launched::Directly);
}

/// javac compiling 300 of the JDK's own `java.util` sources (and subpackages'), from its
/// `src.zip`, recorded in the default mode: javac's driver (`Main.main`, `Main.compile`, the
/// compiler's loops) runs once and stays interpreted, deep below the hot code. Every interpreted
/// frame is named from its `Method*` slot, which jprof keeps for a JVM along the whole frame
/// chain and, past the kernel's largest copy (64 KiB), reads at sample time (docs/java.md):
/// with the 1 KiB copy 0.2% of the main thread's samples reached
/// `com.sun.tools.javac.Main.main` by name, now ≥ 90%, and at most 1% of the interpreted
/// frames stay anonymous `Interpreter`. The class files are not written
/// (`-XDshould-stop.ifNoError=FLOW`): creating files goes through libnio's `open0`, built
/// without frame pointers, whose callers no frame walk finds (7% of the samples on a busy
/// ext4). The rest (~4%): JVM start before `main`, and HotSpot stubs without a frame.
#[test]
fn javac_stacks_reach_main_by_default() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The newest JDK that ships its sources.
    let home = jdks()
        .into_iter()
        .rev()
        .filter_map(|(_, java)| Some(java.parent()?.parent()?.to_path_buf()))
        .find(|home| home.join("lib/src.zip").is_file())
        .expect("a JDK with lib/src.zip in /usr/lib/jvm (e.g. openjdk-17-source)");
    let work = tempfile::tempdir().expect("tempdir");
    let unpacked = Command::new(home.join("bin/jar"))
        .arg("xf")
        .arg(home.join("lib/src.zip"))
        .arg("java.base/java/util")
        .current_dir(work.path())
        .status()
        .expect("run jar");
    assert!(unpacked.success());
    let mut sources = Vec::new();
    let mut dirs = vec![work.path().join("java.base/java/util")];
    while let Some(dir) = dirs.pop() {
        for path in std::fs::read_dir(&dir)
            .expect("unpacked")
            .flatten()
            .map(|e| e.path())
        {
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "java") {
                let name = path.strip_prefix(work.path()).unwrap();
                sources.push(name.display().to_string());
            }
        }
    }
    sources.sort();
    sources.truncate(300);
    assert!(sources.len() >= 200, "{} sources", sources.len());
    std::fs::write(work.path().join("sources.txt"), sources.join("\n")).unwrap();

    let javac = home.join("bin/javac");
    let out = record_only(
        work.path(),
        &[],
        &[
            javac.to_str().expect("utf-8"),
            "-nowarn",
            "-implicit:none",
            "-XDshould-stop.ifNoError=FLOW",
            "-d",
            "out",
            "--patch-module",
            "java.base=java.base",
            "@sources.txt",
        ],
    );
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(summary.contains("target exit code 0"), "{summary}");
    assert!(
        summary.contains("java: frame pointers, with each frame's links and Method* slot read"),
        "{summary}"
    );
    // The launcher's main thread waits for the thread running Java's main, which has its name.
    let report = jprof()
        .args([
            "report",
            "-f",
            "collapsed",
            "--comm",
            "javac",
            "--weight",
            "samples",
        ])
        .args(["-o", "-", "-i"])
        .arg(work.path().join("java.data"))
        .output()
        .expect("run jprof report");
    assert!(report.status.success());
    let (mut all, mut reach) = (0u64, 0u64);
    // Interpreted Java frames: named (`_[int]`) and anonymous (`Interpreter`).
    let (mut named, mut anonymous) = (0u64, 0u64);
    for line in String::from_utf8_lossy(&report.stdout).lines() {
        let Some((stack, n)) = line.rsplit_once(' ') else {
            continue;
        };
        let n: u64 = n.parse().expect("a count");
        all += n;
        if stack
            .split(';')
            .any(|f| f.starts_with("com.sun.tools.javac.Main.main"))
        {
            reach += n;
        }
        for f in stack.split(';') {
            if f.ends_with("_[int]") {
                named += n;
            } else if f == "Interpreter_[j]" {
                anonymous += n;
            }
        }
        // Never a wrong name: javac's driver runs once, at the root of the compiler's work, so
        // it never shows inside it (a frame named by another frame's slot, or a stack with a
        // repeated stretch, would put it there) and `Main.main` is there once.
        let frames: Vec<&str> = stack.split(';').collect();
        let driver = |f: &&str| {
            f.starts_with("com.sun.tools.javac.Main.")
                || f.starts_with("com.sun.tools.javac.main.Main.compile")
        };
        if let Some(attr) = frames
            .iter()
            .position(|f| f.starts_with("com.sun.tools.javac.comp.Attr."))
        {
            assert!(
                !frames[attr..].iter().any(driver),
                "a driver frame inside Attr: {stack}"
            );
        }
        assert!(
            frames
                .iter()
                .filter(|f| f.starts_with("com.sun.tools.javac.Main.main"))
                .count()
                <= 1,
            "Main.main twice: {stack}"
        );
    }
    assert!(
        all >= 200,
        "{all} samples of javac's main thread\n{summary}"
    );
    let share = reach as f64 / all as f64;
    let unnamed = anonymous as f64 / (named + anonymous) as f64;
    eprintln!(
        "{:.1}% of {all} main-thread samples reach Main.main; {:.2}% of {} interpreted frames \
         are anonymous",
        100.0 * share,
        100.0 * unnamed,
        named + anonymous
    );
    // Measured: 95–96% and 0.6–0.7% (Temurin 25); what is left is JVM start-up before main
    // runs and stubs without a frame (docs/java.md).
    assert!(
        share >= 0.9,
        "{:.1}% of {all} main-thread samples reach Main.main\n{summary}",
        100.0 * share
    );
    assert!(
        unnamed <= 0.01,
        "{:.2}% of interpreted frames are anonymous `Interpreter`\n{summary}",
        100.0 * unnamed
    );
}

/// What a recording of javac stores of the agent's line tables, inline trees and method names
/// is only what its samples hit (JIT_DEBUG; of each inline tree kept, only the rows read at
/// the sampled addresses), and of its CODE_LOADs only those of the code samples hit (under
/// half), yet every report reads the same as with all of them: the recording is rewritten
/// with the agent's whole jitdump (kept on disk) in place of its pieces and no JIT_DEBUG, and
/// both give the same stacks, with lines, over the whole run and a part of it, on-CPU and
/// off-CPU.
#[test]
fn javac_recording_keeps_jit_tables_only_for_what_samples_hit() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = tempfile::tempdir().expect("tempdir");
    let javac = javac_on_java_sql(work.path());
    let javac: Vec<&str> = javac.iter().map(String::as_str).collect();
    let out = record_only(work.path(), &["--keep-side-files", "--off-cpu"], &javac);
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(summary.contains("target exit code 0"), "{summary}");
    let data = work.path().join("java.data");
    let whole = with_whole_jitdumps(&std::fs::read(&data).unwrap());
    assert_eq!(whole.dumps.len(), 1, "{:?}", whole.dumps);
    let (trees_in_file, trees_kept, full) = (whole.trees_in_files, whole.trees_kept, whole.bytes);
    assert!(
        trees_in_file > 500,
        "{trees_in_file} inline trees in the jitdump"
    );
    assert!(
        trees_kept > 10 && trees_kept * 2 < trees_in_file,
        "{trees_kept} of {trees_in_file} inline trees kept"
    );
    // And of the trees kept, only the rows the sampled addresses read (10% measured).
    let (rows_kept, rows_whole) = (whole.rows_kept, whole.rows_of_kept_trees_in_files);
    assert!(
        rows_kept > 0 && rows_kept * 2 < rows_whole,
        "{rows_kept} of the kept trees' {rows_whole} rows kept"
    );
    let full_path = work.path().join("full.data");
    std::fs::write(&full_path, &full).unwrap();
    // The recorder's end left out the CODE_LOADs no sample hit (`record/compact.rs`).
    let (all, kept) = (stored_code_loads(&full_path), stored_code_loads(&data));
    assert!(
        all > 1000 && kept > 50 && kept * 2 < all,
        "{kept} of {all} CODE_LOADs kept"
    );
    // The jitdump is not read from disk by the reports compared.
    std::fs::remove_file(&whole.dumps[0]).unwrap();

    let report = |input: &Path, args: &[&str]| {
        let out = jprof()
            .args(["report", "-f", "collapsed", "-o", "-", "-i"])
            .arg(input)
            .args(args)
            .output()
            .expect("run jprof report");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    for args in [
        &["--lines"][..],
        &[],
        &["--lines", "--time", "0.5..1.5"],
        &["--lines", "--weight", "off-cpu"],
    ] {
        let (kept, whole) = (report(&data, args), report(&full_path, args));
        assert!(kept.contains("com.sun.tools.javac"), "{kept}");
        assert_eq!(kept, whole, "report {args:?}");
    }
    let lined = report(&data, &["--lines"]);
    assert!(
        lined.contains(".java:"),
        "no Java frame with its line: {lined}"
    );
}

/// A JVM's stack copies keep only the words a report can read (`record/stack_words.rs`: the
/// frames' links and `Method*` slots, mapped addresses and words near the copy; every other
/// word gets a stand-in that unwinds the same): javac recorded with its copies whole
/// (`JPROF_WHOLE_STACK_TOP=1`) reads byte for byte the same after the recorder's cut, in
/// folded stacks with lines and in the text report, with the stacks unwound at record time and
/// unwound again by the report; and the cut records take under 85% of the bytes (78%
/// measured) of the cut an attached process gets, which keeps every word that may be an
/// address.
#[test]
fn javac_stack_copies_keep_only_the_words_reports_read() {
    use jprof::format::recording::{parse_chunks, ChunkKind};
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    agent();
    let work = tempfile::tempdir().expect("tempdir");
    let javac = javac_on_java_sql(work.path());
    let whole = work.path().join("whole.data");
    let out = jprof()
        .current_dir(work.path())
        .env_remove("JPROF_AGENT")
        .env("JPROF_WHOLE_STACK_TOP", "1")
        .env("JPROF_KEEP_STACK_COPIES", "1")
        .args(["record", "-o"])
        .arg(&whole)
        .arg("--")
        .args(&javac)
        .output()
        .expect("run jprof record");
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(summary.contains("target exit code 0"), "{summary}");

    let bytes = std::fs::read(&whole).unwrap();
    let layout = jprof::recording::Recording::open(&whole).unwrap().layout();
    let mut mapped = jprof::record::Mapped::default();
    let (mut cut_bytes, mut attached_bytes) = (0, 0);
    let mut chunks = Vec::new();
    for c in parse_chunks(&bytes).unwrap().chunks {
        let cut = if c.kind == ChunkKind::PERF_RECORDS_ZSTD {
            let records = zstd::bulk::decompress(c.payload, 1 << 30).unwrap();
            let cut = jprof::record::cut_stack_copies(&layout, &records, Some(&mut mapped));
            let attached = jprof::record::cut_stack_copies(&layout, &records, None);
            assert_eq!(cut.len(), records.len(), "1 KiB copies keep their length");
            let cut = zstd::bulk::compress(&cut, 3).unwrap();
            cut_bytes += cut.len();
            attached_bytes += zstd::bulk::compress(&attached, 3).unwrap().len();
            cut
        } else {
            c.payload.to_vec()
        };
        chunks.push((c.kind, c.payload.to_vec(), cut));
    }
    eprintln!("records: {cut_bytes} bytes cut, {attached_bytes} with every possible address kept");
    assert!(
        (cut_bytes as f64) < attached_bytes as f64 * 0.85,
        "{cut_bytes} bytes of records cut, {attached_bytes} with every possible address kept"
    );
    let write = |name: &str, cut: bool, embedded: bool| {
        let path = work.path().join(name);
        let payloads = chunks
            .iter()
            .map(|(kind, payload, cut_payload)| (*kind, if cut { cut_payload } else { payload }));
        write_chunks(&path, payloads, embedded);
        path
    };
    let report = |path: &Path, args: &[&str]| {
        let out = jprof()
            .args(["report", "-o", "-", "-i"])
            .arg(path)
            .args(args)
            .output()
            .expect("run jprof report");
        assert!(out.status.success(), "{out:?}");
        // The text report names its input.
        let text = String::from_utf8(out.stdout).unwrap();
        text.lines()
            .filter(|l| !l.starts_with("Recording:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for embedded in [true, false] {
        let (whole, cut) = (
            write("a.data", false, embedded),
            write("b.data", true, embedded),
        );
        for args in [&["-f", "collapsed", "--lines"][..], &["-f", "text"]] {
            let (a, b) = (report(&whole, args), report(&cut, args));
            assert!(a.contains("com.sun.tools.javac"), "{a}");
            assert!(
                a == b,
                "embedded symbols: {embedded}, {args:?}: the report changed\n{a}\nvs\n{b}"
            );
        }
    }
}

/// A finished JVM recording stores its samples without their stack copies and without the
/// frames the BPF program read past them (`record/compact.rs`): once the symbols are
/// embedded, reports read the unwound stacks (UNWOUND_STACKS) and the interpreted frames and
/// cuts the embedding found (INTERPRETED_FRAMES) instead. javac recorded with its copies kept
/// (`JPROF_KEEP_STACK_COPIES=1`) reports byte for byte the same as those records rewritten
/// without them, and as the same recording read the old way (the copies walked again by the
/// report), in folded stacks with lines, over a part of the run, off-CPU and in the text
/// report; the rewritten recording takes under 70% of the bytes (about 40% measured). The
/// same holds with `--call-graph fp`, whose copies are the whole 1 KiB (no BPF frames). And a
/// recording as `jprof record` writes it has no copies and leaves no partial file behind,
/// either way.
#[test]
fn javac_finished_recording_keeps_no_stack_copies_and_reports_the_same() {
    use jprof::format::perf::{Record, RecordKind};
    use jprof::format::recording::{encode_chunk, file_header, parse_chunks, ChunkKind};
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    agent();
    let work = tempfile::tempdir().expect("tempdir");
    let javac = javac_on_java_sql(work.path());
    let record = |name: &str, keep: &str, whole: bool| {
        let data = work.path().join(name);
        let out = jprof()
            .current_dir(work.path())
            .env_remove("JPROF_AGENT")
            .env("JPROF_KEEP_STACK_COPIES", keep)
            .args(["record", "--off-cpu", "-o"])
            .arg(&data)
            .args(if whole {
                &["--call-graph", "fp"][..]
            } else {
                &[]
            })
            .arg("--")
            .args(&javac)
            .output()
            .expect("run jprof record");
        let summary = String::from_utf8_lossy(&out.stderr);
        assert!(summary.contains("target exit code 0"), "{summary}");
        data
    };
    // (samples, bytes of their stack copies, JPROF_DEEP_FRAMES records)
    let copies = |path: &Path| {
        let recording = jprof::recording::Recording::open(path).unwrap();
        let layout = recording.layout();
        let (mut samples, mut copied, mut deep) = (0, 0, 0);
        for raw in recording.perf_records().map(Result::unwrap) {
            if raw.kind == RecordKind::JPROF_DEEP_FRAMES {
                deep += 1;
            }
            if let Ok(Record::Sample(s)) = layout.parse(&raw) {
                samples += 1;
                copied += s.stack_user.len();
            }
        }
        (samples, copied, deep)
    };
    let report = |path: &Path, args: &[&str]| {
        let out = jprof()
            .args(["report", "-o", "-", "-i"])
            .arg(path)
            .args(args)
            .output()
            .expect("run jprof report");
        assert!(out.status.success(), "{out:?}");
        // The text report names its input and its size.
        let text = String::from_utf8(out.stdout).unwrap();
        text.lines()
            .filter(|l| !l.starts_with("Recording:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for whole in [false, true] {
        let kept = record(&format!("kept-{whole}.data"), "1", whole);
        let compact = work.path().join(format!("compact-{whole}.data"));
        jprof::record::compact_recording(&kept, &compact).unwrap();
        // The same recording without what the embedding found in the copies: the report
        // walks them again, as it did before INTERPRETED_FRAMES.
        let old = work.path().join(format!("old-{whole}.data"));
        let bytes = std::fs::read(&kept).unwrap();
        let mut file = file_header().to_vec();
        for c in parse_chunks(&bytes).unwrap().chunks {
            if c.kind != ChunkKind::INTERPRETED_FRAMES {
                file.extend(encode_chunk(c.kind, c.payload));
            }
        }
        std::fs::write(&old, file).unwrap();

        let (samples, copied, deep) = copies(&kept);
        assert!(
            samples > 500 && copied > samples * 100 && (whole || deep > 0),
            "whole: {whole}: {samples} samples, {copied} bytes copied, {deep} deep-frame records"
        );
        assert_eq!(
            copies(&compact),
            (samples, 0, 0),
            "whole: {whole}: samples, bytes copied, deep-frame records after the rewrite"
        );
        let (before, after) = (
            std::fs::metadata(&kept).unwrap().len(),
            std::fs::metadata(&compact).unwrap().len(),
        );
        eprintln!("javac (whole: {whole}): {before} bytes with the stack copies, {after} without");
        assert!(
            (after as f64) < before as f64 * 0.7,
            "whole: {whole}: {after} bytes without the stack copies, {before} with"
        );
        for args in [
            &["-f", "collapsed", "--lines"][..],
            &["-f", "collapsed", "--lines", "--time", "0.5..1.5"],
            &["-f", "collapsed", "--weight", "off-cpu"],
            &["-f", "text"],
        ] {
            let a = report(&old, args);
            // (The text report's top functions may all be the JVM's own.)
            assert!(
                a.contains("com.sun.tools.javac") || args.contains(&"text"),
                "{a}"
            );
            assert!(
                a == report(&kept, args),
                "whole: {whole}: {args:?}: the stored interpreted frames read differently\n{a}"
            );
            let b = report(&compact, args);
            assert!(
                a == b,
                "whole: {whole}: {args:?}: the report changed without the stack copies\n{a}\nvs\n{b}"
            );
        }

        // As `jprof record` writes it.
        let direct = record(&format!("direct-{whole}.data"), "0", whole);
        let (samples, copied, deep) = copies(&direct);
        assert!(
            samples > 500 && copied == 0 && deep == 0,
            "whole: {whole}: {samples} samples, {copied} bytes copied, {deep} deep-frame records"
        );
        let folded = report(&direct, &["-f", "collapsed", "--lines"]);
        assert!(folded.contains("com.sun.tools.javac"), "{folded}");
    }
    let partials: Vec<_> = std::fs::read_dir(work.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".partial"))
        .collect();
    assert!(partials.is_empty(), "{partials:?}");
}

/// A finished JVM recording leaves out of its jitdump the CODE_LOAD records no sample's frame
/// was found in (with the records only they read, and its JIT_DEBUG groups renumbered:
/// `record/compact.rs`), yet reads the same: javac recorded whole (`JPROF_KEEP_STACK_COPIES=1`,
/// off-CPU too) and that recording rewritten as the recorder's end rewrites it report byte for
/// byte the same in folded stacks with lines, over a part of the run, off-CPU, in the text
/// report, speedscope and pprof, and the Firefox profile has the same samples and stacks (its
/// code-load markers are the loads kept). The rewritten jitdump keeps under half of the
/// CODE_LOADs (about a quarter measured), and `jprof dump` says which pieces lost some.
#[test]
fn javac_recording_leaves_out_the_code_loads_no_sample_hit() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    agent();
    let work = tempfile::tempdir().expect("tempdir");
    let javac = javac_on_java_sql(work.path());
    let whole = work.path().join("whole.data");
    let out = jprof()
        .current_dir(work.path())
        .env_remove("JPROF_AGENT")
        .env("JPROF_KEEP_STACK_COPIES", "1")
        .args(["record", "--off-cpu", "-o"])
        .arg(&whole)
        .arg("--")
        .args(&javac)
        .output()
        .expect("run jprof record");
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(summary.contains("target exit code 0"), "{summary}");
    let pruned = work.path().join("pruned.data");
    jprof::record::compact_recording(&whole, &pruned).unwrap();

    let (all, kept) = (stored_code_loads(&whole), stored_code_loads(&pruned));
    eprintln!("javac: {kept} of {all} CODE_LOADs kept");
    assert!(
        all > 1000 && kept > 50 && kept * 2 < all,
        "{kept} of {all} CODE_LOADs kept"
    );
    let dump = jprof().arg("dump").arg(&pruned).output().unwrap();
    let dump = String::from_utf8_lossy(&dump.stdout);
    assert!(dump.contains("code loads no sample hit left out"), "{dump}");

    let report = |path: &Path, args: &[&str]| {
        let out = jprof()
            .args(["report", "-o", "-", "-i"])
            .arg(path)
            .args(args)
            .output()
            .expect("run jprof report");
        assert!(out.status.success(), "{out:?}");
        out.stdout
    };
    for args in [
        &["-f", "collapsed", "--lines"][..],
        &["-f", "collapsed"],
        &["-f", "collapsed", "--lines", "--time", "0.5..1.5"],
        &["-f", "collapsed", "--lines", "--weight", "off-cpu"],
        &["-f", "collapsed", "--weight", "wall"],
        &["-f", "speedscope"],
        &["-f", "pprof"],
    ] {
        let (a, b) = (report(&whole, args), report(&pruned, args));
        assert!(
            args.contains(&"pprof") || String::from_utf8_lossy(&a).contains("com.sun.tools.javac"),
            "{args:?}"
        );
        assert!(
            a == b,
            "{args:?}: the report changed without the loads no sample hit\n{}\nvs\n{}",
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b)
        );
    }
    // The text report names its input and its size.
    let text = |path: &Path| {
        String::from_utf8(report(path, &["-f", "text"]))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("Recording:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (a, b) = (text(&whole), text(&pruned));
    assert!(a == b, "the text report changed\n{a}\nvs\n{b}");
    let firefox = |path: &Path| firefox_view(&report(path, &["-f", "firefox"]));
    let ((samples_a, markers_a), (samples_b, markers_b)) = (firefox(&whole), firefox(&pruned));
    assert!(samples_a.iter().any(|s| s.contains("com.sun.tools.javac")));
    assert!(
        samples_a == samples_b,
        "the Firefox profile's samples changed"
    );
    assert!(
        markers_b.is_subset(&markers_a) && markers_b.len() * 2 < markers_a.len(),
        "{} code-load markers of {}",
        markers_b.len(),
        markers_a.len()
    );
}

/// The CODE_LOAD records of the jitdump pieces a recording stores.
fn stored_code_loads(path: &Path) -> usize {
    use jprof::format::recording::SideKind;
    let recording = jprof::recording::Recording::open(path).unwrap();
    let mut bytes = Vec::new();
    for piece in recording.side_pieces().map(Result::unwrap) {
        if piece.piece.kind == SideKind::JITDUMP {
            bytes.extend_from_slice(&piece.data);
        }
    }
    let header = jitdump::parse_header(&bytes).unwrap();
    let (records, _) = jitdump::split_records(&bytes[header.records_start()..], header.endian);
    records
        .iter()
        .filter(|(id, _)| *id == jitdump::RecordId::CODE_LOAD)
        .count()
}

/// A Firefox profile (gzipped JSON) as what it shows: each thread's samples (time, weight, CPU
/// and the stack's function names with their files and lines, outermost first), and its
/// markers.
fn firefox_view(gz: &[u8]) -> (Vec<String>, std::collections::BTreeSet<String>) {
    use serde_json::Value;
    let mut json = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(gz), &mut json).unwrap();
    let profile: Value = serde_json::from_str(&json).unwrap();
    let (mut samples, mut markers) = (Vec::new(), std::collections::BTreeSet::new());
    for thread in profile["threads"].as_array().unwrap() {
        let strings = thread["stringArray"].as_array().unwrap();
        let string = |v: &Value| {
            v.as_u64()
                .map_or("-".into(), |i| strings[i as usize].to_string())
        };
        let at = |table: &str, column: &str, i: usize| thread[table][column][i].clone();
        let s = &thread["samples"];
        let mut time = 0.0;
        for i in 0..s["length"].as_u64().unwrap() as usize {
            time += s["timeDeltas"][i].as_f64().unwrap();
            let mut names = Vec::new();
            let mut stack = s["stack"][i].as_u64();
            while let Some(st) = stack.map(|v| v as usize) {
                let frame = at("stackTable", "frame", st).as_u64().unwrap() as usize;
                let func = at("frameTable", "func", frame).as_u64().unwrap() as usize;
                names.push(format!(
                    "{}@{}:{}",
                    string(&at("funcTable", "name", func)),
                    string(&at("funcTable", "fileName", func)),
                    at("frameTable", "line", frame)
                ));
                stack = at("stackTable", "prefix", st).as_u64();
            }
            names.reverse();
            samples.push(format!(
                "{} {time:.3} {} {} {}",
                thread["tid"],
                s["weight"][i],
                s["threadCPUDelta"][i],
                names.join(";")
            ));
        }
        let m = &thread["markers"];
        for i in 0..m["length"].as_u64().unwrap() as usize {
            let data = &m["data"][i];
            markers.insert(format!(
                "{} {} {} {} {}",
                string(&m["name"][i]),
                m["startTime"][i],
                string(&data["tier"]),
                string(&data["address"]),
                data["size"]
            ));
        }
    }
    (samples, markers)
}

/// javac compiling the JDK's `java.sql` sources (from the newest JDK with `lib/src.zip`),
/// unpacked into `work`: the command line, to run in `work`.
fn javac_on_java_sql(work: &Path) -> Vec<String> {
    let home = jdks()
        .into_iter()
        .rev()
        .filter_map(|(_, java)| Some(java.parent()?.parent()?.to_path_buf()))
        .find(|home| home.join("lib/src.zip").is_file())
        .expect("a JDK with lib/src.zip in /usr/lib/jvm (e.g. openjdk-17-source)");
    let unpacked = Command::new(home.join("bin/jar"))
        .args(["xf"])
        .arg(home.join("lib/src.zip"))
        .arg("java.sql")
        .current_dir(work)
        .status()
        .expect("run jar");
    assert!(unpacked.success());
    let mut sources: Vec<String> = Vec::new();
    let mut dirs = vec![work.join("java.sql")];
    while let Some(dir) = dirs.pop() {
        for path in std::fs::read_dir(&dir)
            .expect("unpacked")
            .flatten()
            .map(|e| e.path())
        {
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "java")
                && !path.ends_with("module-info.java")
            {
                sources.push(path.strip_prefix(work).unwrap().display().to_string());
            }
        }
    }
    sources.sort();
    std::fs::write(work.join("sources.txt"), sources.join("\n")).unwrap();
    let javac = home.join("bin/javac");
    [
        javac.to_str().expect("utf-8"),
        "-nowarn",
        "-d",
        "out",
        "--patch-module",
        "java.sql=java.sql",
        "@sources.txt",
    ]
    .map(String::from)
    .to_vec()
}

/// A recording rewritten with its jitdumps' whole files (read from disk) in place of their
/// stored pieces and without the JIT_DEBUG chunks of those files: what a recording with every
/// line table, inline tree and method name reads like. A jitdump no longer on disk keeps its
/// pieces and JIT_DEBUG.
pub(crate) struct WholeJitdumps {
    pub(crate) bytes: Vec<u8>,
    /// The jitdumps put back whole.
    pub(crate) dumps: Vec<PathBuf>,
    /// Their DEBUG_INFO2 records (inline trees), and how many of them the recording kept.
    pub(crate) trees_in_files: usize,
    pub(crate) trees_kept: usize,
    /// Rows (functions, inline calls, line rows) of the trees kept, as kept and as in the files.
    pub(crate) rows_kept: usize,
    pub(crate) rows_of_kept_trees_in_files: usize,
}

/// The rows of an inline tree: functions, inline calls and line rows.
fn tree_rows(record: &jitdump::Record) -> Option<usize> {
    match &record.body {
        jitdump::RecordBody::DebugInfo2(info) => {
            Some(info.functions.len() + info.inline_calls.len() + info.lines.len())
        }
        _ => None,
    }
}

pub(crate) fn with_whole_jitdumps(recording: &[u8]) -> WholeJitdumps {
    use jprof::format::recording::{
        encode_chunk, encode_side_piece, parse_chunks, parse_jit_debug, parse_jit_debug_groups,
        parse_packed_side_piece, ChunkKind, SideKind, SidePiece,
    };
    use std::collections::BTreeMap;
    let chunks = parse_chunks(recording).unwrap();
    let count = |records: &[jitdump::Record]| {
        records
            .iter()
            .filter(|r| r.id == jitdump::RecordId::SAMPLY_DEBUG_INFO2)
            .count()
    };
    // Each stored jitdump as on disk, when every piece is still there (by its CRC), and as
    // stored.
    let mut files: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
    let mut stored: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    // A CODE_LOAD as (time, address, index).
    let code_loads = |file: &[u8]| -> Vec<(u64, u64, u64)> {
        let header = jitdump::parse_header(file).unwrap();
        let records = jitdump::parse_records(file, &header, 0).records;
        records
            .iter()
            .filter_map(|r| match r.body {
                RecordBody::CodeLoad {
                    code_addr,
                    code_index,
                    ..
                } => Some((r.timestamp, code_addr, code_index)),
                _ => None,
            })
            .collect()
    };
    // Per file, the ordinal in the file of each CODE_LOAD stored (the recorder's end leaves
    // out those no sample hit, and numbers JIT_DEBUG's groups by the loads kept).
    let mut file_ordinals: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for c in &chunks.chunks {
        if c.kind != ChunkKind::SIDE_FILE_ZSTD {
            continue;
        }
        let (piece, packed) = parse_packed_side_piece(c.payload, c.offset).unwrap();
        if piece.kind != SideKind::JITDUMP {
            continue;
        }
        assert!(packed.debug_deferred);
        stored
            .entry(piece.path.to_string())
            .or_default()
            .extend(zstd::stream::decode_all(piece.data).unwrap());
        let file = files
            .entry(piece.path.to_string())
            .or_insert_with(|| std::fs::read(piece.path).ok());
        let range = piece.offset as usize..(piece.offset + packed.file_len) as usize;
        if file
            .as_ref()
            .is_some_and(|f| f.get(range).map(crc32fast::hash) != Some(packed.file_crc))
        {
            *file = None;
        }
    }
    let mut out = WholeJitdumps {
        bytes: recording[..16].to_vec(),
        dumps: Vec::new(),
        trees_in_files: 0,
        trees_kept: 0,
        rows_kept: 0,
        rows_of_kept_trees_in_files: 0,
    };
    // Per file, the rows of the tree before each CODE_LOAD (by its ordinal).
    let mut rows_before_load: BTreeMap<&str, BTreeMap<u64, usize>> = BTreeMap::new();
    for (path, file) in &files {
        if let Some(file) = file {
            let header = jitdump::parse_header(file).unwrap();
            let records = jitdump::parse_records(file, &header, 0).records;
            out.trees_in_files += count(&records);
            let rows = rows_before_load.entry(path).or_default();
            let (mut loads, mut pending) = (0, None);
            for r in &records {
                if r.id == jitdump::RecordId::CODE_LOAD {
                    if let Some(n) = pending.take() {
                        rows.insert(loads, n);
                    }
                    loads += 1;
                }
                pending = tree_rows(r).or(pending);
            }
            out.dumps.push(PathBuf::from(path));
            let in_file = code_loads(file);
            let mut next = 0;
            let ordinals = file_ordinals.entry(path.clone()).or_default();
            for load in code_loads(&stored[path]) {
                next += in_file[next..].iter().position(|l| *l == load).unwrap();
                ordinals.push(next as u64);
                next += 1;
            }
        }
    }
    for c in &chunks.chunks {
        match c.kind {
            ChunkKind::JIT_DEBUG => {
                let d = parse_jit_debug(c.payload, c.offset).unwrap();
                if !matches!(files.get(d.path), Some(Some(_))) {
                    out.bytes.extend(encode_chunk(c.kind, c.payload));
                    continue;
                }
                let bytes = zstd::stream::decode_all(d.data).unwrap();
                let (groups, error) = parse_jit_debug_groups(&bytes, 0);
                assert!(error.is_none(), "{error:?}");
                for (ordinal, records) in groups {
                    let batch =
                        jitdump::parse_record_stream(records, 0, jprof::format::Endian::Little);
                    out.trees_kept += count(&batch.records);
                    if let Some(kept) = batch.records.iter().find_map(tree_rows) {
                        out.rows_kept += kept;
                        let ordinal = file_ordinals[d.path]
                            .get(ordinal as usize)
                            .map_or(ordinal, |&o| o);
                        out.rows_of_kept_trees_in_files += rows_before_load[d.path][&ordinal];
                    }
                }
            }
            ChunkKind::SIDE_FILE_ZSTD => {
                let (piece, packed) = parse_packed_side_piece(c.payload, c.offset).unwrap();
                let Some(Some(file)) = files.get(piece.path) else {
                    out.bytes.extend(encode_chunk(c.kind, c.payload));
                    continue;
                };
                let data = &file[piece.offset as usize..(piece.offset + packed.file_len) as usize];
                let whole = SidePiece { data, ..piece };
                out.bytes.extend(encode_chunk(
                    ChunkKind::SIDE_FILE,
                    &encode_side_piece(&whole),
                ));
            }
            _ => out.bytes.extend(encode_chunk(c.kind, c.payload)),
        }
    }
    out
}

/// Writes a recording of `chunks` to `path`; without `embedded`, leaves out what the recorder
/// named and unwound at record time (embedded symbols, unwound stacks), so a report unwinds
/// and names the samples again.
fn write_chunks<'a>(
    path: &Path,
    chunks: impl Iterator<Item = (jprof::format::recording::ChunkKind, &'a Vec<u8>)>,
    embedded: bool,
) {
    use jprof::format::recording::{encode_chunk, file_header, ChunkKind};
    let unwound_at_record_time = [
        ChunkKind::SYMBOLS,
        ChunkKind::SYMBOLS_ZSTD,
        ChunkKind::UNWOUND_STACKS,
    ];
    let mut file = file_header().to_vec();
    for (kind, payload) in chunks {
        // What the embedding found in the copies is left out: the report reads them again.
        if kind == ChunkKind::INTERPRETED_FRAMES {
            continue;
        }
        if embedded || !unwound_at_record_time.contains(&kind) {
            file.extend(encode_chunk(kind, payload));
        }
    }
    std::fs::write(path, file).unwrap();
}

/// A JVM's stack copies keep their top whole only up to the innermost frame's links
/// (`record/stack_words.rs`): on the deep interpreted stack of `Deep` (800 frames, most past
/// the copy), the records of a run with the top KiB whole take under 75% of their bytes once
/// cut as the recorder cuts them (62% measured), a run of the recorder under 85% per sample of
/// the whole-top run's (`JPROF_WHOLE_STACK_TOP=1`, what jprof wrote before), and the report
/// never read the words that went: a recording with the top KiB whole reports byte for byte
/// the same as that recording with those words zeroed afterwards, with the stacks unwound at
/// record time (as written) and unwound again by the report (embedded symbols taken out).
fn leaf_frame_top_run(jdk_name: &str) {
    use jprof::format::recording::{parse_chunks, ChunkKind};
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    agent();
    let java = jdk(jdk_name);
    let classes = example_classes("examples/java/deep/Deep.java");
    let work = tempfile::tempdir().expect("tempdir");
    let record = |name: &str, whole_top: &str| {
        let data = work.path().join(name);
        let out = jprof()
            .current_dir(work.path())
            .env_remove("JPROF_AGENT")
            .env("JPROF_WHOLE_STACK_TOP", whole_top)
            .env("JPROF_KEEP_STACK_COPIES", "1")
            .args(["record", "-o"])
            .arg(&data)
            .arg("--")
            .arg(&java)
            .args(["-Xint", "-cp"])
            .arg(classes.path())
            .args(["Deep", "800", "3"])
            .output()
            .expect("run jprof record");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        data
    };
    let whole = record("whole-top.data", "1");
    let leaf = record("leaf-top.data", "0");
    let records_per_sample = |path: &Path| {
        let bytes = std::fs::read(path).unwrap();
        let stored: usize = parse_chunks(&bytes)
            .unwrap()
            .chunks
            .iter()
            .filter(|c| c.kind == ChunkKind::PERF_RECORDS_ZSTD)
            .map(|c| c.payload.len())
            .sum();
        let recording = jprof::recording::Recording::open(path).unwrap();
        let samples = recording
            .perf_records()
            .filter_map(Result::ok)
            .filter(|r| r.kind == jprof::format::perf::RecordKind::SAMPLE)
            .count();
        assert!(samples > 100, "{samples} samples in {}", path.display());
        stored as f64 / samples as f64
    };
    // Two runs sample different moments of the program, so their sizes differ by more than
    // the cut does under load: the recorder's cut is measured on the same records below.
    let (before, after) = (records_per_sample(&whole), records_per_sample(&leaf));
    eprintln!("stored bytes per sample: {before:.0} with the top KiB whole, {after:.0} now");
    assert!(
        after < before * 0.85,
        "JDK {jdk_name}: {after:.0} stored bytes per sample, {before:.0} with the top KiB whole"
    );

    // The top KiB whole, then the same records with the top cut as the recorder cuts it.
    let bytes = std::fs::read(&whole).unwrap();
    let layout = jprof::recording::Recording::open(&whole).unwrap().layout();
    let mut mapped = jprof::record::Mapped::default();
    let (mut whole_bytes, mut recorder_cut_bytes) = (0, 0);
    for c in parse_chunks(&bytes).unwrap().chunks {
        if c.kind == ChunkKind::PERF_RECORDS_ZSTD {
            let records = zstd::bulk::decompress(c.payload, 1 << 30).unwrap();
            let cut = jprof::record::cut_stack_copies(&layout, &records, Some(&mut mapped));
            whole_bytes += zstd::bulk::compress(&records, 3).unwrap().len();
            recorder_cut_bytes += zstd::bulk::compress(&cut, 3).unwrap().len();
        }
    }
    eprintln!("the same records: {whole_bytes} bytes whole, {recorder_cut_bytes} cut");
    assert!(
        (recorder_cut_bytes as f64) < whole_bytes as f64 * 0.75,
        "JDK {jdk_name}: the same records take {recorder_cut_bytes} bytes cut, {whole_bytes} whole"
    );
    assert_eq!(layout.regs_user_mask, 0x1c0, "BP, SP, IP");
    let (mut cut, mut samples, mut changed) = (Vec::new(), 0, 0);
    for c in parse_chunks(&bytes).unwrap().chunks {
        let payload = if c.kind == ChunkKind::PERF_RECORDS_ZSTD {
            let mut records = zstd::bulk::decompress(c.payload, 1 << 30).unwrap();
            let zeroed = leaf_top_only(&layout, &mut records);
            samples += zeroed.0;
            changed += zeroed.1;
            zstd::bulk::compress(&records, 1).unwrap()
        } else {
            c.payload.to_vec()
        };
        cut.push((c.kind, payload, c.payload.to_vec()));
    }
    eprintln!("{changed} of {samples} samples changed");
    assert!(
        changed * 10 >= samples * 9,
        "{changed} of {samples} samples had words above their innermost frame"
    );
    let write = |name: &str, cut_top: bool, embedded: bool| {
        let path = work.path().join(name);
        let payloads = cut.iter().map(|(kind, cut_payload, payload)| {
            (*kind, if cut_top { cut_payload } else { payload })
        });
        write_chunks(&path, payloads, embedded);
        path
    };
    let folded = |path: &Path| {
        let out = jprof()
            .args(["report", "-f", "collapsed", "-o", "-", "-i"])
            .arg(path)
            .output()
            .expect("run jprof report");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.stdout.is_empty());
        out.stdout
    };
    for embedded in [true, false] {
        let a = folded(&write("a.data", false, embedded));
        let b = folded(&write("b.data", true, embedded));
        assert!(
            a == b,
            "JDK {jdk_name} (embedded symbols: {embedded}): the report changed\n{}\nvs\n{}",
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b)
        );
    }
}

/// Zeroes, in each sample of `records` whose frame pointer starts a chain of at least two
/// frames inside the top KiB of its stack copy, the top's words above that frame's links that
/// are no frame's links or `Method*` slot and no possible code or stack address: the
/// recorder's cut, done again independently.
/// Returns (samples with a stack copy, samples changed).
fn leaf_top_only(layout: &jprof::format::perf::SampleLayout, records: &mut [u8]) -> (usize, usize) {
    use jprof::format::perf::{Record, RecordIter};
    let mut zero = Vec::new();
    let (mut samples, mut changed) = (0, 0);
    for raw in RecordIter::new(records).map_while(Result::ok) {
        let Ok(Record::Sample(s)) = layout.parse(&raw) else {
            continue;
        };
        let stack = s.stack_user;
        let (Some(bp), Some(sp)) = (s.regs_user.get(0), s.regs_user.get(1)) else {
            continue;
        };
        samples += 1;
        let at = stack.as_ptr() as usize - records.as_ptr() as usize;
        let word = |o: usize| u64::from_le_bytes(stack[o..o + 8].try_into().unwrap());
        let Some(top) = bp
            .checked_sub(sp)
            .and_then(|o| usize::try_from(o).ok())
            .filter(|o| o % 8 == 0 && o + 16 <= 1024)
        else {
            continue;
        };
        // The frame chain from the register, as the recorder follows it.
        let mut links = std::collections::HashSet::new();
        let (mut fp, mut frames, mut past_copy) = (top, 0, false);
        loop {
            if fp + 16 > stack.len() {
                past_copy = frames > 0;
                break;
            }
            frames += 1;
            links.extend([fp.wrapping_sub(24), fp, fp + 8]);
            let next = word(fp);
            if next <= sp + fp as u64 || (next - sp) % 8 != 0 {
                break;
            }
            fp = (next - sp) as usize;
        }
        if frames < 2 && !past_copy {
            continue;
        }
        let before = zero.len();
        zero.extend(
            (top + 16..1024.min(stack.len()))
                .step_by(8)
                .filter(|o| {
                    let w = word(*o);
                    let address = (0x40_0000..0x1_0000_0000).contains(&w)
                        || (0x1000_0000_0000..0x8000_0000_0000).contains(&w);
                    !links.contains(o) && w != 0 && !address
                })
                .map(|o| at + o),
        );
        changed += usize::from(zero.len() > before);
    }
    for at in zero {
        records[at..at + 8].fill(0);
    }
    (samples, changed)
}

#[test]
fn jdk25_stack_copies_keep_the_top_up_to_the_innermost_frame_only() {
    leaf_frame_top_run("25");
}
