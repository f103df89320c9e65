//! Embassy tasks measured by sampler-rt's hooks: each task's polls against what its source
//! implies, the time in them, their wake latencies and the executor's idle time against
//! QEMU's exact count of the same polls (the plugin times them at the firmware's clock reads
//! and finds the task by the pool embassy-executor stored to, not by what the firmware says),
//! the sampled shares against the exact ones, and the blocking poll named with its line.

use std::path::Path;

use crate::support::*;
use serde_json::Value;

fn example_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/embassy-metrics")
}

/// A `pub const NAME: u32 = N;` of the example's source.
fn constant(src: &str, name: &str) -> u64 {
    let line = src
        .lines()
        .find(|l| l.starts_with(&format!("pub const {name}: u32 = ")))
        .unwrap_or_else(|| panic!("no constant {name}"));
    line.rsplit('=')
        .next()
        .unwrap()
        .trim()
        .trim_end_matches(';')
        .replace('_', "")
        .parse()
        .unwrap()
}

fn task<'a>(t: &'a Value, name: &str) -> &'a Value {
    t["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"].as_str().unwrap().ends_with(&format!("::{name}")))
        .unwrap_or_else(|| panic!("no task {name} in {t:#}"))
}

#[test]
fn embassy_tasks_match_their_source_and_the_exact_count_of_the_same_polls() {
    let src = std::fs::read_to_string(example_dir().join("src/main.rs")).unwrap();
    let (r, _) = profile_example("embassy-metrics", &["--release", "--truth"]);
    let t = &r["tasks"];
    // No cycle counter in QEMU: a free CMSDK timer paces the sampler and SysTick times polls.
    assert_eq!(t["clock"], "SysTick", "{t:#}");
    let tick = t["tick"].as_f64().unwrap();
    // Polls as the source implies: a task that yields K times is polled K + 1 times; `logger`
    // waits once per flush and is polled once more to start; `main` runs once.
    let expected = [
        ("crunch", constant(&src, "CRUNCH_ROUNDS") + 1),
        ("chatter", constant(&src, "CHATTER_YIELDS") + 1),
        (
            "logger",
            constant(&src, "READINGS") / constant(&src, "READINGS_PER_FLUSH") + 1,
        ),
        ("__embassy_main", 1),
        // On the interrupt executor: woken after each reading.
        ("urgent", constant(&src, "READINGS") + 1),
    ];
    for (name, polls) in expected {
        let k = task(t, name);
        assert_eq!(k["polls"], polls, "{name}: {k:#}");
        assert_eq!(k["ended"], true, "{name}");
    }
    // Every task against the exact count of its polls: the same polls and wakes, the time in
    // them and the wake latencies good to a clock tick each, the longest to a tick.
    for k in t["tasks"].as_array().unwrap() {
        let e = &k["exact"];
        let name = k["name"].as_str().unwrap();
        assert_eq!(k["polls"], e["polls"], "{name}");
        assert_eq!(k["wakes"], e["wakes"], "{name}");
        let polls = k["polls"].as_f64().unwrap();
        let busy = k["busy"].as_f64().unwrap();
        let exact_busy = e["busy"].as_f64().unwrap();
        assert!(
            (busy - exact_busy).abs() <= polls * tick + 1.0,
            "{name}: {busy} in polls against {exact_busy} exactly"
        );
        let max = k["max_poll"].as_f64().unwrap();
        assert!(
            (max - e["max_poll"].as_f64().unwrap()).abs() <= tick + 1.0,
            "{name}: longest poll {max} against {}",
            e["max_poll"]
        );
        let wakes = k["wakes"].as_f64().unwrap();
        if wakes > 0.0 {
            let latency = k["mean_latency"].as_f64().unwrap() * wakes;
            let exact_latency = e["mean_latency"].as_f64().unwrap() * wakes;
            assert!(
                (latency - exact_latency).abs() <= wakes * tick + 1.0,
                "{name}: latencies {latency} against {exact_latency}"
            );
        }
        // The sampled share against the exact share of the same polls.
        let z = e["error_sigma"].as_f64().unwrap();
        assert!(z.abs() <= 3.0, "{name}: sampled share {z:+.1} sigma off");
    }
    // The executor's idle time against the exact count from each idle hook to the next poll:
    // QEMU answers some SysTick reads around the executor's WFE with a time that is not its
    // instruction count (by 0 to 28 % of the idle time, by the sampling period), which the
    // table says; the run's total agrees to the tick.
    let (idle, exact_idle) = (
        t["idle"].as_f64().unwrap(),
        t["exact_idle"].as_f64().unwrap(),
    );
    let periods = t["idle_periods"].as_f64().unwrap();
    let off = (idle - exact_idle).abs() > periods * tick + 1.0;
    let said = t["notes"].as_array().into_iter().flatten().any(|n| {
        n.as_str()
            .unwrap()
            .contains("idle time by the firmware's clock")
    });
    assert_eq!(off, said, "idle {idle} against {exact_idle} exactly: {t:#}");
    assert!(
        (t["span"].as_f64().unwrap() - t["exact_span"].as_f64().unwrap()).abs() <= tick + 1.0,
        "{t:#}"
    );
    // The executor idles between wakes (in QEMU its loop spins, WFE not waiting, and sampler-rt
    // folds the hooks' events there: the idle periods are the stretches from an idle hook to
    // the next poll start).
    assert!(t["idle_percent"].as_f64().unwrap() > 2.0, "{t:#}");
    // Each executor's idle time, kept apart by the firmware, against QEMU's exact count of
    // the context it idles in (told apart by the plugin from the exceptions it follows, not
    // from anything the firmware says). The interrupt executor's WFE-free periods agree to
    // the tick; it idles whenever its interrupt is not running.
    let executors = t["executors"].as_array().expect("both executors");
    assert_eq!(executors.len(), 2, "{t:#}");
    assert_eq!(executors[0]["context"], "thread mode");
    assert_eq!(executors[0]["idle"], t["idle"]);
    let high = &executors[1];
    assert!(
        high["context"].as_str().unwrap().contains("IRQ 7"),
        "{high:#}"
    );
    let (idle, exact_idle) = (
        high["idle"].as_f64().unwrap(),
        high["exact_idle"].as_f64().unwrap(),
    );
    assert!(
        (idle - exact_idle).abs() <= high["idle_periods"].as_f64().unwrap() * tick + 1.0,
        "the interrupt executor idle {idle} against {exact_idle} exactly: {high:#}"
    );
    // `urgent`'s polls preempt `sensor`'s (the wake pends the interrupt executor's interrupt
    // inside `sensor`'s poll): a poll's time leaves out the polls nested in it, so a `sensor`
    // poll holds its own `filter` call and the hooks around the preemption (about 500
    // instructions), not `urgent`'s poll too (about 1 000; 2 100 a poll when they were in).
    let exact_instructions = r["exact_instructions"].as_f64().unwrap();
    let filter = r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "filter")
        .unwrap();
    let filter_per_poll = filter["exact_percent"].as_f64().unwrap() / 100.0 * exact_instructions
        / constant(&src, "READINGS") as f64;
    let (sensor, urgent) = (task(t, "sensor"), task(t, "urgent"));
    assert!(
        sensor["mean_poll"].as_f64().unwrap()
            < filter_per_poll + urgent["mean_poll"].as_f64().unwrap(),
        "sensor's polls hold urgent's: {sensor:#} {urgent:#} (filter {filter_per_poll:.0} a call)"
    );
    // Its periods: one after each of its runs but the last (its first poll follows no idle).
    assert_eq!(high["idle_periods"], constant(&src, "READINGS"), "{high:#}");
    let busy_urgent = task(t, "urgent")["busy_percent"].as_f64().unwrap();
    let share = high["idle_percent"].as_f64().unwrap() + busy_urgent;
    assert!(share > 98.0 && share <= 100.0, "{high:#}");
    // `logger` blocks in its poll, and only it: named with the line its samples are at.
    let line = src
        .lines()
        .position(|l| l.contains("while core::hint::black_box(busy)"))
        .unwrap()
        + 1;
    let long: Vec<&str> = r["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"] == "long-poll")
        .map(|d| d["message"].as_str().unwrap())
        .collect();
    assert_eq!(long.len(), 1, "{long:#?}");
    // The run ends inside TIMER1's handler, as urgent as the sampler: its time is the held-off
    // row, and the sampler's own dump sent from there is no part of it (it once made the row
    // read 0.5 % sampled against 6.2 % exact, and a warning blame the sampling).
    let disagreements: Vec<&Value> = r["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"] == "disagrees-with-exact")
        .collect();
    assert!(disagreements.is_empty(), "{disagreements:#?}");
    // sampler-rt masks interrupts around each event it appends or folds: the samples that wait
    // land in the same function, and no warning blames a masked region for them.
    let masked: Vec<&Value> = r["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| {
            d["kind"] == "masked-skid" && d["message"].as_str().unwrap().contains("sampler_rt")
        })
        .collect();
    assert!(masked.is_empty(), "{masked:#?}");
    // The hooks run in the application's time, the append they share and the fold of their
    // events too: counted by the exact count like the hooks themselves (left out as the
    // sampler's own, every other row's sampled share read low against an exact share of a
    // smaller whole).
    let clock = r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "sampler_rt_task_event")
        .expect("the hooks' append is sampled");
    assert!(
        clock["exact_percent"].as_f64().is_some_and(|x| x > 0.0),
        "{clock:#}"
    );
    if let Some(held) = r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "[held off: TIMER1]")
    {
        assert!(held["exact_percent"].as_f64().unwrap() < 1.0, "{held:#}");
    }
    assert!(
        long[0].contains("task `embassy_metrics::logger`")
            && long[0].contains(&format!("`flush_blocking` at src/main.rs:{line}")),
        "{}",
        long[0]
    );
}

#[test]
fn embassy_polls_on_a_sampler_paced_by_systick_are_counted_and_said_to_be_untimed() {
    let (r, _) = profile_example("embassy-metrics", &["--release", "--timer", "systick"]);
    let t = &r["tasks"];
    assert_eq!(t["clock"], "none", "{t:#}");
    let src = std::fs::read_to_string(example_dir().join("src/main.rs")).unwrap();
    let chatter = task(t, "chatter");
    assert_eq!(chatter["polls"], constant(&src, "CHATTER_YIELDS") + 1);
    assert!(chatter.get("busy").is_none(), "{chatter:#}");
    assert!(
        t["notes"][0]
            .as_str()
            .unwrap()
            .contains("counted, not timed"),
        "{t:#}"
    );
    // The task each sample carried, by default for an image that keeps task statistics.
    for k in t["tasks"].as_array().unwrap() {
        assert!(k["sampled_percent"].is_f64(), "{k:#}");
    }
    assert!(task(t, "logger")["samples"].as_u64().unwrap() > 0, "{t:#}");
}

#[test]
fn the_samplers_own_streaming_inside_a_poll_is_left_out_of_it() {
    // Sampled often enough that the ring streams its chunks from the sampler's interrupt, in
    // whatever poll it lands (hundreds of thousands of instructions each, far over the limit).
    let (r, _) = profile_example(
        "embassy-metrics",
        &["--release", "--truth", "--period", "300"],
    );
    let t = &r["tasks"];
    let tick = t["tick"].as_f64().unwrap();
    assert!(t["sampler"].as_f64().unwrap() > 100_000.0, "{t:#}");
    for k in t["tasks"].as_array().unwrap() {
        let e = &k["exact"];
        let slack = k["polls"].as_f64().unwrap() * tick + 1.0;
        assert!(
            (k["busy"].as_f64().unwrap() - e["busy"].as_f64().unwrap()).abs() <= slack,
            "{k:#}"
        );
    }
    let long: Vec<&str> = r["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"] == "long-poll")
        .map(|d| d["message"].as_str().unwrap())
        .collect();
    assert_eq!(long.len(), 1, "{long:#?}");
    assert!(long[0].contains("embassy_metrics::logger"), "{}", long[0]);
}

#[test]
fn the_task_table_comes_back_over_the_probe() {
    // probe-rs against a QEMU core: the host reads the table out of the firmware's memory at
    // the end, as it reads the ring (QEMU's core has no CYCCNT and the sampler takes SysTick:
    // the polls are counted).
    let src = std::fs::read_to_string(example_dir().join("src/main.rs")).unwrap();
    let out = cargo_sample(
        &example_dir(),
        &[
            "--release",
            "--chip",
            "mps2-an385",
            "--probe",
            "qemu",
            "--format",
            "json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &r["tasks"];
    assert_eq!(
        task(t, "chatter")["polls"],
        constant(&src, "CHATTER_YIELDS") + 1,
        "{t:#}"
    );
    assert_eq!(
        task(t, "crunch")["polls"],
        constant(&src, "CRUNCH_ROUNDS") + 1,
        "{t:#}"
    );
    assert!(task(t, "logger")["sampled_percent"].as_f64().unwrap() > 10.0);
}

#[test]
fn a_live_run_reads_the_same_table_out_of_memory_as_the_dump_carries() {
    let (dumped, _) = profile_example("embassy-metrics", &["--release"]);
    let (live, _) = profile_example("embassy-metrics", &["--release", "--live"]);
    assert_eq!(live["tasks"], dumped["tasks"]);
    assert_eq!(live["tasks"]["clock"], "SysTick");
}

#[test]
fn each_traced_poll_is_a_marker_on_its_tasks_thread_in_the_firefox_profile() {
    let (r, dir) = profile_example("embassy-metrics", &["--release"]);
    let out = cargo_sample(
        &example_dir(),
        &["report", dir.to_str().unwrap(), "--format", "firefox"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let profile: Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &r["tasks"];
    let tick = t["tick"].as_f64().unwrap();
    let mut polls = 0;
    for thread in profile["threads"].as_array().unwrap() {
        let (markers, _) = firefox_markers(thread);
        let name = thread["name"].as_str().unwrap();
        for m in markers.iter().filter(|m| m.data["type"] == "Poll") {
            polls += 1;
            // On the thread of its task, as long as the task's polls can be.
            assert_eq!(format!("task {}", m.name), name);
            let k = task(t, m.name.rsplit("::").next().unwrap());
            let units = m.data["units"].as_f64().unwrap();
            assert!(
                units <= k["max_poll"].as_f64().unwrap() + tick + 1.0 && m.end.unwrap() > m.start,
                "{m:?}"
            );
        }
    }
    // The newest 256 polls (sampler-rt's SAMPLER_RT_TASK_TRACE), and logger's blocking one.
    let total: u64 = t["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["polls"].as_u64().unwrap())
        .sum();
    assert_eq!(polls, total.min(256), "{t:#}");
    let longest = profile["threads"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|th| firefox_markers(th).0)
        .filter(|m| m.data["type"] == "Poll")
        .map(|m| m.data["units"].as_f64().unwrap())
        .fold(0.0, f64::max);
    let logger_max = task(t, "logger")["max_poll"].as_f64().unwrap();
    assert!(
        (longest - logger_max).abs() <= 1.0,
        "{longest} against {logger_max}"
    );
}

#[test]
fn a_ring_too_small_for_the_events_between_folds_loses_them_says_so_and_counts_no_garbage() {
    // Four events held (`SAMPLER_RT_TASK_EVENTS`, the smallest): a poll with another
    // executor's poll nested in it overruns them before the executor idles. A build of its
    // own, in a target directory of its own, so the other tests' builds stay as they are.
    let target = example_dir().join("target/events-4");
    let out = cargo_sample_env(
        &example_dir(),
        &["--release", "--truth", "--format", "json"],
        &[
            ("SAMPLER_RT_TASK_EVENTS", "4"),
            ("CARGO_TARGET_DIR", target.to_str().unwrap()),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &r["tasks"];
    let lost = t["lost_events"].as_u64().unwrap();
    assert!(lost > 0, "{t:#}");
    let notes: Vec<&str> = t["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes.iter().any(
            |n| n.starts_with(&format!("{lost} hook events were overwritten"))
                && n.contains("SAMPLER_RT_TASK_EVENTS")
        ),
        "{notes:#?}"
    );
    // Nor is the gap blamed on QEMU's clock.
    assert!(
        !notes
            .iter()
            .any(|n| n.contains("idle time by the firmware's clock")),
        "{notes:#?}"
    );
    // What is kept is part of what ran: never more polls, wakes or time than the exact count
    // of each task, and no poll or latency longer than the longest there was (a poll whose
    // beginning was lost is not counted from a stale one).
    let tick = t["tick"].as_f64().unwrap();
    let mut fewer = 0;
    for k in t["tasks"].as_array().unwrap() {
        let (e, name) = (&k["exact"], k["name"].as_str().unwrap());
        let polls = k["polls"].as_u64().unwrap();
        assert!(polls <= e["polls"].as_u64().unwrap(), "{name}: {k:#}");
        assert!(
            k["wakes"].as_u64().unwrap() <= e["wakes"].as_u64().unwrap(),
            "{name}"
        );
        if polls < e["polls"].as_u64().unwrap() {
            fewer += 1;
        }
        if polls > 0 {
            let busy = k["busy"].as_f64().unwrap();
            assert!(
                busy <= e["busy"].as_f64().unwrap() + polls as f64 * tick + 1.0,
                "{name}: {k:#}"
            );
            assert!(
                k["max_poll"].as_f64().unwrap() <= e["max_poll"].as_f64().unwrap() + tick + 1.0,
                "{name}: {k:#}"
            );
        }
        if let Some(l) = k["max_latency"].as_f64() {
            let most = e["max_latency"].as_f64().unwrap();
            assert!(l <= most + tick + 1.0, "{name}: latency {l} against {most}");
        }
    }
    assert!(fewer > 0, "{t:#}");
}

#[test]
fn every_embassy_hook_costs_at_most_20_instructions_a_call_on_cortex_m3() {
    // The goal the hooks are built to: each one's instructions a call, exact in QEMU (its own,
    // and the append it ends in), over the example's calls. Their rare paths (a nested poll's
    // tag, the fold at an idle hook, the first spawn's clock) are functions of their own.
    let (_, run) = profile_example("embassy-metrics", &["--release", "--truth"]);
    let (append, appends) = crate::bench::per_call(&run, "sampler_rt_task_event");
    let (note, _) = crate::bench::per_call(&run, "sampler_rt_task_note");
    assert!(appends > 1000, "{appends} appends");
    let mut table = String::new();
    let mut over = Vec::new();
    for (hook, tail) in [
        ("_embassy_trace_task_exec_begin", append),
        ("_embassy_trace_task_exec_end", append),
        ("_embassy_trace_task_ready_begin", append),
        ("_embassy_trace_executor_idle", append),
        ("_embassy_trace_poll_start", append),
        ("_embassy_trace_task_new", note),
        ("_embassy_trace_task_end", note),
    ] {
        let (own, calls) = crate::bench::per_call(&run, hook);
        let cost = own + tail;
        table += &format!("{hook}: {cost:.2} instructions a call over {calls} calls\n");
        if cost > 20.0 + 1e-9 {
            over.push(hook);
        }
    }
    assert!(over.is_empty(), "over 20 instructions: {over:?}\n{table}");
}
