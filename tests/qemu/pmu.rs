//! ARMv8-A in real QEMU (`qemu-system-aarch64 -M virt -cpu cortex-a53`, the `aarch64-pmu`
//! example): `cargo sample events` and `cargo sample stat` at EL1, EL2 and EL3, and PC sampling
//! by the generic timer against exact instruction counts.
//! The known loop is `mov` and 1000 × (`subs`, `b.ne`): exactly 2001 instructions, and with
//! `-icount shift=0` QEMU's cycle counter ticks once per instruction.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{
    assert_split, assert_within_3_sigma, exact_first_share, kinds, rows, run_dir_of,
};
use serde_json::Value;

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/aarch64-pmu")
}

fn cargo_sample(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cargo-sample"))
        .arg("sample")
        .args(args)
        .current_dir(example())
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// Run, expect success, and parse the JSON it prints (the arguments ask for JSON).
fn json(args: &[&str]) -> Value {
    let out = cargo_sample(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn stat(extra: &[&str]) -> Value {
    let mut args = vec![
        "stat",
        "--release",
        "--bin",
        "aarch64-pmu",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    json(&args)
}

fn count<'a>(s: &'a Value, region: &str, event: &str) -> &'a Value {
    let r = s["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == region)
        .unwrap_or_else(|| panic!("no region {region}"));
    r["counts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["event"] == event)
        .unwrap_or_else(|| panic!("no {event} in {region}"))
}

fn per_call(s: &Value, region: &str, event: &str) -> f64 {
    count(s, region, event)["per_call"].as_f64().unwrap()
}

#[test]
fn the_event_list_comes_from_arms_data_and_can_be_searched() {
    let out = cargo_sample(&["events", "--cpu", "cortex-a53", "--format", "json"]);
    assert!(out.status.success());
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), 59);
    assert!(
        all.iter()
            .any(|e| e["code"] == 8 && e["name"] == "INST_RETIRED")
    );
    // Entries without a name keep their number and description.
    let nameless = all.iter().find(|e| e["code"] == 0xC0).unwrap();
    assert_eq!(nameless["name"], "");
    assert_eq!(nameless["description"], "External memory request");
    let out = cargo_sample(&["events", "--cpu", "cortex-a53", "l1d"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("L1D_CACHE_REFILL") && text.contains("L1D_TLB_REFILL"));
    assert!(!text.contains("INST_RETIRED"));
    let out = cargo_sample(&["events", "--cpu", "cortex-z9"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("shipped (all of Arm's data)")
            && err.contains("neoverse-n1")
            && err.contains("--pmu-data"),
        "{err}"
    );
    let out = cargo_sample(&["events", "--list", "--format", "json"]);
    let cpus: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(cpus.as_array().unwrap().len() >= 50, "{cpus}");
    let out = cargo_sample(&["events", "--cpu", "cortex-a72", "l1d_cache_refill"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("L1D_CACHE_REFILL_RD") && text.contains("0x0042"),
        "{text}"
    );
}

#[test]
fn a_file_of_arms_data_names_the_events_of_any_cpu() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/pmu-data.json");
    let data = data.to_str().unwrap();
    let out = cargo_sample(&["events", "--pmu-data", data, "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    let codes: Vec<u64> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["code"].as_u64().unwrap())
        .collect();
    assert_eq!(codes, vec![0, 3, 8, 17, 192]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 event without a code left out"));
    // Its two counters split four events into two runs in QEMU, and the names come from it.
    let s = stat(&[
        "--pmu-data",
        data,
        "--events",
        "inst_retired,sw_incr,l1d_cache_refill,cpu_cycles",
    ]);
    assert_eq!(s["cpu"], "Cortex-Example");
    assert_eq!(s["groups"].as_array().unwrap().len(), 2);
    let lap = per_call(&s, "loop 1000", "INST_RETIRED") - per_call(&s, "empty", "INST_RETIRED");
    assert_eq!(lap, 2001.0);
    assert_eq!(per_call(&s, "sw_incr 10", "SW_INCR"), 10.0);
    assert!(count(&s, "loop 1000", "L1D_CACHE_REFILL")["delta"].is_null());
    let out = cargo_sample(&["events", "--pmu-data", "/nonexistent/cortex.json"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/cortex.json"));
}

#[test]
fn cores_count_with_their_own_tables_on_qemus_model_or_its_max_cpu() {
    // The A57, A72 and A76 are QEMU models; the X4 is not, and counts on QEMU's `max` CPU
    // with its own table's names.
    for cpu in ["cortex-a57", "cortex-a72", "cortex-a76", "cortex-x4"] {
        let s = stat(&[
            "--cpu",
            cpu,
            "--events",
            "inst_retired,cpu_cycles,l1d_cache_refill",
        ]);
        assert_eq!(s["cpu"], cpu);
        for event in ["INST_RETIRED", "CPU_CYCLES"] {
            let lap = per_call(&s, "loop 1000", event) - per_call(&s, "empty", event);
            assert_eq!(lap, 2001.0, "{cpu} {event}");
        }
        // QEMU implements no cache events: not counted, never 0.
        let refill = count(&s, "loop 1000", "L1D_CACHE_REFILL");
        assert!(refill["delta"].is_null(), "{cpu}: {refill}");
    }
}

#[test]
fn instructions_cycles_and_software_increments_count_exactly_at_el1_el2_and_el3() {
    for (machine, el) in [
        ("virt", 1),
        ("virt,virtualization=on", 2),
        ("virt,secure=on", 3),
    ] {
        let s = stat(&[
            "--machine",
            machine,
            "--events",
            "inst_retired,cpu_cycles,sw_incr",
        ]);
        assert_eq!(s["exception_level"], el, "{machine}");
        assert_eq!(s["groups"].as_array().unwrap().len(), 1);
        for event in ["INST_RETIRED", "CPU_CYCLES"] {
            // The empty region is the reading's own cost; the loop adds exactly its 2001.
            let lap = per_call(&s, "loop 1000", event) - per_call(&s, "empty", event);
            assert_eq!(lap, 2001.0, "{machine} {event}");
        }
        assert_eq!(per_call(&s, "sw_incr 10", "SW_INCR"), 10.0, "{machine}");
        assert_eq!(per_call(&s, "loop 1000", "SW_INCR"), 0.0);
        let loop_calls = s["regions"][1]["calls"].as_u64().unwrap();
        assert_eq!(loop_calls, 4);
    }
}

#[test]
fn more_events_than_counters_run_in_groups_and_merge() {
    let events = "inst_retired,cpu_cycles,sw_incr,l1d_cache_refill,l1d_cache,l1i_cache,l1i_cache_refill,l2d_cache,br_pred";
    let s = stat(&["--events", events]);
    // Eight event counters wanted (cycles have their own), six on a Cortex-A53: two runs.
    let groups = s["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0].as_array().unwrap().len(), 6);
    assert_eq!(groups[1].as_array().unwrap().len(), 2);
    // Every event once per region, in the order asked; with six counters read the reading
    // costs more, and the loop is still exactly 2001 instructions beyond the empty region.
    for region in ["empty", "loop 1000", "sw_incr 10"] {
        let names: Vec<&str> = s["regions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == region)
            .unwrap()["counts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["event"].as_str().unwrap())
            .collect();
        assert_eq!(names.len(), 9);
        assert_eq!(names[0], "INST_RETIRED");
    }
    let lap = per_call(&s, "loop 1000", "INST_RETIRED") - per_call(&s, "empty", "INST_RETIRED");
    assert_eq!(lap, 2001.0);
    assert_eq!(per_call(&s, "sw_incr 10", "SW_INCR"), 10.0);
    // QEMU counts no cache or branch event: "not counted", never 0.
    let refill = count(&s, "sum 4096 words", "L1D_CACHE_REFILL");
    assert!(refill["delta"].is_null());
    assert!(refill["note"].as_str().unwrap().contains("not counted"));
    assert_eq!(count(&s, "sum 4096 words", "L2D_CACHE")["group"], 2);
    // Metrics: IPC from two counted events, miss ratios refused.
    let metrics = s["regions"][1]["metrics"].as_array().unwrap();
    let ipc = metrics.iter().find(|m| m["name"] == "IPC").unwrap();
    let v = ipc["value"].as_f64().unwrap();
    assert!((v - 1.0).abs() < 0.01, "{v}");
    assert_eq!(ipc["formula"], "INST_RETIRED / CPU_CYCLES");
    let l1d = metrics
        .iter()
        .find(|m| m["name"] == "L1D miss ratio")
        .unwrap();
    assert!(l1d["value"].is_null());
}

#[test]
fn a_group_larger_than_the_counters_is_refused_by_the_firmware() {
    let out = cargo_sample(&[
        "stat",
        "--release",
        "--bin",
        "aarch64-pmu",
        "--group-size",
        "7",
        "--events",
        "inst_retired,sw_incr,l1d_cache,l1d_cache_refill,l1i_cache,l2d_cache,br_pred",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("refused a group of 7 events: this CPU has 6 event counters"),
        "{err}"
    );
    let out = cargo_sample(&[
        "stat",
        "--release",
        "--bin",
        "aarch64-pmu",
        "--events",
        "inst_retird",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("did you mean") || err.contains("no event"),
        "{err}"
    );
}

#[test]
fn timer_sampling_on_aarch64_matches_exact_counts_within_3_sigma() {
    // At EL1, at EL2 (`virtualization=on`: the sampler takes the IRQ at EL2, ELR_EL2) and at
    // EL3 (`secure=on`: SCR_EL3.IRQ, ELR_EL3).
    for machine in ["virt", "virt,virtualization=on", "virt,secure=on"] {
        sampling_within_3_sigma(machine, "generic", "20000", "generic timer");
    }
}

#[test]
fn cycle_counter_overflows_sample_within_3_sigma_at_el1_and_el3() {
    // PMCCNTR_EL0 preset to -(period), its overflow interrupt (PPI 7); QEMU's cycle counter
    // ticks once per instruction with `-icount shift=0`, the default in this mode.
    for machine in ["virt", "virt,secure=on"] {
        sampling_within_3_sigma(machine, "pmu:cpu_cycles", "50000", "PMU cycle counter");
    }
    // An event counter's overflow is refused in QEMU, which never signals it, with the way out.
    let out = cargo_sample(&[
        "--release",
        "--bin",
        "hot-loops",
        "--timer",
        "pmu:inst_retired",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--timer pmu:cpu_cycles"), "{err}");
}

#[test]
fn software_increment_overflows_sample_through_the_event_counter() {
    // QEMU signals SW_INCR's overflow (at the write to PMSWINC_EL0), so the event-counter path
    // (PMEVTYPER0, its interrupt enable, the handler's preset and flag) runs here. `three`
    // increments three times per call and `one` once: by construction 3/4 of the events.
    let n = 8000.0;
    let r = json(&[
        "--release",
        "--bin",
        "sw-events",
        "--timer",
        "pmu:sw_incr",
        "--period",
        "16",
        "-n",
        "8000",
        "--format",
        "json",
    ]);
    assert_eq!(r["timer"], "PMU event counter");
    assert_eq!(r["unit"], "SW_INCR events");
    assert_eq!(r["samples"], 8000);
    let functions = r["functions"].as_array().unwrap();
    for (name, expected) in [("three", 0.75), ("one", 0.25)] {
        let row = functions.iter().find(|f| f["name"] == name).unwrap();
        let share = row["samples"].as_f64().unwrap() / n;
        let sigma = (expected * (1.0 - expected) / n).sqrt();
        assert!(
            (share - expected).abs() < 3.0 * sigma,
            "{name}: {share} against {expected} (sigma {sigma})"
        );
    }
    // Every sample follows an increment, by design: no held-off warning for it.
    assert!(
        r["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["kind"] != "held-off")
    );
    // `--truth` would compare the events with instructions: refused.
    let out = cargo_sample(&[
        "--release",
        "--bin",
        "sw-events",
        "--timer",
        "pmu:sw_incr",
        "--truth",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("profile of that event"));
}

fn sampling_within_3_sigma(machine: &str, timer: &str, n: &str, timer_name: &str) {
    let r = json(&[
        "--release",
        "--bin",
        "hot-loops",
        "--machine",
        machine,
        "--timer",
        timer,
        "-n",
        n,
        "--truth",
        "--format",
        "json",
    ]);
    assert_eq!(r["samples"], n.parse::<u64>().unwrap());
    assert_eq!(r["timer"], timer_name);
    assert_eq!(r["machine"], "virt (QEMU)");
    assert_within_3_sigma(
        &r,
        &["hot_a", "hot_b", "hot_c"],
        &format!("{machine} {timer}"),
    );
    // The sampler's own vectors and handler are not in the exact profile's functions.
    assert!(
        r["functions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| !f["name"].as_str().unwrap().contains("sampler_rt"))
    );
}

#[test]
fn counts_read_out_of_memory_as_a_probe_would_equal_the_semihosted_ones() {
    // Nine events: two groups, so two runs with their own run ids.
    let events = "inst_retired,cpu_cycles,sw_incr,l1d_cache,l1d_cache_refill,l2d_cache,\
                  l1i_cache,br_pred,br_mis_pred";
    let sent = stat(&["--events", events]);
    let read = stat(&["--events", events, "--read-memory"]);
    assert_eq!(read["groups"], sent["groups"]);
    assert_eq!(read["groups"].as_array().unwrap().len(), 2);
    assert_eq!(read["regions"], sent["regions"]);
    let lap =
        per_call(&read, "loop 1000", "INST_RETIRED") - per_call(&read, "empty", "INST_RETIRED");
    assert_eq!(lap, 2001.0);
    // A firmware that ends without leaving counts (`laps` exits through the sampler): a clear
    // error naming what to call, not a broken monitor connection.
    let out = cargo_sample(&[
        "stat",
        "--release",
        "--bin",
        "laps",
        "--events",
        "inst_retired",
        "--read-memory",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("sent no counts") && err.contains("sampler_rt::pmu::finish"),
        "{err}"
    );

    // On a board (no probe here): each group's image asks for its counts in memory under its
    // own run id, then the probe is looked for.
    let out = cargo_sample(&[
        "stat",
        "--release",
        "--bin",
        "aarch64-pmu",
        "--events",
        events,
        "--chip",
        "some-a53-board",
    ]);
    let err = stops_at_the_probe(&out);
    let image = err
        .split("its image is kept in ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no image in:\n{err}"));
    let block = symbol_bytes(&image, sampler_rt::wire::PMU_CONFIG_SYMBOL);
    let (flags, id) = sampler_rt::wire::pmu_config_flags(&block).unwrap();
    assert_eq!(flags, sampler_rt::wire::PMU_FLAG_MEMORY);
    assert_ne!(id, 0);
    let (events, n) = sampler_rt::wire::pmu_config_events(&block).unwrap();
    assert_eq!(&events[..n], &[0x08, 0x00, 0x04, 0x03, 0x16, 0x14]);
}

/// A board run with no probe attached: it fails with the probe's message (and no panic);
/// returns what it printed.
fn stops_at_the_probe(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success());
    assert!(err.contains("no debug probe found"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// The bytes of a symbol's initial value in an ELF file.
fn symbol_bytes(elf: &Path, name: &str) -> Vec<u8> {
    use object::{Object, ObjectSection, ObjectSymbol};
    let data = std::fs::read(elf).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let sym = file.symbols().find(|s| s.name() == Ok(name)).unwrap();
    let section = file.section_by_index(sym.section_index().unwrap()).unwrap();
    let (offset, _) = section.file_range().unwrap();
    let at = (offset + sym.address() - section.address()) as usize;
    data[at..at + sym.size() as usize].to_vec()
}

#[test]
fn firmware_with_its_own_interrupts_keeps_them_and_is_told_when_it_does_not() {
    // `own-vectors` serves its own timer in its own vectors and hands the sampler's interrupt
    // to `sampler_rt::on_irq`: it ends by itself only after 4000 of its own ticks, and the
    // profile matches the exact counts.
    let r = json(&[
        "--release",
        "--bin",
        "own-vectors",
        "-n",
        "1000000",
        "--truth",
        "--format",
        "json",
    ]);
    assert_eq!(r["stop"], "the firmware ended the run");
    assert!(r["samples"].as_u64().unwrap() > 15_000, "{}", r["samples"]);
    assert_within_3_sigma(&r, &["work_a", "work_b"], "own-vectors");
    assert!(!kinds(&r).contains(&"foreign-interrupts".to_owned()));
    // `foreign-irq` lets `start()` install the sampler's vectors over its timer interrupt: the
    // interrupt is disabled unserved (no storm, the run ends), counted and reported.
    let r = json(&["--release", "--bin", "foreign-irq", "--format", "json"]);
    assert_eq!(r["foreign_interrupts"], 1);
    let k = kinds(&r);
    assert!(k.contains(&"foreign-interrupts".to_owned()), "{k:?}");
    // A loop head is a branch target on ARMv8-A too: no pile-up is seen there.
    assert!(!k.contains(&"held-off".to_owned()), "{k:?}");
}

#[test]
fn samples_held_off_by_masked_irqs_are_named_on_armv8_a() {
    // `masked_work` masks IRQs (`msr daifset, #2`) around half the work: the samples that
    // fire meanwhile land after `msr daifclr, #2`, and the report says whose time that is.
    let r = json(&[
        "--release",
        "--bin",
        "masked",
        "-n",
        "5000",
        "--format",
        "json",
    ]);
    let d = r["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == "masked-skid")
        .unwrap_or_else(|| panic!("no masked-skid in {}", r["diagnostics"]));
    let msg = d["message"].as_str().unwrap();
    assert!(msg.contains("msr daifclr"), "{msg}");
    assert!(msg.contains("masked region in masked_work"), "{msg}");
    assert!(d["percent"].as_f64().unwrap() > 40.0, "{d}");
}

#[test]
fn firmware_tags_split_a_shared_function_on_armv8_a_as_exactly_as_it_runs() {
    // `tagged` calls `shared` with 750 iterations under the tag "filter" and 250 under
    // "control": the tags' split of `shared` matches the exact count of the same run.
    let out = cargo_sample(&[
        "--release",
        "--bin",
        "tagged",
        "--tag",
        "api",
        "-n",
        "20000",
        "--truth",
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tags = rows(&r, "tags");
    assert_eq!(tags.keys().collect::<Vec<_>>(), ["control", "filter"]);
    assert_eq!(tags.values().sum::<u64>(), 20_000);
    let exact = exact_first_share(&run_dir_of(&out.stderr), "shared", 750, 250);
    assert_split(&r, "shared", "filter", exact);
    // Read live, as a probe would: the names come out of the firmware's memory.
    let r = json(&[
        "--release",
        "--bin",
        "tagged",
        "--tag",
        "api",
        "--live",
        "-n",
        "5000",
        "--format",
        "json",
    ]);
    assert_eq!(
        rows(&r, "tags").keys().collect::<Vec<_>>(),
        ["control", "filter"]
    );
    // The exception tag is Cortex-M's stacked xPSR: refused here, with the words to use.
    let out = cargo_sample(&["--release", "--bin", "tagged", "--tag", "exception"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("`--tag api`"));
}

#[test]
fn bins_on_armv8_a_match_exact_counts_and_read_live_as_sent() {
    // 8-byte bins (two A64 instructions each) over the image: each function's share within 3
    // sigma of the exact count of the same run.
    let args = [
        "--release",
        "--bin",
        "hot-loops",
        "--mode",
        "hist",
        "--bin-size",
        "8",
        "-n",
        "20000",
    ];
    let mut with = args.to_vec();
    with.extend_from_slice(&["--truth", "--format", "json"]);
    let out = cargo_sample(&with);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let dump = std::fs::read(run_dir_of(&out.stderr).join(cargo_sample::runs::DUMP)).unwrap();
    let bins = cargo_sample::dump::decode(&dump)
        .unwrap()
        .hist
        .expect("a HIST record");
    assert_eq!(bins.shift, 3);
    assert_eq!(
        bins.bins.iter().map(|&n| n as u64).sum::<u64>() + bins.outside as u64,
        20_000
    );
    assert_eq!(r["samples"], 20_000);
    assert_within_3_sigma(&r, &["hot_a", "hot_b", "hot_c"], "bins");
    // Read out of memory through the monitor at the end (as a probe would): the same bins.
    let mut live = args.to_vec();
    live.extend_from_slice(&["--live", "--format", "json"]);
    let l = json(&live);
    assert_eq!(l["source"], "live");
    assert_eq!(l["timer"], "generic timer");
    // (The `--truth` run also lists functions no sample fell in.)
    let sampled = |r: &Value| -> Vec<(String, u64)> {
        r["functions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["samples"].as_u64() > Some(0))
            .map(|f| {
                (
                    f["name"].as_str().unwrap().to_owned(),
                    f["samples"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(sampled(&l), sampled(&r));
}

/// One image both sampled and counted, ending as a user writes it (`flush()` then
/// `pmu::finish`): a sampling run gets its samples (the PMU ending no longer writes over the
/// dump), and a `stat` run its counts, without the sampler's interrupts in them.
#[test]
fn one_ending_serves_a_sampled_run_and_a_stat_run() {
    // (No sample limit: the run ends at the firmware's ending, which sends the dump.)
    let r = json(&[
        "--release",
        "--bin",
        "sample-and-stat",
        "--truth",
        "--format",
        "json",
    ]);
    assert!(r["samples"].as_u64().unwrap() > 300, "{}", r["warnings"]);
    // The loop is the firmware's own code inlined into sampler-rt's `measure`: `--truth` counts
    // it as the firmware's (it once left it out with the sampler's own code, +inf sigma).
    let measure = r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "sampler_rt::pmu::Region::measure")
        .unwrap();
    assert!(
        measure["exact_percent"].as_f64().unwrap() > 50.0,
        "{measure}"
    );
    assert!(
        measure["error_sigma"].as_f64().unwrap().abs() < 3.0,
        "{measure}"
    );
    // (The loop is inlined into sampler-rt's `measure`: its innermost frame names it.)
    let inlined: f64 = r["inlined"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["name"].as_str().unwrap().contains("known_loop"))
        .map(|f| f["percent"].as_f64().unwrap())
        .sum();
    assert!(inlined > 50.0, "{}", r["inlined"]);
    let s = json(&[
        "stat",
        "--release",
        "--bin",
        "sample-and-stat",
        "--events",
        "inst_retired",
        "--format",
        "json",
    ]);
    let region = &s["regions"][0];
    assert_eq!(region["name"], "loop 1000");
    assert_eq!(region["calls"], 2000);
    // The sampler linked in stays off in a stat run: the region counts what the same loop
    // counts in the example that has no sampler started (its interrupts are not in it).
    let plain = stat(&["--events", "inst_retired"]);
    assert_eq!(
        count(&s, "loop 1000", "INST_RETIRED")["per_call"],
        count(&plain, "loop 1000", "INST_RETIRED")["per_call"]
    );
}

/// sampler-rt links and samples with cargo's default release profile (16 codegen units, which
/// put the code that installs the vector tables in another unit than their assembly), in ring
/// and in bins mode; the example's own profile has one unit, which once hid a local label.
#[test]
fn sampler_rt_links_with_cargos_default_release_profile() {
    let target = crate::support::copies_target_dir().join("aarch64-pmu-cgu16");
    for mode in [&[][..], &["--mode", "hist", "--bin-size", "8"][..]] {
        let mut args = vec!["--release", "--bin", "hot-loops", "-n", "3000"];
        args.extend_from_slice(mode);
        args.extend_from_slice(&["--format", "json"]);
        let out = Command::new(env!("CARGO_BIN_EXE_cargo-sample"))
            .arg("sample")
            .args(&args)
            .current_dir(example())
            .env("NO_COLOR", "1")
            .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16")
            .env("CARGO_TARGET_DIR", &target)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{mode:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["samples"], 3000, "{mode:?}");
        assert!(
            crate::support::share(&r, "functions", "hot_a") > 50.0,
            "{mode:?}: {}",
            r["functions"]
        );
    }
}

#[test]
fn the_advisor_judges_armv8_a_bins_from_the_instruction_size_up() {
    let advice = json(&[
        "advise",
        "--release",
        "--bin",
        "hot-loops",
        "--sizes",
        "2,4,8",
        "--align-sizes",
        "16",
        "--advice-format",
        "json",
    ]);
    let choices = advice["choices"].as_array().unwrap();
    let sizes: Vec<u64> = choices
        .iter()
        .map(|c| c["bin_size"].as_u64().unwrap())
        .collect();
    // A64 instructions are 4 bytes: 2-byte bins are not offered; 4-byte bins are exact.
    assert_eq!(sizes, [4, 8, 16]);
    assert_eq!(choices[0]["max_error_points"], 0.0);
}

#[test]
fn laps_on_armv8_a_use_the_cycle_counter_and_subtract_their_cost() {
    let r = json(&["--release", "--bin", "laps", "--laps", "--format", "json"]);
    let laps = &r["laps"];
    assert_eq!(laps["counter"], "PMCCNTR_EL0");
    let region = |name: &str| {
        laps["regions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == name)
            .unwrap()
            .clone()
    };
    // QEMU's cycle counter ticks 16 times an instruction here (icount shift 4): the corrected
    // laps are exact.
    assert_eq!(region("empty")["median"].as_f64().unwrap(), 0.0);
    assert_eq!(region("loop 1000")["median"].as_f64().unwrap(), 2001.0);
    assert_eq!(region("loop 1000")["calls"], 20);
}

#[test]
fn an_aarch64_run_cut_short_is_recovered_from_memory() {
    // 10^7 samples would take minutes; the timeout cuts it and the monitor reads the state and
    // ring of the ARMv8-A sampler, joined to the chunks already streamed.
    let out = cargo_sample(&[
        "--release",
        "--bin",
        "hot-loops",
        "-n",
        "10000000",
        "--timeout",
        "2",
        "--format",
        "json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("did not finish within 2 s"), "{err}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        r["stop"],
        "run cut short; samples read from the target's memory"
    );
    let samples = r["samples"].as_u64().unwrap();
    assert!(samples > 10_240, "{samples}");
    assert_eq!(r["taken"].as_u64().unwrap(), samples);
}

#[test]
fn aarch64_rings_are_read_live_and_board_images_prepared_like_cortex_m_ones() {
    // The host reads the ARMv8-A sampler's ring while the firmware runs (its state block has
    // its own layout), as a probe reads it on a board.
    let r = json(&[
        "--release",
        "--bin",
        "hot-loops",
        "--live",
        "-n",
        "30000",
        "--format",
        "json",
    ]);
    assert_eq!(r["source"], "live");
    assert_eq!(
        (r["taken"].as_u64(), r["lost"].as_u64()),
        (Some(30000), Some(0))
    );
    assert_eq!(r["samples"], 30000);
    assert_eq!(r["stop"], "sample limit reached");

    // On a board (no probe here): the image is built and configured for a host that reads the
    // ring, then the probe is looked for.
    let out = cargo_sample(&[
        "--release",
        "--bin",
        "hot-loops",
        "--chip",
        "some-a53-board",
    ]);
    stops_at_the_probe(&out);
}

#[test]
fn pmu_regions_counted_while_sampling_are_counters_and_markers_on_the_firefox_timeline() {
    let p = json(&["--release", "--bin", "pmu-timeline", "--format", "firefox"]);
    // A counter track per event of the group, and the cycle counter.
    let counters: Vec<&str> = p["counters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(counters, ["INST_RETIRED", "CPU_CYCLES", "cycle counter"]);
    let thread = &p["threads"][0];
    let (markers, times) = crate::support::firefox_markers(thread);
    // A marker per lap, its counts in its text: `INST_RETIRED n · CPU_CYCLES n · ...`.
    let count = |m: &crate::support::FirefoxMarker, event: &str| -> f64 {
        let text = m.data["lap"].as_str().unwrap();
        text.split(" · ")
            .find_map(|f| f.strip_prefix(event)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {event} in {text}"))
    };
    let samples = |m: &crate::support::FirefoxMarker| m.data["samples"].as_f64().unwrap();
    let of = |name: &str| -> Vec<&crate::support::FirefoxMarker> {
        markers.iter().filter(|m| m.name == name).collect()
    };
    for name in ["empty", "loop 1000", "loop 1000 x 10"] {
        assert_eq!(of(name).len(), 100, "{name}");
    }
    // The counts are the code's: a lap of the 2001-instruction loop that no sample hit counts
    // 2001 instructions more than an empty lap.
    let clean = |name: &str| -> f64 {
        let c: Vec<f64> = of(name)
            .into_iter()
            .filter(|m| samples(m) == 0.0)
            .map(|m| count(m, "INST_RETIRED"))
            .collect();
        assert!(c.iter().all(|&x| x == c[0]), "{name}: {c:?}");
        c[0]
    };
    assert_eq!(clean("loop 1000") - clean("empty"), 2001.0);
    // Each sample the firmware counted inside a lap adds the sampler's own instructions, the
    // same number every time: the samples are the ones that hit the lap. (A sample taken
    // between the sample count's read and the counters' first read, at either end, is counted
    // inside and adds nothing: a few.)
    let hit: Vec<(f64, f64)> = of("loop 1000")
        .into_iter()
        .filter(|m| samples(m) > 0.0)
        .map(|m| (samples(m), count(m, "INST_RETIRED") - clean("loop 1000")))
        .collect();
    let cost = hit
        .iter()
        .filter(|(k, extra)| *k == 1.0 && *extra > 0.0)
        .map(|(_, extra)| *extra)
        .fold(f64::INFINITY, f64::min);
    assert!((20.0..100.0).contains(&cost), "{cost}: {hit:?}");
    let mut whole = 0;
    for &(k, extra) in &hit {
        let j = extra / cost;
        assert!(
            j.fract() == 0.0 && j <= k,
            "{extra} with {k} samples (cost {cost})"
        );
        whole += usize::from(j == k);
    }
    assert!(whole as f64 >= 0.9 * hit.len() as f64, "{whole} of {hit:?}");
    // The counter track adds up every lap's count.
    let inst = &p["counters"][0]["samples"]["count"];
    let total: f64 = inst
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .sum();
    let laps: f64 = markers.iter().map(|m| count(m, "INST_RETIRED")).sum();
    assert_eq!(total, laps);
    // Placed where they ran: the samples inside the long laps are in the loop. (Samples are
    // drawn a mean period apart, and the real periods vary with the jitter: half a period at
    // each end of a lap is left out.)
    let half = p["meta"]["interval"].as_f64().unwrap() / 2.0;
    let mut inside = 0;
    let mut in_loop = 0;
    for m in of("loop 1000 x 10") {
        let (start, end) = (m.start + half, m.end.unwrap() - half);
        for k in (0..times.len()).filter(|&k| times[k] > start && times[k] < end) {
            let stack = thread["samples"]["stack"][k].as_u64().unwrap() as usize;
            let frames = crate::support::firefox_stack(thread, stack);
            inside += 1;
            in_loop += usize::from(frames.last().unwrap() == "aarch64_pmu::known_loop");
        }
    }
    assert!(
        inside >= 100 && in_loop as f64 >= 0.9 * inside as f64,
        "{in_loop} of {inside}"
    );
}
