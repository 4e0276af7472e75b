//! Native ABI v1 test plugin in Rust. Every tool call is handed to a worker
//! thread started in cortex_plugin_init (std threads are what a static host
//! cannot load). Tools: word_count {"text": "..."}, threads (reports the
//! worker thread's name). plugin_drop writes buffer accounting to the path
//! in STATS_PATH at build time, when set.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;

#[repr(C)]
pub struct CortexBuffer {
    pub ptr: *mut u8,
    pub len: usize,
    pub cap: usize,
}

#[repr(C)]
pub struct CortexHostApi {
    pub abi_version: u32,
}

#[repr(C)]
pub struct CortexPluginApi {
    pub abi_version: u32,
    pub plugin: *mut c_void,
    pub plugin_info: Option<unsafe extern "C" fn(*mut c_void) -> CortexBuffer>,
    pub tool_count: Option<unsafe extern "C" fn(*mut c_void) -> usize>,
    pub tool_descriptor: Option<unsafe extern "C" fn(*mut c_void, usize) -> CortexBuffer>,
    pub tool_execute:
        Option<unsafe extern "C" fn(*mut c_void, CortexBuffer, CortexBuffer, CortexBuffer) -> CortexBuffer>,
    pub plugin_drop: Option<unsafe extern "C" fn(*mut c_void)>,
    pub buffer_free: Option<unsafe extern "C" fn(CortexBuffer)>,
}

static ALLOCS: AtomicUsize = AtomicUsize::new(0);
static FREES: AtomicUsize = AtomicUsize::new(0);

type Job = (String, String, Sender<String>);

struct State {
    jobs: Mutex<Option<Sender<Job>>>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

fn buffer(s: String) -> CortexBuffer {
    let mut b = s.into_bytes();
    let out = CortexBuffer { ptr: b.as_mut_ptr(), len: b.len(), cap: b.capacity() };
    std::mem::forget(b);
    ALLOCS.fetch_add(1, Ordering::SeqCst);
    out
}

unsafe fn borrowed(b: &CortexBuffer) -> String {
    if b.ptr.is_null() || b.len == 0 {
        return String::new();
    }
    String::from_utf8_lossy(std::slice::from_raw_parts(b.ptr, b.len)).into_owned()
}

const DESCRIPTORS: [&str; 2] = [
    r#"{"name":"word_count","description":"Count words in a text string (on a worker thread).","input_schema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},"timeout_secs":null,"capabilities":{"emits_progress":false,"emits_observer_text":false,"background_safe":true}}"#,
    r#"{"name":"threads","description":"Name the thread that runs tools.","input_schema":{"type":"object"},"timeout_secs":5,"capabilities":{"emits_progress":false,"emits_observer_text":false,"background_safe":true}}"#,
];

fn text_of(input: &str) -> String {
    match input.find("\"text\"") {
        None => String::new(),
        Some(i) => {
            let rest = &input[i + 6..];
            let start = match rest.find('"') {
                Some(s) => s + 1,
                None => return String::new(),
            };
            let rest = &rest[start..];
            rest[..rest.find('"').unwrap_or(rest.len())].to_string()
        }
    }
}

fn run(tool: &str, input: &str) -> String {
    match tool {
        "word_count" => {
            let n = text_of(input).split_whitespace().count();
            format!(r#"{{"output":"{} words","media":[],"is_error":false}}"#, n)
        }
        "threads" => {
            let name = std::thread::current().name().unwrap_or("?").to_string();
            format!(r#"{{"output":"{}","media":[],"is_error":false}}"#, name)
        }
        _ => r#"{"output":"no such tool","media":[],"is_error":true}"#.to_string(),
    }
}

unsafe extern "C" fn plugin_info(_: *mut c_void) -> CortexBuffer {
    buffer(r#"{"name":"hello-rust","version":"0.1.0","description":"Rust test plugin"}"#.to_string())
}

unsafe extern "C" fn tool_count(_: *mut c_void) -> usize {
    DESCRIPTORS.len()
}

unsafe extern "C" fn tool_descriptor(_: *mut c_void, i: usize) -> CortexBuffer {
    match DESCRIPTORS.get(i) {
        Some(d) => buffer(d.to_string()),
        None => CortexBuffer { ptr: std::ptr::null_mut(), len: 0, cap: 0 },
    }
}

unsafe extern "C" fn tool_execute(
    state: *mut c_void,
    name: CortexBuffer,
    input: CortexBuffer,
    _invocation: CortexBuffer,
) -> CortexBuffer {
    let state = &*(state as *const State);
    let (name, input) = (borrowed(&name), borrowed(&input));
    let (tx, rx) = channel();
    let sent = match state.jobs.lock().unwrap().as_ref() {
        Some(jobs) => jobs.send((name, input, tx)).is_ok(),
        None => false,
    };
    let out = if sent { rx.recv().unwrap_or_default() } else { String::new() };
    buffer(out)
}

unsafe extern "C" fn plugin_drop(state: *mut c_void) {
    let state = Box::from_raw(state as *mut State);
    state.jobs.lock().unwrap().take(); // closes the channel: the worker ends
    if let Some(w) = state.worker.lock().unwrap().take() {
        let _ = w.join();
    }
    if let Some(path) = option_env!("STATS_PATH") {
        let (a, f) = (ALLOCS.load(Ordering::SeqCst), FREES.load(Ordering::SeqCst));
        let line = format!("allocs={} frees={} live={} drops=1\n", a, f, a - f);
        use std::io::Write;
        if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = file.write_all(line.as_bytes());
        }
    }
}

unsafe extern "C" fn buffer_free(b: CortexBuffer) {
    if b.ptr.is_null() {
        return;
    }
    drop(Vec::from_raw_parts(b.ptr, b.len, b.cap));
    FREES.fetch_add(1, Ordering::SeqCst);
}

fn worker(jobs: Receiver<Job>) {
    for (tool, input, reply) in jobs {
        let _ = reply.send(run(&tool, &input));
    }
}

#[no_mangle]
pub unsafe extern "C" fn cortex_plugin_init(host: *const CortexHostApi, out: *mut CortexPluginApi) -> i32 {
    if host.is_null() || out.is_null() {
        return -1;
    }
    if (*host).abi_version != 1 {
        return -2;
    }
    let (tx, rx) = channel::<Job>();
    let handle = std::thread::Builder::new()
        .name("plugin-worker".to_string())
        .spawn(move || worker(rx))
        .expect("spawn worker");
    let state = Box::new(State { jobs: Mutex::new(Some(tx)), worker: Mutex::new(Some(handle)) });
    *out = CortexPluginApi {
        abi_version: 1,
        plugin: Box::into_raw(state) as *mut c_void,
        plugin_info: Some(plugin_info),
        tool_count: Some(tool_count),
        tool_descriptor: Some(tool_descriptor),
        tool_execute: Some(tool_execute),
        plugin_drop: Some(plugin_drop),
        buffer_free: Some(buffer_free),
    };
    0
}
