//! A QEMU TCG plugin that counts, exactly, how often each guest instruction executes.
//!
//! Written against QEMU's plugin API version 1 (QEMU 7.2, which ships no `qemu-plugin.h`): the
//! few functions used are declared here and resolved by QEMU when it loads the library. Every
//! instruction of every translated block gets an inline 64-bit add on its own counter, so the
//! cost is a few host instructions per guest instruction and no callback. At exit the counts
//! are written to `out=FILE` as little-endian pairs `(pc: u64, count: u64)`, sorted by pc,
//! after an 8-byte header `"SMPLEXC1"`.
//!
//! Usage: `qemu-system-arm ... -plugin libcargo_sample_exact.so,out=counts.bin`.
#![allow(non_camel_case_types)]

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::io::Write;
use std::sync::Mutex;

type qemu_plugin_id_t = u64;

#[repr(C)]
pub struct qemu_plugin_tb {
    _opaque: [u8; 0],
}

#[repr(C)]
pub struct qemu_plugin_insn {
    _opaque: [u8; 0],
}

/// `QEMU_PLUGIN_INLINE_ADD_U64`, the only inline operation of API version 1.
const INLINE_ADD_U64: c_int = 0;

unsafe extern "C" {
    fn qemu_plugin_register_vcpu_tb_trans_cb(
        id: qemu_plugin_id_t,
        cb: extern "C" fn(qemu_plugin_id_t, *mut qemu_plugin_tb),
    );
    fn qemu_plugin_tb_n_insns(tb: *const qemu_plugin_tb) -> usize;
    fn qemu_plugin_tb_get_insn(tb: *const qemu_plugin_tb, idx: usize) -> *mut qemu_plugin_insn;
    fn qemu_plugin_insn_vaddr(insn: *const qemu_plugin_insn) -> u64;
    fn qemu_plugin_register_vcpu_insn_exec_inline(
        insn: *mut qemu_plugin_insn,
        op: c_int,
        ptr: *mut c_void,
        imm: u64,
    );
    fn qemu_plugin_register_atexit_cb(
        id: qemu_plugin_id_t,
        cb: extern "C" fn(qemu_plugin_id_t, *mut c_void),
        userdata: *mut c_void,
    );
}

/// The plugin API version this library was written for; QEMU refuses a mismatch by name.
#[unsafe(no_mangle)]
pub static qemu_plugin_version: c_int = 1;

struct Counters {
    /// One counter per guest address. Boxed so the address QEMU adds to never moves.
    by_pc: HashMap<u64, Box<u64>>,
    out: Option<String>,
}

static STATE: Mutex<Option<Counters>> = Mutex::new(None);

extern "C" fn on_translate(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    let mut guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(state) = guard.as_mut() else { return };
    // SAFETY: QEMU passes a valid translation block for the duration of this callback.
    let n = unsafe { qemu_plugin_tb_n_insns(tb) };
    for i in 0..n {
        // SAFETY: i < n, as the API requires.
        unsafe {
            let insn = qemu_plugin_tb_get_insn(tb, i);
            let pc = qemu_plugin_insn_vaddr(insn);
            let counter = state.by_pc.entry(pc).or_insert_with(|| Box::new(0));
            let ptr: *mut u64 = &mut **counter;
            qemu_plugin_register_vcpu_insn_exec_inline(insn, INLINE_ADD_U64, ptr.cast(), 1);
        }
    }
}

extern "C" fn on_exit(_id: qemu_plugin_id_t, _userdata: *mut c_void) {
    let guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(state) = guard.as_ref() else { return };
    let Some(path) = &state.out else { return };
    let mut pairs: Vec<(u64, u64)> = state
        .by_pc
        .iter()
        .filter(|(_, c)| ***c > 0)
        .map(|(pc, c)| (*pc, **c))
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
            _ => {
                eprintln!(
                    "cargo-sample exact-count plugin: unknown argument `{arg}` (takes out=FILE)"
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
