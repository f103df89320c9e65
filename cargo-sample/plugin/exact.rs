//! A QEMU TCG plugin that counts, exactly, how often each guest instruction executes.
//!
//! QEMU's plugin API changed incompatibly in QEMU 9.0: the global inline counter
//! (`qemu_plugin_register_vcpu_insn_exec_inline`, API version 1, QEMU 4.2 to 8.2) gave way to
//! per-vCPU "scoreboards" (`..._inline_per_vcpu`, API versions 2 and later, QEMU 9.0 on), and
//! QEMU 9.0 raised the oldest version it loads to 2. One library cannot declare both, so this
//! source builds twice: without features for API version 1, with the `api-v2` feature for
//! QEMU 9.0 and later. Debian's QEMU ships no `qemu-plugin.h`; the few functions used are
//! declared here and resolved by QEMU when it loads the library.
//!
//! Every instruction of every translated block gets an inline 64-bit add on its own counter:
//! a few host instructions per guest instruction and no callback. At exit the counts are
//! written to `out=FILE` as little-endian pairs `(pc: u64, count: u64)`, sorted by pc, after
//! an 8-byte header `"SMPLEXC1"`.
//!
//! With `budget=N` the run ends once about N instructions have executed (checked at the start
//! of each translated block, so it overshoots by less than one block): the counts are written
//! and QEMU exits with status 0, leaving an empty `FILE.budget` beside the counts. That check is a callback per block, so it costs more than the
//! inline counters and is only installed when a budget is given.
//!
//! With `ticks=FILE` it also plays the clock of a DWT's PC sampler: the PC of every 64th
//! (`tick=N`: Nth) executed instruction (the one that makes the count a multiple) is appended
//! to `FILE` as a little-endian `u32`, through a 4 KiB buffer (flushed when full and at exit).
//! The block callback counts a block's instructions when it starts, so a block cut short by
//! a fault counts whole; QEMU ends blocks at interrupts, so those are exact.
//!
//! Usage: `qemu-system-arm ... -plugin libcargo_sample_exact.so,out=counts.bin[,budget=N][,ticks=FILE]`.
#![allow(non_camel_case_types)]

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

type qemu_plugin_id_t = u64;

#[repr(C)]
pub struct qemu_plugin_tb {
    _opaque: [u8; 0],
}

#[repr(C)]
pub struct qemu_plugin_insn {
    _opaque: [u8; 0],
}

/// `QEMU_PLUGIN_INLINE_ADD_U64`: 0 in every API version.
const INLINE_ADD_U64: c_int = 0;
/// `QEMU_PLUGIN_CB_NO_REGS`.
const CB_NO_REGS: c_int = 0;

unsafe extern "C" {
    fn qemu_plugin_register_vcpu_tb_trans_cb(
        id: qemu_plugin_id_t,
        cb: extern "C" fn(qemu_plugin_id_t, *mut qemu_plugin_tb),
    );
    fn qemu_plugin_tb_n_insns(tb: *const qemu_plugin_tb) -> usize;
    fn qemu_plugin_tb_get_insn(tb: *const qemu_plugin_tb, idx: usize) -> *mut qemu_plugin_insn;
    fn qemu_plugin_insn_vaddr(insn: *const qemu_plugin_insn) -> u64;
    fn qemu_plugin_register_vcpu_tb_exec_cb(
        tb: *mut qemu_plugin_tb,
        cb: extern "C" fn(u32, *mut c_void),
        flags: c_int,
        userdata: *mut c_void,
    );
    fn qemu_plugin_register_atexit_cb(
        id: qemu_plugin_id_t,
        cb: extern "C" fn(qemu_plugin_id_t, *mut c_void),
        userdata: *mut c_void,
    );
    fn _exit(status: c_int) -> !;
}

/// API version 1: one plain `u64` per guest address, added to by QEMU's generated code.
#[cfg(not(feature = "api-v2"))]
mod counter {
    use super::*;

    /// The plugin API version this library was written for; QEMU refuses a mismatch by name.
    #[unsafe(no_mangle)]
    pub static qemu_plugin_version: c_int = 1;

    unsafe extern "C" {
        fn qemu_plugin_register_vcpu_insn_exec_inline(
            insn: *mut qemu_plugin_insn,
            op: c_int,
            ptr: *mut c_void,
            imm: u64,
        );
    }

    /// Boxed so that the address QEMU adds to never moves.
    pub struct Counter(Box<u64>);

    impl Counter {
        pub fn new() -> Counter {
            Counter(Box::new(0))
        }

        /// # Safety
        /// `insn` is an instruction of the block being translated.
        pub unsafe fn attach(&mut self, insn: *mut qemu_plugin_insn) {
            let ptr: *mut u64 = &mut *self.0;
            // SAFETY: see the function's contract; the counter outlives the translated code.
            unsafe {
                qemu_plugin_register_vcpu_insn_exec_inline(insn, INLINE_ADD_U64, ptr.cast(), 1)
            };
        }

        pub fn total(&self) -> u64 {
            *self.0
        }
    }
}

/// API version 2 and later (QEMU 9.0 on): a one-`u64` scoreboard per guest address, summed
/// over vCPUs at the end.
#[cfg(feature = "api-v2")]
mod counter {
    use super::*;

    /// The plugin API version this library was written for. QEMU 9.0 and later load every
    /// version from 2 to their own; the functions used here are in all of them.
    #[unsafe(no_mangle)]
    pub static qemu_plugin_version: c_int = 2;

    #[repr(C)]
    pub struct qemu_plugin_scoreboard {
        _opaque: [u8; 0],
    }

    /// `qemu_plugin_u64`: a `u64` at `offset` in each vCPU's entry of a scoreboard.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct qemu_plugin_u64 {
        score: *mut qemu_plugin_scoreboard,
        offset: usize,
    }

    unsafe extern "C" {
        fn qemu_plugin_scoreboard_new(element_size: usize) -> *mut qemu_plugin_scoreboard;
        fn qemu_plugin_u64_sum(entry: qemu_plugin_u64) -> u64;
        fn qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(
            insn: *mut qemu_plugin_insn,
            op: c_int,
            entry: qemu_plugin_u64,
            imm: u64,
        );
    }

    pub struct Counter(qemu_plugin_u64);

    // SAFETY: the scoreboard is QEMU's; it is only read at exit, under the plugin's lock.
    unsafe impl Send for Counter {}

    impl Counter {
        pub fn new() -> Counter {
            // SAFETY: allocates a scoreboard of one u64 per vCPU, never freed (it lives as
            // long as the translated code that adds to it).
            let score = unsafe { qemu_plugin_scoreboard_new(8) };
            Counter(qemu_plugin_u64 { score, offset: 0 })
        }

        /// # Safety
        /// `insn` is an instruction of the block being translated.
        pub unsafe fn attach(&mut self, insn: *mut qemu_plugin_insn) {
            // SAFETY: see the function's contract.
            unsafe {
                qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(insn, INLINE_ADD_U64, self.0, 1)
            };
        }

        pub fn total(&self) -> u64 {
            // SAFETY: a scoreboard entry this plugin created.
            unsafe { qemu_plugin_u64_sum(self.0) }
        }
    }
}

use counter::Counter;
pub use counter::qemu_plugin_version;

/// Instruction budget (0 = none) and instructions started so far.
static BUDGET: AtomicU64 = AtomicU64::new(0);
static STARTED: AtomicU64 = AtomicU64::new(0);

struct Counters {
    by_pc: HashMap<u64, Counter>,
    out: Option<String>,
}

static STATE: Mutex<Option<Counters>> = Mutex::new(None);

/// Instructions between two ticks (`tick=N`; 64 by default, the DWT's finest tap).
static TICK: AtomicU64 = AtomicU64::new(64);

/// The tick file, when asked for.
static TICKS: Mutex<Option<std::io::BufWriter<std::fs::File>>> = Mutex::new(None);

/// What a block's callback needs: its instructions' addresses.
struct Block {
    pcs: Vec<u32>,
}

extern "C" fn on_block(_vcpu: u32, data: *mut c_void) {
    // SAFETY: the pointer is a `Block` leaked at translation, never freed.
    let block = unsafe { &*(data as *const Block) };
    let n = block.pcs.len() as u64;
    let before = STARTED.fetch_add(n, Ordering::Relaxed);
    let total = before + n;
    let tick = TICK.load(Ordering::Relaxed);
    if total / tick > before / tick {
        let mut guard = TICKS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = guard.as_mut() {
            let mut k = (before / tick + 1) * tick;
            while k <= total {
                let pc = block.pcs[(k - before - 1) as usize];
                let _ = w.write_all(&pc.to_le_bytes());
                k += tick;
            }
        }
    }
    let budget = BUDGET.load(Ordering::Relaxed);
    if budget != 0 && total >= budget {
        write_counts();
        // Tell the host that the budget, not the program, ended the run.
        let guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(path) = guard.as_ref().and_then(|s| s.out.as_ref()) {
            let _ = std::fs::write(format!("{path}.budget"), b"");
        }
        // SAFETY: ends the process at once; QEMU holds nothing that must be flushed.
        unsafe { _exit(0) }
    }
}

extern "C" fn on_translate(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    let mut guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(state) = guard.as_mut() else { return };
    // SAFETY: QEMU passes a valid translation block for the duration of this callback.
    let n = unsafe { qemu_plugin_tb_n_insns(tb) };
    let counting = state.out.is_some();
    let mut pcs = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: i < n, as the API requires; the instruction belongs to this block.
        unsafe {
            let insn = qemu_plugin_tb_get_insn(tb, i);
            let pc = qemu_plugin_insn_vaddr(insn);
            pcs.push(pc as u32);
            if counting {
                state
                    .by_pc
                    .entry(pc)
                    .or_insert_with(Counter::new)
                    .attach(insn);
            }
        }
    }
    let ticking = TICKS.lock().map(|t| t.is_some()).unwrap_or(false);
    if BUDGET.load(Ordering::Relaxed) != 0 || ticking {
        let block = Box::into_raw(Box::new(Block { pcs })).cast::<c_void>();
        // SAFETY: registering on the block QEMU is translating; the user data lives for ever.
        unsafe { qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, CB_NO_REGS, block) };
    }
}

extern "C" fn on_exit(_id: qemu_plugin_id_t, _userdata: *mut c_void) {
    write_counts();
}

fn flush_ticks() {
    if let Some(w) = TICKS.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        let _ = w.flush();
    }
}

fn write_counts() {
    flush_ticks();
    let guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(state) = guard.as_ref() else { return };
    let Some(path) = &state.out else { return };
    let mut pairs: Vec<(u64, u64)> = state
        .by_pc
        .iter()
        .map(|(pc, c)| (*pc, c.total()))
        .filter(|&(_, n)| n > 0)
        .collect();
    pairs.sort_unstable();
    let mut bytes = Vec::with_capacity(8 + 16 * pairs.len());
    bytes.extend_from_slice(b"SMPLEXC1");
    for (pc, c) in pairs {
        bytes.extend_from_slice(&pc.to_le_bytes());
        bytes.extend_from_slice(&c.to_le_bytes());
    }
    let tmp = format!("{path}.tmp");
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(&bytes))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        eprintln!("cargo-sample exact-count plugin: cannot write {path}: {e}");
    }
}

/// Entry point QEMU calls after loading the library.
///
/// # Safety
/// Called by QEMU with `argc` valid C strings in `argv`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qemu_plugin_install(
    id: qemu_plugin_id_t,
    _info: *const c_void,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    let mut out = None;
    for i in 0..argc.max(0) as usize {
        // SAFETY: QEMU passes argc valid NUL-terminated strings.
        let arg = unsafe { CStr::from_ptr(*argv.add(i)) }.to_string_lossy();
        match arg.split_once('=') {
            Some(("out", v)) => out = Some(v.to_owned()),
            Some(("ticks", v)) => match std::fs::File::create(v) {
                Ok(f) => {
                    *TICKS.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(std::io::BufWriter::with_capacity(4096, f))
                }
                Err(e) => {
                    eprintln!("cargo-sample exact-count plugin: cannot create {v}: {e}");
                    return -1;
                }
            },
            Some(("tick", v)) => match v.parse::<u64>() {
                Ok(n) if n > 0 => TICK.store(n, Ordering::Relaxed),
                _ => {
                    eprintln!(
                        "cargo-sample exact-count plugin: tick=`{v}` is not a positive number"
                    );
                    return -1;
                }
            },
            Some(("budget", v)) => match v.parse::<u64>() {
                Ok(n) => BUDGET.store(n, Ordering::Relaxed),
                Err(_) => {
                    eprintln!("cargo-sample exact-count plugin: budget=`{v}` is not a number");
                    return -1;
                }
            },
            _ => {
                eprintln!(
                    "cargo-sample exact-count plugin: unknown argument `{arg}` (takes out=FILE, budget=N, ticks=FILE, tick=N)"
                );
                return -1;
            }
        }
    }
    *STATE.lock().unwrap_or_else(|e| e.into_inner()) = Some(Counters {
        by_pc: HashMap::new(),
        out,
    });
    // SAFETY: registering callbacks with the id QEMU gave us.
    unsafe {
        qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
        qemu_plugin_register_atexit_cb(id, on_exit, std::ptr::null_mut());
    }
    0
}
