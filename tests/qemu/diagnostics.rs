//! The diagnostics on real runs: each one provoked by the scenario built to provoke it, and
//! silent on runs that give it no cause.

use crate::support::*;
use serde_json::Value;

fn diagnostics(r: &Value) -> Vec<Value> {
    r["diagnostics"].as_array().unwrap().clone()
}

fn of_kind(r: &Value, kind: &str) -> Vec<Value> {
    diagnostics(r)
        .into_iter()
        .filter(|d| d["kind"] == kind)
        .collect()
}

fn exact_of(r: &Value, name: &str) -> f64 {
    r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["name"] == name)
        .and_then(|row| row["exact_percent"].as_f64())
        .unwrap_or(0.0)
}

#[test]
fn clean_runs_raise_no_diagnostic() {
    for (bin, args) in [
        ("hot-loops", vec!["--samples", "10000"]),
        ("foreign-isr", vec!["--samples", "5000"]),
        ("ticked-loop", vec!["--samples", "5000"]),
    ] {
        let r = profile(bin, &args);
        assert_eq!(diagnostics(&r), Vec::<Value>::new(), "{bin}");
        assert_eq!(r["warnings"], serde_json::json!([]), "{bin}");
    }
}

#[test]
fn lockstep_is_named_when_samples_repeat_or_depend_on_each_other() {
    // A constant period equal to the loop's tick: the same few points over and over.
    let r = profile(
        "ticked-loop",
        &["--samples", "3000", "--period", "16000ticks", "--no-jitter"],
    );
    let d = of_kind(&r, "lockstep");
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0]["message"].as_str().unwrap().contains("repeat every"));
    assert!(d[0]["message"].as_str().unwrap().contains("--no-jitter"));
    // A random span of 256 ticks is far too narrow for a 10 000-instruction loop: the samples
    // do not repeat exactly, but each one nearly fixes the next.
    let r = profile(
        "ticked-loop",
        &[
            "--samples",
            "3000",
            "--period",
            "16000ticks",
            "--jitter",
            "256",
        ],
    );
    let d = of_kind(&r, "lockstep");
    assert_eq!(d.len(), 1, "{:?}", diagnostics(&r));
    assert!(d[0]["message"].as_str().unwrap().contains("correlated"));
    // No pile-up is claimed on samples that are not independent.
    assert!(of_kind(&r, "held-off").is_empty());
}

#[test]
fn masked_interrupts_are_flagged_and_the_masked_region_named() {
    let r = profile("irq-masked", &["--samples", "5000", "--truth"]);
    let d = of_kind(&r, "masked-skid");
    assert_eq!(d.len(), 1, "{:?}", diagnostics(&r));
    let msg = d[0]["message"].as_str().unwrap();
    assert!(msg.contains("cpsie i") && msg.contains("irq_on"), "{msg}");
    assert!(msg.contains("caller locked"), "{msg}");
    // The share it names is the masked time, exactly as much as the region takes.
    let masked = exact_of(&r, "locked") + exact_of(&r, "irq_off") + exact_of(&r, "irq_on");
    let p = d[0]["percent"].as_f64().unwrap();
    let s = sigma_points(masked, 5000.0);
    assert!(
        (p - masked).abs() < 3.0 * s,
        "flagged {p} %, masked {masked} %"
    );
    // With the exact count beside it, the disagreement is stated too; nothing else is.
    let kinds: Vec<Value> = diagnostics(&r).iter().map(|d| d["kind"].clone()).collect();
    assert_eq!(kinds, ["masked-skid", "disagrees-with-exact"], "{kinds:?}");
    // The warning sends the user to the exact count for the region's real time, and the
    // disagreement points back to it rather than to settings that cannot help.
    assert!(msg.contains("--truth") && msg.contains("--exact"), "{msg}");
    let dis = of_kind(&r, "disagrees-with-exact");
    let dis = dis[0]["message"].as_str().unwrap();
    assert!(dis.contains("masked-skid warning explains it"), "{dis}");
    assert!(
        !dis.contains("--jitter") && !dis.contains("--priority"),
        "{dis}"
    );
}

/// A handler more urgent than the sampler (`--priority 0x40`): its time is the held-off row,
/// within 3 sigma of the handler's exact share (what it ran, `isr_work` included), the pile it
/// used to leave after the store that pends it gone. Without the lateness check
/// (`CARGO_SAMPLE_LATE_TICKS=0`) the pile is there, and the `held-off` finding names it.
#[test]
fn a_handler_the_sampler_cannot_preempt_is_its_own_row_or_flagged_after_the_store_that_pends_it() {
    let args = ["--samples", "5000", "--priority", "0x40", "--truth"];
    let r = profile("foreign-isr", &args);
    let row = r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"].as_str().unwrap().starts_with("[held off: IRQ31"))
        .unwrap_or_else(|| panic!("{:#?}", r["functions"]));
    let hidden = row["exact_percent"].as_f64().unwrap();
    assert!(hidden > 20.0, "{row}");
    assert!(row["error_sigma"].as_f64().unwrap().abs() < 3.0, "{row}");
    assert!(of_kind(&r, "held-off").is_empty(), "{:?}", diagnostics(&r));
    assert!(share(&r, "functions", "isr_work") < 0.5);

    let mut all = vec!["--release", "--bin", "foreign-isr", "--format", "json"];
    all.extend_from_slice(&args);
    let out = cargo_sample_env(&scenarios(), &all, &[("CARGO_SAMPLE_LATE_TICKS", "0")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = of_kind(&r, "held-off");
    assert_eq!(d.len(), 1, "{:?}", diagnostics(&r));
    let msg = d[0]["message"].as_str().unwrap();
    assert!(msg.contains("after a store"), "{msg}");
    assert!(msg.contains("IRQ31"), "{msg}");
    assert!(msg.contains("--priority"), "{msg}");
    // The pile holds the handler's time, which the exact count, where no sample is told held
    // off, counts where the handler returned (as the samples are): isr_work's and IRQ31's.
    let landed = &r["unseen"]["hidden"][0];
    assert!(
        landed["name"].as_str().unwrap().contains("IRQ31"),
        "{landed}"
    );
    assert_eq!(landed["landed"], true, "{landed}");
    let hidden = 100.0 * landed["instructions"].as_f64().unwrap()
        / r["exact_instructions"].as_f64().unwrap();
    assert!(
        exact_of(&r, "isr_work") < 0.01,
        "isr_work's time is counted where it returned"
    );
    let p = d[0]["percent"].as_f64().unwrap();
    assert!(
        (p - hidden).abs() < 3.0 * sigma_points(hidden, 5000.0) + 0.5,
        "flagged {p} %, handler {hidden} %"
    );
}

#[test]
fn samples_that_find_the_core_asleep_are_called_idle_time() {
    let r = profile("sleepy", &["--samples", "5000", "--annotate", "3"]);
    let d = of_kind(&r, "asleep");
    assert_eq!(d.len(), 1, "{:?}", diagnostics(&r));
    assert_eq!(d[0]["severity"], "note");
    assert!(d[0]["message"].as_str().unwrap().contains("wfi"));
    // Most of this firmware's time is sleep, and every such sample is on one address.
    let p = d[0]["percent"].as_f64().unwrap();
    assert!(p > 40.0, "{p}");
    let addr = d[0]["addresses"][0].as_u64().unwrap();
    let insns: Vec<&Value> = r["annotate"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["instructions"].as_array().unwrap())
        .collect();
    let at = insns
        .iter()
        .position(|i| i["addr"] == addr)
        .expect("annotated");
    assert_eq!(insns[at]["percent"].as_f64().unwrap(), p);
    assert!(insns[at - 1]["text"].as_str().unwrap().starts_with("wfi"));
}

/// Against the exact count, a firmware that sleeps spans more time than it has instructions
/// for: that is said as sleep, with how much, not as a wrong clock or as lockstep (samples on
/// the one address where the core wakes), and the disagreement with the exact count names it.
#[test]
fn with_the_exact_count_a_sleeping_core_is_said_to_sleep_not_to_have_a_wrong_clock() {
    let r = profile("sleepy", &["--samples", "3000", "--truth"]);
    let k = kinds(&r);
    assert!(!k.contains(&"clock-mismatch".to_owned()), "{k:?}");
    assert!(!k.contains(&"lockstep".to_owned()), "{k:?}");
    let slept: Vec<Value> = of_kind(&r, "asleep")
        .into_iter()
        .filter(|d| d["message"].as_str().unwrap().starts_with("the core slept"))
        .collect();
    assert_eq!(slept.len(), 1, "{:#?}", diagnostics(&r));
    // As much as the run's time the instructions do not fill.
    let exact = r["exact_instructions"].as_f64().unwrap();
    let span = r["duration_units"].as_f64().unwrap();
    let p = slept[0]["percent"].as_f64().unwrap();
    assert!((p - 100.0 * (1.0 - exact / span)).abs() < 0.01, "{p}");
    // `sleepy` runs its work on every wake, the sampler's too: at this period far more samples
    // find it asleep (72 %) than the time it sleeps (43 %), which the note says; at a period
    // ten times as long both are 67 % and it says nothing of it.
    let woken = "wakes on the sampler's interrupt too";
    assert!(
        slept[0]["message"].as_str().unwrap().contains(woken),
        "{:#}",
        slept[0]
    );
    let r = profile(
        "sleepy",
        &["--samples", "1000", "--period", "100000", "--truth"],
    );
    let slept: Vec<Value> = of_kind(&r, "asleep")
        .into_iter()
        .filter(|d| d["message"].as_str().unwrap().starts_with("the core slept"))
        .collect();
    assert_eq!(slept.len(), 1, "{:#?}", diagnostics(&r));
    assert!(
        !slept[0]["message"].as_str().unwrap().contains(woken),
        "{:#}",
        slept[0]
    );
    for d in of_kind(&r, "disagrees-with-exact") {
        assert!(
            d["message"]
                .as_str()
                .unwrap()
                .contains("The note on sleep explains it"),
            "{d:#}"
        );
    }
}

#[test]
fn code_outside_the_image_is_flagged_with_its_exact_share() {
    let r = profile("foreign-code", &["--samples", "5000", "--truth"]);
    let d = of_kind(&r, "outside-image");
    assert_eq!(d.len(), 1, "{:?}", diagnostics(&r));
    let p = d[0]["percent"].as_f64().unwrap();
    let exact = exact_of(&r, "[outside the image's functions]");
    assert!(
        exact > 20.0,
        "the copy in RAM runs {exact} % of the instructions"
    );
    assert!(
        (p - exact).abs() < 3.0 * sigma_points(exact, 5000.0),
        "{p} vs {exact}"
    );
}

#[test]
fn too_few_samples_say_how_many_would_do() {
    let r = profile("hot-loops", &["--samples", "30"]);
    assert_eq!(of_kind(&r, "few-samples").len(), 1);
    let d = of_kind(&r, "indistinct");
    assert!(!d.is_empty(), "{:?}", diagnostics(&r));
    let msg = d[0]["message"].as_str().unwrap();
    assert!(
        msg.contains("cannot be told apart with 30 samples"),
        "{msg}"
    );
    assert!(msg.contains("samples would"), "{msg}");
}

#[test]
fn a_profile_that_disagrees_with_its_exact_count_says_so() {
    // 64 ticks of span keep every sample inside `control`: one function, no repetition, and
    // nothing in the samples alone to tell; the exact count of the same run does.
    let r = profile(
        "ticked-loop",
        &[
            "--samples",
            "3000",
            "--period",
            "16000ticks",
            "--jitter",
            "64",
            "--truth",
        ],
    );
    let d = of_kind(&r, "disagrees-with-exact");
    assert_eq!(d.len(), 1, "{:?}", diagnostics(&r));
    let msg = d[0]["message"].as_str().unwrap();
    // The loop's phases the samples keep hitting, and one they never see.
    assert!(msg.contains("control"), "{msg}");
    assert!(msg.contains("wait_tick") || msg.contains("filter"), "{msg}");
    // A sound run with the truth column stays silent.
    let r = profile("hot-loops", &["--samples", "10000", "--truth"]);
    assert_eq!(diagnostics(&r), Vec::<Value>::new());
}

/// An RTIC application sampled at a priority that its `lock`s mask (0xc0, the ceiling of a
/// resource `control` shares with `telemetry`): the pile after BASEPRI is restored is named
/// as the end of a `lock` in the task, with what fixes it (priority 0), and the held-off
/// warning names the tasks behind the handlers. At the default priority no lock holds the
/// sampler back.
#[test]
fn an_rtic_lock_that_masks_the_sampler_is_named_with_its_task() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/rtic-app");
    let run = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec![
            "--release",
            "--bin",
            "tasks",
            "--samples",
            "2000",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let out = cargo_sample(&dir, &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let r = run(&["--priority", "0xc0"]);
    let messages: Vec<String> = r["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["message"].as_str().unwrap().to_owned())
        .collect();
    let lock = messages
        .iter()
        .find(|m| m.contains("the end of a `lock` in RTIC's task `control` (GPIOA)"))
        .unwrap_or_else(|| panic!("{messages:#?}"));
    assert!(lock.contains("no BASEPRI section holds it back"), "{lock}");
    // The handlers that can hold the sampler off (those as urgent as 0xc0, from the
    // priorities the firmware sent), not every handler of the image, are named: as the
    // held-off row where the sampler reads its timer's count (SysTick), else in the piles
    // after the stores that pend them.
    let row = messages.iter().find(|m| m.contains("are the `[held off: "));
    let held: Vec<&String> = messages
        .iter()
        .filter(|m| m.contains("pile up on"))
        .collect();
    match (row, r["timer"].as_str()) {
        (Some(m), Some("SysTick")) => {
            assert!(m.contains("[held off: telemetry (GPIOB)"), "{m}");
            assert!(!m.contains("control (GPIOA)"), "{m}");
        }
        _ => {
            assert!(!held.is_empty(), "{messages:#?}");
            for m in held {
                assert!(
                    m.contains("as urgent as the sampler in this run: telemetry (GPIOB) at 0xc0"),
                    "{m}"
                );
                assert!(!m.contains("control (GPIOA)"), "{m}");
            }
        }
    }
    let r = run(&[]);
    let messages = r["diagnostics"].to_string();
    assert!(!messages.contains("restores BASEPRI"), "{messages}");
}
