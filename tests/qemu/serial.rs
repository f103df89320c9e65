//! `--serial`: the dump through the firmware's own UART. In QEMU the "board" is mps2-an385 with
//! UART0 on a FIFO (tests/fixtures/uart-runner.sh is the loader `--runner` calls), and the FIFO
//! is the port cargo-sample reads.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::{assert_hot_a_share, run_dir_of, scenarios};
use serde_json::Value;

fn fifo_pair(dir: &Path) -> PathBuf {
    let base = dir.join("uart");
    for end in ["in", "out"] {
        let p = std::ffi::CString::new(format!("{}.{end}", base.display())).unwrap();
        // SAFETY: creating a FIFO in our own temporary directory.
        assert_eq!(unsafe { libc::mkfifo(p.as_ptr(), 0o600) }, 0);
    }
    base
}

fn serial_run(bin: &str, extra: &[&str]) -> (Output, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let base = fifo_pair(tmp.path());
    let runner = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/uart-runner.sh");
    let port = format!("{}.out", base.display());
    let mut args = vec![
        "sample",
        "--release",
        "--bin",
        bin,
        "--format",
        "json",
        "--serial",
        &port,
        "--runner",
        runner.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cargo-sample"))
        .args(&args)
        .current_dir(scenarios())
        .env("NO_COLOR", "1")
        .env("UART_FIFO", &base)
        .output()
        .unwrap();
    (out, tmp)
}

#[test]
fn the_dump_arrives_through_the_firmwares_uart_among_its_own_output() {
    let (out, _tmp) = serial_run("uart-dump", &["-n", "4000"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["samples"], 4000);
    assert_eq!(r["taken"], 4000);
    assert_eq!(r["source"], "serial");
    assert_hot_a_share(&r, 4000.0);
    // Everything the port carried is kept: the application's line, then the dump.
    let dir = run_dir_of(&out.stderr);
    let raw = std::fs::read(dir.join("serial.bin")).unwrap();
    assert!(raw.starts_with(b"uart-dump: hello\r\n"));
    let dump = std::fs::read(dir.join("sampler.dump")).unwrap();
    assert!(raw.ends_with(&dump) || raw.windows(dump.len()).any(|w| w == dump.as_slice()));
    assert!(dump.starts_with(b"SMPL"));
}

#[test]
fn a_defmt_logger_on_the_same_uart_is_decoded_as_its_frames_arrive() {
    // What uart-defmt logs, read off its source: level, message, and the line of each call.
    let at = |call: &str| crate::support::logged_at("uart-defmt", call);
    let mut expected = vec![format!("INFO  uart-defmt: start{}", at("defmt::info!"))];
    for round in [0, 100, 200, 300] {
        expected.push(format!(
            "WARN  uart-defmt: round {round}{}",
            at("defmt::warn!")
        ));
    }
    let (out, _tmp) = serial_run("uart-defmt", &["-n", "4000", "--features", "defmt"]);
    // The frames went out as frames (not text), before the dump, which is whole.
    crate::support::assert_defmt_log(&out, "uart-defmt: ", &expected, "serial.bin");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["samples"], 4000);
    assert_hot_a_share(&r, 4000.0);
}

#[test]
fn stacks_arrive_through_the_uart_and_unwind_to_the_reset_handler() {
    // The writer sends the ring once, at the end: with stacks it holds few samples, which the
    // host says before the run; the newest ring's worth arrives and every stack unwinds.
    let (out, _tmp) = serial_run("uart-dump", &["-n", "500", "--stacks", "16"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let fits: u64 = stderr
        .split("the ring holds ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no ring warning: {stderr}"));
    assert!(stderr.contains(&format!("`-n {fits}`")), "{stderr}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (r["samples"].as_u64(), r["taken"].as_u64()),
        (Some(fits), Some(500)),
        "{stderr}"
    );
    assert!(fits > 30, "{fits}");
    let u = &r["unwinding"];
    assert_eq!(u["samples"], fits, "{u}");
    assert_eq!(u["complete"], fits, "{u}");
    assert_eq!(u["window_words"], 16, "{u}");
    // The loop's functions are leaves (inclusive = self); main holds every sample, and so
    // does the reset handler at the root of the tree.
    let row = |name: &str| {
        r["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
            .clone()
    };
    assert_eq!(row("hot_a")["inclusive_samples"], row("hot_a")["samples"]);
    assert_eq!(
        row("uart_dump::__cortex_m_rt_main")["inclusive_samples"],
        fits
    );
    let reset = r["tree"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Reset")
        .unwrap();
    assert_eq!(reset["total_count"], fits);
}

#[test]
fn a_firmware_that_never_writes_the_dump_gets_a_clear_error_and_the_bytes_are_kept() {
    // hot-loops sets no writer: the sampler has nowhere to send its dump.
    let (out, _tmp) = serial_run("hot-loops", &["-n", "2000", "--timeout", "4"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("no dump arrived"), "{stderr}");
    assert!(stderr.contains("sampler_rt::set_writer"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let dir = run_dir_of(&out.stderr);
    let meta: Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(meta["state"], "timed out");
}

/// A board application that owns SysTick (a polled delay) and paces the sampler with a timer
/// it drives itself: the board path sees SysTick is the application's, builds sampler-rt
/// without its SysTick handler, and the dump arrives with the firmware's timer named.
#[test]
fn a_board_firmware_that_owns_systick_paces_the_sampler_with_its_own_timer() {
    let (out, _tmp) = serial_run("uart-own-systick", &["-n", "2000"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("the firmware owns SysTick (`systick_delay` programs it)"),
        "{stderr}"
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["samples"], 2000);
    assert_eq!(r["timer"], "the firmware's timer");
}
