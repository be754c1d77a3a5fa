//! Where the VM enters the agent: the exported `Agent_OnLoad` / `Agent_OnAttach` /
//! `Agent_OnUnload` and the JVMTI event callbacks. Each callback decodes the VM's pointers
//! through `ffi` and hands owned data to `events`, inside `catch_unwind` so no panic ever
//! unwinds into the JVM. The only `unsafe` construct here is `#[no_mangle]` on the exports.

use std::ffi::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use crate::events::{self, Agent};
use crate::ffi::{
    self, Callbacks, FunctionTable, JClass, JMethodId, JavaVm, Jint, JniEnv, MethodId, RawEnv,
    EVENT_COMPILED_METHOD_LOAD, EVENT_DYNAMIC_CODE_GENERATED, JNI_OK,
};

static AGENT: OnceLock<Agent> = OnceLock::new();

/// Runs `f` on the agent, swallowing panics: nothing may unwind into the JVM.
fn with_agent(f: impl FnOnce(&'static Agent)) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if let Some(agent) = AGENT.get() {
            f(agent);
        }
    }));
}

extern "C" fn on_compiled_method_load(
    _env: RawEnv,
    method: JMethodId,
    code_size: Jint,
    code_addr: *const c_void,
    _map_length: Jint,
    _map: *const c_void,
    compile_info: *const c_void,
) {
    with_agent(|agent| {
        // HotSpot posts these from its Service Thread (JDK 9+); ClassPrepare, by contrast, runs
        // on whichever Java thread prepared the class, whatever its name.
        events::first_compiled_method_on_this_thread();
        // OpenJ9's compile_info is its metadata, not jvmticmlr.h records.
        let j9_metadata = if agent.openj9 {
            ffi::copy_openj9_metadata(compile_info, code_addr as u64)
                .map(|image| (compile_info as u64, image))
        } else {
            None
        };
        let openj9 = agent.openj9;
        events::compiled_method_load(
            agent,
            MethodId::of_vm(method),
            code_addr as u64,
            code_size.max(0) as u32,
            |pcs| {
                if !openj9 {
                    ffi::read_pc_stacks(compile_info, code_addr as u64, pcs);
                }
            },
            j9_metadata,
        );
    });
}

extern "C" fn on_compiled_method_unload(_env: RawEnv, method: JMethodId, code_addr: *const c_void) {
    with_agent(|agent| {
        events::compiled_method_unload(agent, MethodId::of_vm(method), code_addr as u64)
    });
}

extern "C" fn on_dynamic_code_generated(
    _env: RawEnv,
    name: *const c_char,
    address: *const c_void,
    length: Jint,
) {
    with_agent(|agent| {
        let name = ffi::vm_text(name).unwrap_or_else(|| "[HotSpot stub]".to_string());
        events::dynamic_code_generated(agent, &name, address as u64, length.max(0) as u32);
    });
}

extern "C" fn on_vm_init(_env: RawEnv, jni: *mut c_void, _thread: *mut c_void) {
    with_agent(|agent| {
        // Stubs generated before the live phase are not all posted; replaying them is cheap.
        agent.jvmti.generate_events(EVENT_DYNAMIC_CODE_GENERATED);
        // Classes prepared before the live phase got no ClassPrepare; the naming thread starts.
        events::vm_init(agent, JniEnv::of_vm(jni));
        events::flush(agent);
    });
}

extern "C" fn on_class_prepare(
    _env: RawEnv,
    jni: *mut c_void,
    _thread: *mut c_void,
    class: JClass,
) {
    with_agent(|agent| {
        events::prepared(agent, JniEnv::of_vm(jni), &[class]);
    });
}

extern "C" fn on_vm_death(_env: RawEnv, jni: *mut c_void) {
    with_agent(|agent| events::close(agent, JniEnv::of_vm(jni)));
}

/// Sets up the env: capabilities, callbacks, events. `Err` says what failed.
fn init(vm: *mut FunctionTable, options: *const c_char, live: bool) -> Result<(), String> {
    let options = ffi::vm_text(options).unwrap_or_default();
    if let Some(agent) = AGENT.get() {
        // Attached again: the env, capabilities and callbacks are in place; start a new file.
        if !live {
            return Err("the agent is already loaded in this VM".into());
        }
        events::restart(agent, &options)?;
        replay(agent);
        return Ok(());
    }
    let jvmti = ffi::open_jvmti(vm)?;
    let agent = events::start(JavaVm::of_vm(vm), jvmti, &options)?;
    if AGENT.set(agent).is_err() {
        return Err("the agent is already loaded in this VM".into());
    }
    let agent = AGENT.get().expect("just set");
    agent.jvmti.enable_events(&Callbacks {
        vm_init: on_vm_init,
        vm_death: on_vm_death,
        class_prepare: on_class_prepare,
        compiled_method_load: on_compiled_method_load,
        compiled_method_unload: on_compiled_method_unload,
        dynamic_code_generated: on_dynamic_code_generated,
    })?;
    if live {
        // Attached to a running VM: replay what was compiled and generated before us.
        replay(agent);
        events::start_naming(agent);
    }
    Ok(())
}

/// Asks the VM for what exists already: generated code, compiled methods, loaded classes
/// (named here: the attaching thread has no JNI environment at hand).
fn replay(agent: &Agent) {
    agent.jvmti.generate_events(EVENT_DYNAMIC_CODE_GENERATED);
    agent.jvmti.generate_events(EVENT_COMPILED_METHOD_LOAD);
    events::all_loaded_classes(agent);
    events::flush(agent);
}

/// `-agentpath:libjprof_agent.so[=dir=PATH]`. Never stops the VM from starting: a failure is
/// reported on stderr and the VM runs without the agent.
#[no_mangle]
pub extern "C" fn Agent_OnLoad(
    vm: *mut FunctionTable,
    options: *const c_char,
    _reserved: *mut c_void,
) -> Jint {
    let result = catch_unwind(AssertUnwindSafe(|| init(vm, options, false)));
    match result {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("jprof agent: not active: {e}"),
        Err(_) => eprintln!("jprof agent: not active: internal error"),
    }
    JNI_OK
}

/// Dynamic attach (`load` command): the attaching tool gets a non-zero code on failure.
#[no_mangle]
pub extern "C" fn Agent_OnAttach(
    vm: *mut FunctionTable,
    options: *const c_char,
    _reserved: *mut c_void,
) -> Jint {
    match catch_unwind(AssertUnwindSafe(|| init(vm, options, true))) {
        Ok(Ok(())) => JNI_OK,
        // A VM attached while it starts (`jprof record -a` meets it then): said by the return
        // code alone, not in the VM's stderr; jprof asks again.
        Ok(Err(e)) if e == ffi::NOT_LIVE => ffi::JNI_EDETACHED,
        Ok(Err(e)) => {
            eprintln!("jprof agent: attach failed: {e}");
            -1
        }
        Err(_) => -1,
    }
}

#[no_mangle]
pub extern "C" fn Agent_OnUnload(_vm: *mut FunctionTable) {
    with_agent(|agent| events::close(agent, None));
}
