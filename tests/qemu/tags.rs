//! Who was running: samples tagged with the interrupted exception, with the firmware's own tag,
//! and with the Embassy task being polled, each split checked against the exact count of the
//! same run.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::support::*;
use serde_json::Value;

#[test]
fn handlers_by_name_and_a_shared_function_split_between_them() {
    let (r, dir) = profile_in(
        "shared-isr",
        &["--samples", "10000", "--tag", "exception", "--truth"],
    );
    let tags = rows(&r, "tags");
    assert_eq!(tags.keys().collect::<Vec<_>>(), ["IRQ30", "thread mode"]);
    assert_eq!(tags.values().sum::<u64>(), 10_000);
    let exact = exact_first_share(&dir, "shared", 700, 300);
    assert_split(&r, "shared", "thread mode", exact);
    // The handler's own code is only ever sampled inside the handler.
    assert_eq!(split_of(&r, "IRQ30").keys().collect::<Vec<_>>(), ["IRQ30"]);
}

#[test]
fn the_firmwares_own_tags_and_names() {
    let (r, dir) = profile_in(
        "tagged-phases",
        &["--samples", "10000", "--tag", "api", "--truth"],
    );
    let tags = rows(&r, "tags");
    assert!(
        tags.contains_key("phase one") && tags.contains_key("phase two"),
        "{tags:?}"
    );
    let exact = exact_first_share(&dir, "hot_a", 600, 300);
    assert_split(&r, "hot_a", "phase one", exact);
    // hot_b only ever runs in phase two.
    assert_eq!(
        split_of(&r, "hot_b").keys().collect::<Vec<_>>(),
        ["phase two"]
    );
    // Read live (as a probe reads a board): the names come out of the firmware's memory.
    let r = profile(
        "tagged-phases",
        &["--samples", "3000", "--tag", "api", "--live"],
    );
    let tags = rows(&r, "tags");
    assert_eq!(
        tags.keys().collect::<Vec<_>>(),
        ["phase one", "phase two"],
        "{tags:?}"
    );
}

fn embassy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/embassy-tasks")
}

fn embassy_profile(extra: &[&str]) -> (Value, PathBuf) {
    let mut args = vec!["--release", "--format", "json", "--samples", "10000"];
    args.extend_from_slice(extra);
    let out = cargo_sample(&embassy(), &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        serde_json::from_slice(&out.stdout).unwrap(),
        run_dir_of(&out.stderr),
    )
}

#[test]
fn embassy_tasks_split_a_shared_function_as_exactly_as_they_run_it() {
    let (r, dir) = embassy_profile(&["--tag", "api", "--truth"]);
    let tags = rows(&r, "tags");
    let motor = "task embassy_tasks::motor";
    let link = "task embassy_tasks::link";
    assert!(
        tags.contains_key(motor) && tags.contains_key(link),
        "{tags:?}"
    );
    let exact = exact_first_share(&dir, "shared", 600, 300);
    assert_split(&r, "shared", motor, exact);
    assert_eq!(split_of(&r, "other").keys().collect::<Vec<_>>(), [link]);
    // The same word named by its symbol gives the same run.
    let (same, _) = embassy_profile(&["--tag", "symbol:SAMPLER_RT_TAG"]);
    assert_eq!(same["tags"], r["tags"]);
}

#[test]
fn stacks_and_pprof_carry_the_tag() {
    let (r, dir) = profile_in("shared-isr", &["--samples", "3000", "--tag", "exception"]);
    let out = cargo_sample(
        &scenarios(),
        &[
            "report",
            dir.to_str().unwrap(),
            "--format",
            "folded",
            "--by",
            "tag",
        ],
    );
    let folded = String::from_utf8(out.stdout).unwrap();
    let mut roots: BTreeMap<String, u64> = BTreeMap::new();
    for line in folded.lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap();
        *roots
            .entry(stack.split(';').next().unwrap().to_owned())
            .or_default() += n.parse::<u64>().unwrap();
    }
    assert_eq!(roots, rows(&r, "tags"));
    // pprof: a `tag` label on every sample.
    let out = cargo_sample(
        &scenarios(),
        &["report", dir.to_str().unwrap(), "--format", "pprof"],
    );
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(out.stdout.as_slice())
        .read_to_end(&mut raw)
        .unwrap();
    let text = String::from_utf8_lossy(&raw);
    assert!(text.contains("thread mode") && text.contains("IRQ30") && text.contains("tag"));
}

#[test]
fn tags_that_cannot_be_recorded_are_refused_with_the_reason() {
    let err = |dir: &Path, args: &[&str]| {
        let out = cargo_sample(dir, args);
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = err(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "hot-loops",
            "--tag",
            "symbol:pxCurrentTCB",
        ],
    );
    assert!(e.contains("no symbol `pxCurrentTCB`"), "{e}");
    let e = err(
        &scenarios(),
        &[
            "--release",
            "--bin",
            "hot-loops",
            "--tag",
            "exception",
            "--mode",
            "hist",
        ],
    );
    assert!(e.contains("bins have none"), "{e}");
    assert!(!e.contains("Finished"), "{e}");
    let m0 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/microbit-m0");
    let e = err(&m0, &["--release", "--tag", "exception"]);
    assert!(e.contains("ARMv7-M"), "{e}");
    // Refused before anything is built.
    assert!(!e.contains("Finished") && !e.contains("Compiling"), "{e}");
    let e = err(
        &scenarios(),
        &["--release", "--bin", "hot-loops", "--tag", "0x20000001"],
    );
    assert!(e.contains("aligned"), "{e}");
}

/// An RTIC application tagged by exception: each hardware task by its task name with its
/// interrupt (`control (GPIOA, IRQ 0)`, not `GPIOA`), and a dispatcher that two async tasks
/// share split per task by each sample's inline chain, the rest (RTIC's executor, functions
/// the tasks call) a row of its own, the exact count split the same way; with LTO (tasks
/// inlined into their handlers) and without (called).
#[test]
fn rtic_tasks_are_named_and_a_shared_dispatcher_is_split_per_task() {
    let rest = "dispatcher QEI0, IRQ 13: RTIC's executor and functions its tasks call (no one \
                task's code; `--stacks` tells them apart)";
    for profile in [["--release", ""], ["--profile", "nolto"]] {
        let mut args = vec![
            "--bin",
            "tasks",
            "--tag",
            "exception",
            "--samples",
            "2000",
            "--truth",
        ];
        args.extend(profile.iter().filter(|a| !a.is_empty()));
        let (r, _) = profile_example("rtic-app", &args);
        let tags = rows(&r, "tags");
        for name in [
            "control (GPIOA, IRQ 0)",
            "telemetry (GPIOB, IRQ 1)",
            "watchdog (GPIOC, IRQ 2)",
            rest,
            "thread mode",
        ] {
            assert!(
                tags.contains_key(name),
                "{profile:?}: no {name} in {tags:?}"
            );
        }
        assert!(
            !tags
                .keys()
                .any(|t| t.contains("software tasks logger, sensor")),
            "{profile:?}: the dispatcher is not split: {tags:?}"
        );
        assert_eq!(tags.values().sum::<u64>(), 2000, "{profile:?}");
        // Every row of the split against the exact count split the same way.
        for row in r["tags"].as_array().unwrap() {
            let name = row["name"].as_str().unwrap();
            if name.contains("QEI0") {
                let z = row["error_sigma"].as_f64().unwrap();
                assert!(z.abs() <= 3.0, "{profile:?}: {name} {z:+.1} sigma");
            }
        }
    }
}

/// With call stacks, a sample in a function a software task calls (`filter`, `crunch`) is that
/// task's, from its caller frames inside the dispatcher, and the exact count is split by the
/// exact call graph's stacks the same way: each task's row holds what it calls, within 3 sigma
/// of the exact share, and what is left is RTIC's executor alone.
#[test]
fn with_call_stacks_each_task_on_a_shared_dispatcher_gets_what_it_calls() {
    let (r, _) = profile_example(
        "rtic-app",
        &[
            "--bin",
            "tasks",
            "--release",
            "--tag",
            "exception",
            "--samples",
            "2000",
            "--truth",
            "--stacks",
            "32",
        ],
    );
    let row = |name: &str| {
        r["tags"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {:#}", r["tags"]))
            .clone()
    };
    let sensor = row("software task sensor (dispatcher QEI0, IRQ 13)");
    let logger = row("software task logger (dispatcher QEI0, IRQ 13)");
    let rest = row("dispatcher QEI0, IRQ 13: RTIC's executor (no task on the call stack)");
    for t in [&sensor, &logger, &rest] {
        let z = t["error_sigma"].as_f64().unwrap();
        assert!(z.abs() <= 3.0, "{t:#}");
    }
    // `sensor` calls `filter(round, 60)`, `logger` `crunch(round, 20)`: their own shares hold
    // those calls, and the executor's code alone is smaller than either.
    let exact = |t: &Value| t["exact_percent"].as_f64().unwrap();
    assert!(
        exact(&sensor) > exact(&rest) && exact(&logger) > exact(&rest),
        "{sensor:#} {logger:#} {rest:#}"
    );
    let tags = rows(&r, "tags");
    assert_eq!(tags.values().sum::<u64>(), 2000);
}

/// RTIC v1 (`examples/rtic-v1`: cortex-m-rtic 1.1, a SysTick monotonic, software tasks on two
/// dispatchers, a hardware task): its software tasks are plain functions with a free queue,
/// and every task calls the app module's `crc`. Each interrupt is named by the task it runs,
/// in the sampled tags and in the exact run's table, never by a helper the task calls or by
/// RTIC's `monotonics` module (they read `sensor, crc and software tasks monotonics (QEI0, IRQ
/// 13)`), and the shares agree with the exact counts.
#[test]
fn rtic_v1_tasks_are_named_by_what_they_are() {
    let expected = [
        "software task sensor (dispatcher QEI0, IRQ 13)",
        "software task logger (dispatcher SSI0, IRQ 7)",
        "button (GPIOA, IRQ 0)",
        "thread mode",
    ];
    let (r, _) = profile_example(
        "rtic-v1",
        &[
            "--release",
            "--tag",
            "exception",
            "--truth",
            "--samples",
            "3000",
        ],
    );
    let tags = rows(&r, "tags");
    for name in expected {
        assert!(tags.contains_key(name), "no {name} in {tags:?}");
    }
    for row in r["tags"].as_array().unwrap() {
        let s = row["error_sigma"].as_f64().unwrap();
        assert!(s.abs() < 3.0, "{row}");
    }
    let (r, _) = profile_example("rtic-v1", &["--release", "--exact"]);
    let names: Vec<&str> = r["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for name in expected {
        assert!(names.contains(&name), "no {name} in {names:?}");
    }
    assert!(
        names
            .iter()
            .all(|n| !n.contains("crc") && !n.contains("monotonics")),
        "{names:?}"
    );
}

/// Every RTIC task's share by `--tag exception` against an exact count of the instructions
/// each exception ran (QEMU's exec log with its interrupt log: an oracle independent of the
/// per-address plugin), within 3 sigma; an application whose SysTick monotonic owns SysTick,
/// sampled on a free timer, keeps its tasks within 3 sigma too, and the one handler as urgent
/// as the sampler (the monotonic's SysTick, left at priority 0) is named as such: its time is
/// counted in the code it interrupted.
#[test]
fn rtic_tasks_match_the_exact_count_of_each_exception() {
    let (r, _) = profile_example(
        "rtic-app",
        &[
            "--release",
            "--bin",
            "tasks",
            "--tag",
            "exception",
            "--truth",
            "--truth-method",
            "exec-log",
            "--period",
            "2000ticks",
            "--samples",
            "2000",
        ],
    );
    let rows = r["tags"].as_array().unwrap();
    // Three hardware tasks, thread mode, and the shared dispatcher as its two software tasks
    // and RTIC's executor with the functions the tasks call.
    assert_eq!(rows.len(), 7, "{rows:#?}");
    for row in rows {
        let sigma = row["error_sigma"]
            .as_f64()
            .unwrap_or_else(|| panic!("{row}"));
        assert!(sigma.abs() < 3.0, "{row}");
    }

    let (r, _) = profile_example(
        "rtic-app",
        &[
            "--release",
            "--bin",
            "mono",
            "--tag",
            "exception",
            "--truth",
            "--truth-method",
            "exec-log",
        ],
    );
    assert_eq!(r["timer"], "GPTM0 (IRQ 19)");
    for row in r["tags"].as_array().unwrap() {
        let name = row["name"].as_str().unwrap();
        if name == "SysTick" {
            continue;
        }
        let sigma = row["error_sigma"]
            .as_f64()
            .unwrap_or_else(|| panic!("{row}"));
        assert!(sigma.abs() < 3.0, "{row}");
    }
    let unpreemptable: Vec<_> = r["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"] == "unpreemptable")
        .collect();
    assert_eq!(unpreemptable.len(), 1, "{:#?}", r["diagnostics"]);
    let message = unpreemptable[0]["message"].as_str().unwrap();
    assert!(
        message.contains("cannot preempt SysTick at 0x00"),
        "{message}"
    );
}
