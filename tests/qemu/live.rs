//! Live capture in real QEMU: the host reads the sampler's ring through the monitor while the
//! firmware runs, the way a probe reads it on a board. Every sample taken is either delivered or
//! counted as lost, the firmware's end waits for the host, and a duration ends a run that never
//! would.

use crate::support::{
    assert_hot_a_share, cargo_sample, kept_dir, profile_in, run_dir_of, scenarios,
};
use serde_json::Value;

fn counts(r: &Value) -> (u64, u64, u64) {
    (
        r["samples"].as_u64().unwrap(),
        r["taken"].as_u64().unwrap(),
        r["lost"].as_u64().unwrap(),
    )
}

#[test]
fn a_host_that_keeps_up_gets_every_sample_across_many_laps_of_the_ring() {
    // 30 000 samples pass three times through the 10 240-slot ring.
    let (r, _) = profile_in("hot-loops", &["--live", "-n", "30000"]);
    assert_eq!(r["source"], "live");
    assert_eq!(counts(&r), (30_000, 30_000, 0));
    assert_eq!(r["stop"], "sample limit reached");
    assert_hot_a_share(&r, 30_000.0);
}

#[test]
fn samples_the_host_could_not_read_in_time_are_counted_and_reported() {
    // A sample every ~60 instructions and a read every 300 ms: the ring laps between reads.
    let args = [
        "--release",
        "--bin",
        "hot-loops",
        "--format",
        "json",
        "--live",
        "-n",
        "300000",
        "--period",
        "100ticks",
        "--poll-interval",
        "300",
    ];
    let out = cargo_sample(&scenarios(), &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (samples, taken, lost) = counts(&r);
    assert_eq!(taken, 300_000);
    assert!(lost > 0, "nothing lost with a 300 ms read interval");
    assert_eq!(samples + lost, taken, "every sample delivered or counted");
    assert!(
        stderr.contains("overwritten before the host read them"),
        "{stderr}"
    );
    // Not an overwritten ring: the losses are the capture's, and said once.
    assert_eq!(r["overwritten"], 0);
    // What arrived is a fair sample of a program that does the same thing all along.
    assert_hot_a_share(&r, samples as f64);
    // The saved run reports the same counts again.
    let dir = run_dir_of(&out.stderr);
    let again = cargo_sample(
        &scenarios(),
        &["report", dir.to_str().unwrap(), "--format", "json"],
    );
    let again: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(counts(&again), (samples, taken, lost));
}

#[test]
fn a_firmware_that_ends_waits_for_the_host_and_nothing_is_lost() {
    // The same deterministic run read live and sent through semihosting: the same samples.
    let (live, _) = profile_in("early-exit", &["--live"]);
    let (sent, _) = profile_in("early-exit", &[]);
    assert_eq!(live["stop"], "the firmware ended the run");
    let (samples, taken, lost) = counts(&live);
    assert_eq!(lost, 0);
    assert_eq!(samples, taken);
    assert_eq!(taken, sent["taken"].as_u64().unwrap());
    assert_eq!(live["functions"], sent["functions"]);
    assert_eq!(live["lines"], sent["lines"]);
}

#[test]
fn a_duration_ends_a_run_that_never_would_and_keeps_what_arrived() {
    // hot-loops would run for about 10^10 instructions.
    let started = std::time::Instant::now();
    let (r, dir) = profile_in("hot-loops", &["--duration", "1500ms"]);
    assert!(started.elapsed().as_secs() < 60);
    let (samples, taken, lost) = counts(&r);
    assert!(samples > 1000, "{samples}");
    assert_eq!(samples + lost, taken);
    assert_eq!(
        r["stop"],
        "run cut short; samples read from the target's memory"
    );
    assert_hot_a_share(&r, samples as f64);
    let meta: Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(meta["source"], "live");
    assert_eq!(meta["state"], "duration reached");
}

#[test]
fn the_applications_own_rtt_channels_keep_working_beside_the_sampler() {
    // rtt-target's control block and channels next to the sampler's state and ring: the host
    // reads the ring by the sampler's symbols and copies the application's channel as it goes.
    let (live, dir) = profile_in("rtt-app", &["--features", "rtt", "--live"]);
    let (samples, taken, lost) = counts(&live);
    assert_eq!((samples, lost), (taken, 0));
    let log = std::fs::read_to_string(dir.join("rtt-0.bin")).unwrap();
    assert_eq!(
        log,
        "rtt-app: start\nrtt-app: round 0\nrtt-app: round 100\nrtt-app: round 200\nrtt-app: round 300\n"
    );
    // The same run through semihosting samples the same instructions: the RTT block changed
    // nothing in the sampler's view.
    let (sent, _) = profile_in("rtt-app", &["--features", "rtt"]);
    assert_eq!(live["functions"], sent["functions"]);
}

#[test]
fn the_applications_defmt_log_is_decoded_while_sampling() {
    // What defmt-app logs, read off its source: level, message, and the line of each call.
    let at = |call: &str| crate::support::logged_at("defmt-app", call);
    let mut expected = vec![format!("INFO  defmt-app: start{}", at("defmt::info!"))];
    for round in [0, 100, 200, 300] {
        expected.push(format!(
            "WARN  defmt-app: round {round}, {} left{}",
            400 - round,
            at("defmt::warn!")
        ));
    }
    expected.push(format!("DEBUG defmt-app: done{}", at("defmt::debug!")));

    let defmt_app = |transport: &str, extra: &[&str]| {
        let mut args = vec![
            "--release",
            "--bin",
            "defmt-app",
            "--features",
            transport,
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        cargo_sample(&scenarios(), &args)
    };
    let out = defmt_app("defmt-rtt", &["--live"]);
    // Printed as they came, in order, and kept decoded beside the raw frames.
    crate::support::assert_defmt_log(&out, "defmt-app: ", &expected, "rtt-0.bin");
    // The sampler saw what it sees without the log being read.
    let live: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (samples, taken, lost) = counts(&live);
    assert_eq!((samples, lost), (taken, 0));
    // Without --live nothing reads RTT: the run says how to see the log.
    let sent = defmt_app("defmt-rtt", &[]);
    let err = String::from_utf8_lossy(&sent.stderr);
    assert!(sent.status.success(), "{err}");
    assert!(err.contains("add `--live`"), "{err}");
    let sent: Value = serde_json::from_slice(&sent.stdout).unwrap();
    assert_eq!(live["functions"], sent["functions"]);

    // Through semihosting instead (defmt-semihosting): the frames arrive on QEMU's standard
    // output, decoded the same way without --live; the raw output is kept as it came.
    let semi = defmt_app("defmt-semihosting", &[]);
    crate::support::assert_defmt_log(&semi, "defmt-app: ", &expected, "firmware-output.txt");
}

/// The configuration a run wrote into the image it loads.
#[test]
fn bins_are_read_out_of_memory_at_the_end_as_a_probe_would() {
    // The same run twice: its bins sent through semihosting, and read through QEMU's monitor
    // (the way a probe reads a board) once the sampler stops. Same counters, same profile.
    let args = [
        "--release",
        "--bin",
        "hot-loops",
        "--mode",
        "hist",
        "--bin-size",
        "4",
        "--samples",
        "20000",
        "--format",
        "json",
    ];
    let sent = profile_args(&args, &[]);
    let read = profile_args(&args, &["--live"]);
    assert_eq!(read["source"], "live");
    assert_eq!(read["mode"], sent["mode"]);
    assert_eq!(read["taken"], 20_000);
    assert_eq!(read["functions"], sent["functions"]);
    assert_eq!(read["lines"], sent["lines"]);

    // On a board (no probe here): the image counts bins for a host that reads them.
    let out = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "hot-loops",
            "--mode",
            "hist",
            "--chip",
            "STM32F407VGTx",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no debug probe found"), "{stderr}");
    let dir = kept_dir(&stderr);
    let c = config_in(&dir.join("loaded.elf"));
    assert_eq!(
        (c.mode, c.sink),
        (sampler_rt::wire::MODE_HIST, sampler_rt::wire::SINK_HOST)
    );
}

fn profile_args(args: &[&str], extra: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend_from_slice(extra);
    let out = cargo_sample(&scenarios(), &all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

pub(crate) fn config_in(elf: &std::path::Path) -> sampler_rt::wire::Config {
    use object::{Object, ObjectSection, ObjectSymbol};
    let data = std::fs::read(elf).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let sym = file
        .symbols()
        .find(|s| s.name() == Ok(sampler_rt::wire::CONFIG_SYMBOL))
        .unwrap();
    let section = file.section_by_index(sym.section_index().unwrap()).unwrap();
    let (offset, _) = section.file_range().unwrap();
    let at = (offset + sym.address() - section.address()) as usize;
    sampler_rt::wire::Config::decode(&data[at..at + sampler_rt::wire::CONFIG_LEN]).unwrap()
}

#[test]
fn a_board_run_prepares_its_image_and_stops_at_the_probe_with_a_clear_message() {
    // No probe is attached here: everything up to the probe happens, then a clear error.
    let out = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "hot-loops",
            "--chip",
            "STM32F407VGTx",
            "-n",
            "5000",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("no debug probe found"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let dir = kept_dir(&stderr);
    // The image to flash reads its ring through the probe, stops at 5000 samples, and samples
    // every 10 000 cycles on average.
    let c = config_in(&dir.join("loaded.elf"));
    assert_eq!(c.sink, sampler_rt::wire::SINK_HOST);
    assert_eq!(c.limit, 5000);
    assert_eq!(c.mode, sampler_rt::wire::MODE_RING);
    assert_eq!(c.reload + 1 + c.jitter_mask / 2, 10_000);
    let meta: Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(meta["board"], "timer");
    assert_eq!(meta["unit"], "cycles");
    assert_eq!(meta["state"], "failed");

    // Hardware sampling needs a chip, or a QEMU machine the emulated probe plays.
    let out = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "hot-loops",
            "--method",
            "dwt",
            "--machine",
            "mps2-an505",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("mps2-an505 is not one. On a board, name its chip with `--chip`"),
        "{stderr}"
    );
}

/// A firmware that ends through semihosting's `exit` without flushing (as most examples of
/// other projects do): without `--live` its samples go with it, and the error says to flush or
/// to read live; with `--live` the samples read before it ended are reported, and the last
/// poll's are said to be missing (not an error about the monitor).
#[test]
fn a_firmware_that_exits_without_flushing_is_read_live_up_to_its_end() {
    let out = cargo_sample(&scenarios(), &["--release", "--bin", "exits-unflushed"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("without sending samples"), "{err}");
    assert!(err.contains("`--live`"), "{err}");

    let out = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "exits-unflushed",
            "--live",
            "--poll-interval",
            "20",
            "--format",
            "json",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("the target went away before the host saw the sampler stop"),
        "{err}"
    );
    assert!(!err.contains("reading the target stopped"), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r["samples"].as_u64().unwrap() > 100, "{}", r["samples"]);
    assert_hot_a_share(&r, r["samples"].as_f64().unwrap());
}

/// On a terminal (a real one: tmux) a live run redraws a table of the hottest functions with
/// their shares and intervals, the samples and the rate, and leaves the full report at the
/// end; off a terminal nothing of it is drawn.
#[cfg(unix)]
#[test]
fn a_live_run_shows_a_top_view_on_a_terminal_and_the_report_at_the_end() {
    use std::process::Command;
    use std::time::{Duration, Instant};
    let session = format!("cargo-sample-top-{}", std::process::id());
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .args(args)
            .output()
            .expect("tmux (tests/setup.sh --with-tmux installs it)")
    };
    let cmd = format!(
        "cd '{}' && '{}' sample --release --bin hot-loops --live --duration 5s; sleep 120",
        scenarios().display(),
        env!("CARGO_BIN_EXE_cargo-sample")
    );
    let out = tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "120",
        "-y",
        "50",
        &cmd,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pane = || {
        String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", &session]).stdout).into_owned()
    };
    let wait = |what: &dyn Fn(&str) -> bool, secs: u64| -> String {
        let t0 = Instant::now();
        loop {
            let p = pane();
            if what(&p) || t0.elapsed() > Duration::from_secs(secs) {
                return p;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    // While sampling: the table, hot_a first at about 70 %.
    let during = wait(&|p| p.contains("samples/s") && p.contains("hot_c"), 120);
    let end = wait(&|p| p.contains("Profile of hot-loops"), 120);
    let _ = tmux(&["kill-session", "-t", &session]);
    let _ = std::fs::write(
        crate::support::artifacts_dir().join("top-view.txt"),
        format!("{during}\n----\n{end}"),
    );
    assert!(during.contains("95% interval   function"), "{during}");
    let hot_a = during
        .lines()
        .find(|l| l.trim_end().ends_with("hot_a"))
        .unwrap_or_else(|| panic!("no hot_a row:\n{during}"));
    let share: f64 = hot_a.trim().split('%').next().unwrap().parse().unwrap();
    assert!((60.0..80.0).contains(&share), "{hot_a}");
    // The report replaced it.
    assert!(end.contains("Profile of hot-loops"), "{end}");
    assert!(!end.contains("samples/s"), "{end}");

    // Off a terminal: no table in what standard error carries.
    let out = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "hot-loops",
            "--live",
            "--duration",
            "2s",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("samples/s"), "{err}");
}

#[test]
fn log_lines_stamped_with_the_sample_count_are_firefox_markers_where_they_were_logged() {
    for (transport, extra) in [("defmt-semihosting", None), ("defmt-rtt", Some("--live"))] {
        let features = format!("{transport},timeline");
        let mut args = vec![
            "--release",
            "--bin",
            "defmt-app",
            "--features",
            &features,
            "--period",
            "1000ticks",
            "--format",
            "firefox",
        ];
        args.extend(extra);
        let out = cargo_sample(&scenarios(), &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let p: Value = serde_json::from_slice(&out.stdout).unwrap();
        let (markers, times) = crate::support::firefox_markers(&p["threads"][0]);
        let logged: Vec<(String, String)> = markers
            .iter()
            .map(|m| {
                let text = m.data["message"].as_str().unwrap();
                (m.name.clone(), text.split("  (").next().unwrap().to_owned())
            })
            .collect();
        let mut expected = vec![("INFO".to_owned(), "defmt-app: start".to_owned())];
        for round in [0, 100, 200, 300] {
            expected.push((
                "WARN".into(),
                format!("defmt-app: round {round}, {} left", 400 - round),
            ));
        }
        expected.push(("DEBUG".into(), "defmt-app: done".into()));
        assert_eq!(logged, expected, "{transport}");
        assert!(markers.iter().all(|m| m.end.is_none()), "instants");
        // Each round does the same work: the line of round r comes r/400 of the way from the
        // line of round 0 to the last one, counted in samples.
        let before =
            |m: &crate::support::FirefoxMarker| times.iter().filter(|&&t| t < m.start).count();
        let (first, last) = (before(&markers[1]), before(&markers[5]));
        assert!(last - first > 500, "{transport}: {} samples", times.len());
        for (k, round) in [(2, 100), (3, 200), (4, 300)] {
            let want = first as f64 + (last - first) as f64 * round as f64 / 400.0;
            let got = before(&markers[k]) as f64;
            assert!(
                (got - want).abs() <= 0.01 * (last - first) as f64 + 2.0,
                "{transport}: round {round} after {got} samples, expected {want:.1}"
            );
        }
        // The printed lines carry the count too.
        assert!(err.contains(" WARN  defmt-app: round 100"), "{err}");
    }
    // Without sampler-rt's timestamp the lines have no place on the timeline: said, not guessed.
    let out = cargo_sample(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "defmt-app",
            "--features",
            "defmt-semihosting",
            "--format",
            "firefox",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("(6 lines) is not on the timeline"), "{err}");
    assert!(err.contains("`defmt-timestamp`"), "{err}");
    let p: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(p["threads"][0]["markers"]["length"], 0);
}

/// An image with an RTT block that sends nothing during `--live` (defmt built at its default
/// level, `error`, where the firmware logs only below it) says that nothing arrived and why it
/// may be; one whose log arrives does not.
#[test]
fn an_rtt_channel_that_stays_silent_during_live_is_named() {
    let args = [
        "--release",
        "--bin",
        "defmt-app",
        "--features",
        "defmt-rtt",
        "--live",
    ];
    let silent = crate::support::cargo_sample_env(&scenarios(), &args, &[("DEFMT_LOG", "error")]);
    let err = String::from_utf8_lossy(&silent.stderr);
    assert!(silent.status.success(), "{err}");
    assert!(
        err.contains("nothing arrived over RTT") && err.contains("DEFMT_LOG"),
        "{err}"
    );
    let heard = cargo_sample(&scenarios(), &args);
    let err = String::from_utf8_lossy(&heard.stderr);
    assert!(heard.status.success(), "{err}");
    assert!(!err.contains("nothing arrived over RTT"), "{err}");
    assert!(run_dir_of(&heard.stderr).join("rtt-0.bin").is_file());
}
