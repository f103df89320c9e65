//! The exact call graph (`--exact`: the QEMU plugin follows every call, return and
//! exception), checked against the call-graph scenario, whose graph is known by
//! construction, and against the plugin's own per-instruction counts, which it keeps by
//! another mechanism (an inline counter on every instruction).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::*;
use serde_json::Value;

fn edge(r: &Value, list: &str, name: &str) -> (u64, u64) {
    r[list]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .map(|e| {
            (
                e["instructions"].as_u64().unwrap(),
                e["calls"].as_u64().unwrap(),
            )
        })
        .unwrap_or_else(|| panic!("no edge {name} in {}", r[list]))
}

fn function(r: &Value, name: &str) -> Value {
    r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no function {name}"))
}

#[test]
fn the_exact_call_graph_is_the_one_the_program_was_built_with() {
    let (r, dir) = profile_in("call-graph", &["--exact", "--callers", "leaf"]);
    // leaf: 3 calls from left and 1 from right per round, the same work each: exactly 3 : 1.
    let (left, left_calls) = edge(&r, "callers", "left");
    let (right, right_calls) = edge(&r, "callers", "right");
    assert_eq!(left, 3 * right);
    assert_eq!(left_calls, 3 * right_calls);
    // An interrupt handler is a caller too: IRQ30 calls leaf(100) once a round.
    let (irq, irq_calls) = edge(&r, "callers", "IRQ30");
    assert_eq!(irq_calls, right_calls);
    // Half the loop, plus the same call overhead.
    assert!(irq < right && irq * 2 > right, "{irq} vs {right}");
    // Self and inclusive: leaf calls nothing; recursion counts once; the tail-called
    // `landing` runs under `jumper`.
    let leaf = function(&r, "leaf");
    assert_eq!(leaf["inclusive_instructions"], leaf["instructions"]);
    assert_eq!(leaf["instructions"].as_u64().unwrap(), left + right + irq);
    let rec = function(&r, "recurse");
    assert_eq!(rec["inclusive_instructions"], rec["instructions"]);
    let (jumper, landing) = (function(&r, "jumper"), function(&r, "landing"));
    assert_eq!(
        jumper["inclusive_instructions"].as_u64().unwrap(),
        jumper["instructions"].as_u64().unwrap() + landing["instructions"].as_u64().unwrap()
    );
    let main = function(&r, "call_graph::__cortex_m_rt_main");
    let total = r["instructions"].as_u64().unwrap();
    assert!(main["inclusive_instructions"].as_u64().unwrap() > total * 999 / 1000);

    // The graph's stacks against the per-instruction counts: each function's own
    // instructions are the same by both mechanisms.
    let out = cargo_sample(
        &scenarios(),
        &["report", dir.to_str().unwrap(), "--format", "folded"],
    );
    assert!(out.status.success());
    let folded = String::from_utf8(out.stdout).unwrap();
    let mut own: BTreeMap<String, u64> = BTreeMap::new();
    for line in folded.lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap();
        *own.entry(stack.rsplit(';').next().unwrap().to_owned())
            .or_default() += n.parse::<u64>().unwrap();
    }
    for f in r["functions"].as_array().unwrap() {
        let name = f["name"].as_str().unwrap();
        assert_eq!(
            own.get(name).copied().unwrap_or(0),
            f["instructions"].as_u64().unwrap(),
            "{name}: the call stacks and the instruction counts disagree"
        );
    }
    // Real stacks, the interrupt's and the tail call's included.
    assert!(
        folded.contains("call_graph::__cortex_m_rt_main;IRQ30;leaf "),
        "{folded}"
    );
    assert!(
        folded.contains("call_graph::__cortex_m_rt_main;jumper;landing "),
        "{folded}"
    );
    assert!(
        folded.contains("recurse;recurse;recurse;recurse;recurse "),
        "{folded}"
    );

    // Callees, and the callgrind file KCacheGrind reads.
    let out = cargo_sample(
        &scenarios(),
        &[
            "report",
            dir.to_str().unwrap(),
            "--format",
            "json",
            "--callees",
            "__cortex_m_rt_main",
        ],
    );
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(c["callees"]["function"], "call_graph::__cortex_m_rt_main");
    assert_eq!(
        edge(&c, "callees", "left").0,
        function(&r, "left")["inclusive_instructions"]
            .as_u64()
            .unwrap()
    );
    let out = cargo_sample(
        &scenarios(),
        &["report", dir.to_str().unwrap(), "--format", "callgrind"],
    );
    let cg = String::from_utf8(out.stdout).unwrap();
    assert!(cg.starts_with("# callgrind format\n"), "{cg}");
    assert!(cg.contains(&format!("summary: {total}\n")), "{cg}");
    let left_block = cg.split("\nfn=left\n").nth(1).unwrap();
    assert!(
        left_block.starts_with(&format!(
            "{}\ncfn=leaf\ncalls={left_calls} 0\n0 {left}\n",
            format_args!("0 {}", function(&r, "left")["instructions"])
        )),
        "{left_block}"
    );
}

#[test]
fn callers_need_a_run_that_followed_calls_and_a_name_that_ran() {
    let (_, dir) = profile_in("hot-loops", &["-n", "1000"]);
    let out = cargo_sample(
        &scenarios(),
        &["report", dir.to_str().unwrap(), "--callers", "hot_a"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("--exact") && err.contains("--stacks"), "{err}");
    let (_, dir) = profile_in("call-graph", &["--exact", "--instructions", "5M"]);
    let out = cargo_sample(
        &scenarios(),
        &[
            "report",
            dir.to_str().unwrap(),
            "--callers",
            "nothing_like_it",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("no function named `nothing_like_it` ran"),
        "{err}"
    );
    let out = cargo_sample(
        &scenarios(),
        &["report", dir.to_str().unwrap(), "--callers", "r"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("give more of the name"), "{err}");
    // Every function the name matches is listed, however many.
    let said = err.split("` names ").nth(1).unwrap();
    let n: usize = said.split(' ').next().unwrap().parse().unwrap();
    let listed = said.split(": ").nth(1).unwrap().split(';').next().unwrap();
    assert_eq!(listed.matches('`').count(), 2 * n, "{err}");
}

/// The binomial deviation of a sampled share (percent of `n` samples) from an exact one, in
/// sigmas: the normal deviate of the binomial's exact tail, as the report's rows are judged
/// (at a few expected samples the normal approximation overstates a deviation: 12 samples
/// where 4.6 are expected read 3.4 sigma by it, 2.7 by the tail).
pub(crate) fn sigmas(sampled: f64, exact: f64, n: f64) -> f64 {
    let k = (sampled / 100.0 * n).round().max(0.0) as u64;
    cargo_sample::analysis::stats::binomial_z(k, n.round() as u64, exact / 100.0)
}

/// The bar for sampled stacks: at least 99 % unwound to their root, and every function's
/// inclusive share within 3 sigma of its exact one (stacks not unwound to their root can only
/// lower the outer functions' shares, by at most their own share) and inside its interval.
/// Returns the stacks that reached their root.
pub(crate) fn inclusive_within_3_sigma(r: &Value) -> u64 {
    let n = r["samples"].as_f64().unwrap();
    let u = &r["unwinding"];
    let rooted = u["complete"].as_u64().unwrap() + u["handler_root"].as_u64().unwrap();
    assert!(
        rooted * 100 >= u["samples"].as_u64().unwrap() * 99,
        "fewer than 99 % of the stacks reached their root: {u}"
    );
    let unrooted = 100.0 * (1.0 - rooted as f64 / n);
    for f in r["functions"].as_array().unwrap() {
        // sampler-rt's own rows (the instructions of `exit` before the timer stops) have no
        // exact share to be judged against.
        let Some(x) = f["exact_inclusive_percent"].as_f64() else {
            assert!(
                f["name"].as_str().unwrap().starts_with("sampler_rt::"),
                "{f}"
            );
            continue;
        };
        let s = f["inclusive_percent"].as_f64().unwrap();
        let z = sigmas(s + unrooted.min((x - s).max(0.0)), x, n);
        assert!(
            z.abs() <= 3.0,
            "{}: inclusive {s:.3} % vs exact {x:.3} % ({z:+.1} sigma, {unrooted:.2} % not unwound to their root; {} samples, {} lost; {u})",
            f["name"],
            r["samples"],
            r["lost"]
        );
        let [lo, hi] = [
            f["inclusive_ci95"][0].as_f64().unwrap(),
            f["inclusive_ci95"][1].as_f64().unwrap(),
        ];
        assert!(lo <= s + 1e-9 && s <= hi + 1e-9, "{f}");
    }
    rooted
}

/// Every `--callers`/`--callees` row of a sampled run within 3 sigma of its exact share.
fn edges_within_3_sigma(r: &Value, list: &str) {
    let n = r["samples"].as_f64().unwrap();
    for e in r[list]["rows"].as_array().unwrap() {
        let (s, x) = (
            e["percent"].as_f64().unwrap(),
            e["exact_percent"].as_f64().unwrap(),
        );
        let z = sigmas(s, x, n);
        assert!(
            z.abs() <= 3.0,
            "{list} {}: {s:.3} % vs exact {x:.3} % ({z:+.1} sigma)",
            e["name"]
        );
    }
}

#[test]
fn a_real_workload_unwinds_to_its_root_and_matches_the_exact_graph() {
    // core::fmt through trait objects, float formatting, sorting, 64-bit division through
    // compiler-builtins' assembly (no call-frame information: its prologue is read), stacks
    // deeper than the window (the frame records carry them).
    let (r, _) = profile_in("workload", &["--stacks", "--truth", "-n", "10000"]);
    inclusive_within_3_sigma(&r);
    let u = &r["unwinding"];
    assert!(u["prologue_frames"].as_u64().unwrap() > 0, "{u}");
    assert!(r["functions"].as_array().unwrap().len() > 30);
}

#[test]
fn fp_extended_exception_frames_unwind_like_plain_ones() {
    // A Cortex-M4F (mps2-an386) running float code: every exception frame holds the FPU's
    // state (26 words, 27 with the alignment word), the sampler's and the nested IRQ30's.
    let (r, _) = profile_in(
        "fp-stacks",
        &[
            "--target",
            "thumbv7em-none-eabihf",
            "--stacks",
            "--truth",
            "-n",
            "10000",
            "--callers",
            "mac",
        ],
    );
    let n = r["samples"].as_f64().unwrap();
    let rooted = inclusive_within_3_sigma(&r);
    assert_eq!(rooted as f64, n);
    let u = &r["unwinding"];
    let nested = u["exception_frames"].as_u64().unwrap();
    assert!(nested > 0, "{u}");
    // Every sample's own frame was extended (the code used the FPU), and so were the nested
    // IRQ30 frames (the FPU held live values when it was pended).
    assert!(
        u["fp_extended_frames"].as_u64().unwrap() as f64 >= n + 0.9 * nested as f64,
        "{u}"
    );
    edges_within_3_sigma(&r, "callers");
    let names: Vec<&str> = r["callers"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    for caller in ["filter", "scale", "IRQ30"] {
        assert!(names.contains(&caller), "{names:?}");
    }
}

/// The call graphs built with `leaf` called three times by `left` for once by `right`: the
/// sampled callers' split.
fn left_about_three_times_right(r: &Value) {
    let rows = r["callers"]["rows"].as_array().unwrap();
    let share = |name: &str| {
        rows.iter().find(|e| e["name"] == name).unwrap()["samples"]
            .as_f64()
            .unwrap()
    };
    let ratio = share("left") / share("right");
    assert!((2.5..3.6).contains(&ratio), "left/right = {ratio}");
}

/// `--stacks --truth -n 5000 --callers FN` in one of the examples: the JSON report and the run.
fn stacks_in_example(example: &str, extra: &[&str], callers: &str) -> (Value, PathBuf) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(example);
    let mut args = vec!["--release", "--stacks", "--truth", "-n", "5000"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--callers", callers, "--format", "json"]);
    let out = cargo_sample(&dir, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let r = serde_json::from_slice(&out.stdout).unwrap();
    assert_graph_invariants(&r);
    (r, run_dir_of(&out.stderr))
}

#[test]
fn a_cortex_m0_keeps_stacks_and_they_match_the_exact_graph() {
    // ARMv6-M (the microbit's nRF51): the sampler finds the exception frame again from
    // EXC_RETURN and keeps the same entries; `m0_light` is called half from `m0_round`, half
    // from `main`.
    let (r, _) = stacks_in_example("microbit-m0", &[], "m0_light");
    let n = r["samples"].as_f64().unwrap();
    assert_eq!(inclusive_within_3_sigma(&r) as f64, n);
    let rows = r["callers"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    edges_within_3_sigma(&r, "callers");
    // The sampler divides nothing through compiler-builtins (ARMv6-M has no divide
    // instruction): none of its time is counted as the application's.
    for f in r["functions"].as_array().unwrap() {
        let name = f["name"].as_str().unwrap();
        if name.contains("div") {
            assert!(f["exact_percent"].as_f64().unwrap() < 0.01, "{f}");
        }
    }
}

#[test]
fn armv8a_stacks_match_the_exact_call_graph() {
    // ARMv8-A (QEMU virt, EL1): ELR, SPSR, the interrupted SP, x29 and x30 and a window of
    // the stack per sample, unwound by the ELF's .eh_frame; `leaf` is called by `left` three
    // times a round and by `right` once, through an inlined helper.
    let (r, dir) = stacks_in_example("aarch64-pmu", &["--bin", "calls"], "leaf");
    let n = r["samples"].as_f64().unwrap();
    assert_eq!(inclusive_within_3_sigma(&r) as f64, n);
    edges_within_3_sigma(&r, "callers");
    left_about_three_times_right(&r);
    // No exception tags from the SPSR the entries carry.
    assert!(
        r["tags"].as_array().is_none_or(|t| t.is_empty()),
        "{}",
        r["tags"]
    );
    let folded: Vec<String> = folded_stacks(&dir).into_keys().collect();
    let folded = folded.join("\n");
    assert!(
        folded.contains("_start;main;right;calls::through_inline;leaf"),
        "{folded}"
    );
    assert!(
        folded.contains("_start;main;recurse;recurse;recurse;recurse"),
        "{folded}"
    );
}

/// A kernel shaped like the ones on GitHub (`examples/aarch64-kernel`): its own `start.s` with
/// a plain `_start` label calling an `extern "C"` entry, its own linker script naming the
/// stack's two ends `__stack_start` (the bottom) and `__stack_end` (the top), cargo's default
/// release profile, and a routine of its own assembly without call-frame information. The
/// stacks reach `_start` (through that routine by its frame record), and the inclusive shares
/// and `matmul`'s caller agree with the exact graph. (The bottom was taken for the top: every
/// window was empty and every stack "cut short by the window"; the routine ended every stack
/// through it.)
#[test]
fn an_armv8a_kernel_with_its_own_start_up_and_linker_script_unwinds_to_its_entry() {
    // A window over the whole stack (under 140 words deep): nothing may be cut short.
    let kernel = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/aarch64-kernel");
    let args = [
        "--release",
        "--stacks",
        "255",
        "--truth",
        "-n",
        "5000",
        "--callers",
        "matmul",
        "--format",
        "json",
    ];
    let out = cargo_sample(&kernel, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (r, dir): (Value, PathBuf) = (
        serde_json::from_slice(&out.stdout).unwrap(),
        run_dir_of(&out.stderr),
    );
    assert_graph_invariants(&r);
    let n = r["samples"].as_f64().unwrap();
    let u = &r["unwinding"];
    // Through `count_primes`, assembly without call-frame information, by its frame record:
    // every stack but one caught in its first two instructions, before the record is made.
    assert!(u["complete"].as_f64().unwrap() >= n - 3.0, "{u}");
    assert!(u["prologue_frames"].as_u64().unwrap() > 1000, "{u}");
    inclusive_within_3_sigma(&r);
    edges_within_3_sigma(&r, "callers");
    let rows = r["callers"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["name"], "kernel_main");
    // Its one caller holds all of it, in both columns.
    let matmul = r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "matmul")
        .unwrap();
    for (edge, of) in [
        ("percent", "inclusive_percent"),
        ("exact_percent", "exact_inclusive_percent"),
    ] {
        let (a, b) = (
            rows[0][edge].as_f64().unwrap(),
            matmul[of].as_f64().unwrap(),
        );
        assert!((a - b).abs() < 1e-6, "{edge} {a} against {of} {b}");
    }
    let folded: Vec<String> = folded_stacks(&dir).into_keys().collect();
    assert!(
        folded.iter().any(
            |s| s.starts_with("_start;kernel_main;count_primes;primes_below;")
                && s.ends_with(";is_prime")
        ),
        "{folded:?}"
    );
}

#[test]
fn sampled_stacks_match_the_exact_call_graph_within_3_sigma() {
    // The same run samples with stacks and follows every call: inclusive shares and the
    // split of leaf's time between its callers against the exact graph.
    let (r, dir) = profile_in(
        "call-graph",
        &["--stacks", "--truth", "-n", "10000", "--callers", "leaf"],
    );
    let n = r["samples"].as_f64().unwrap();
    let rooted = inclusive_within_3_sigma(&r);
    // The tail call (jumper → landing, and cortex-m-rt's main → __cortex_m_rt_main) and the
    // interrupt were unwound through.
    let u = &r["unwinding"];
    assert!(u["tail_calls"].as_u64().unwrap() > 0, "{u}");
    assert!(u["exception_frames"].as_u64().unwrap() > 0, "{u}");
    // Inclusive against the construction: leaf calls nothing, recursion counts once, the
    // tail-called landing runs under jumper, main holds everything sampled.
    let row = |name: &str| function(&r, name);
    assert_eq!(row("leaf")["inclusive_samples"], row("leaf")["samples"]);
    assert_eq!(
        row("recurse")["inclusive_samples"],
        row("recurse")["samples"]
    );
    assert_eq!(
        row("jumper")["inclusive_samples"].as_u64().unwrap(),
        row("jumper")["samples"].as_u64().unwrap() + row("landing")["samples"].as_u64().unwrap()
    );
    assert_eq!(
        row("call_graph::__cortex_m_rt_main")["inclusive_samples"]
            .as_u64()
            .unwrap(),
        rooted
    );
    // leaf's callers: left, right and the interrupt, each within 3 sigma of its exact share,
    // left about three times right.
    let rows = r["callers"]["rows"].as_array().unwrap();
    for name in ["left", "right", "IRQ30"] {
        assert!(
            rows.iter().any(|e| e["name"] == name),
            "no caller {name}: {rows:?}"
        );
    }
    edges_within_3_sigma(&r, "callers");
    left_about_three_times_right(&r);

    // Real stacks in the folded output, the interrupt unwound into the code it interrupted.
    let out = cargo_sample(
        &scenarios(),
        &["report", dir.to_str().unwrap(), "--format", "folded"],
    );
    let folded = String::from_utf8(out.stdout).unwrap();
    assert!(
        folded.contains("Reset;main;call_graph::__cortex_m_rt_main;left;leaf "),
        "{folded}"
    );
    assert!(folded.contains(";IRQ30;leaf"), "{folded}");
    assert!(
        folded.contains("call_graph::__cortex_m_rt_main;jumper;landing "),
        "{folded}"
    );
    // What was inlined at a caller's call site is a frame of its own: `right` reaches `leaf`
    // through the inlined `through_inline`, never directly.
    assert!(
        folded.contains(";right;call_graph::through_inline;leaf"),
        "{folded}"
    );
    assert!(!folded.contains(";right;leaf"), "{folded}");
    let total: u64 = folded
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(total as f64, n);

    // The tree has real callers: the reset handler at its root holds every rooted sample, and
    // `leaf` sits below the inlined frame below `right`.
    let tree = r["tree"].as_array().unwrap();
    let reset = tree.iter().find(|t| t["name"] == "Reset").unwrap();
    assert_eq!(reset["total_count"].as_u64().unwrap(), rooted);
    let path = [
        "main",
        "call_graph::__cortex_m_rt_main",
        "right",
        "call_graph::through_inline",
        "leaf",
    ];
    let mut node = reset;
    for name in path {
        node = node["children"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == name))
            .unwrap_or_else(|| panic!("no {name} below {}", node["name"]));
    }
    let below_right = function(&r, "right")["inclusive_samples"].as_u64().unwrap();
    assert!(node["total_count"].as_u64().unwrap() <= below_right);
    assert!(
        node["total_count"].as_u64().unwrap() * 2 > below_right,
        "{node}"
    );
}

#[test]
fn stacks_are_refused_where_they_cannot_be_kept() {
    for (args, words) in [
        (&["--stacks", "--mode", "hist"][..], "bins have none"),
        (
            &["--stacks", "--tag", "api"][..],
            "other tags are not recorded",
        ),
        (&["--stacks", "--method", "pcsr"][..], "drop `--stacks`"),
        (&["--stacks", "0"][..], "keeps no stack"),
    ] {
        let mut all = vec!["--release", "--bin", "hot-loops"];
        all.extend_from_slice(args);
        let out = cargo_sample(&scenarios(), &all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(words), "{args:?}: {err}");
        // Refused before anything was built.
        assert!(!err.contains("Compiling"), "{args:?}: {err}");
    }
}

/// What a call graph in a report must say of itself, read from its JSON alone: no inclusive
/// share above 100 % or below the function's own, and the callers of a function that never
/// calls itself adding up to its inclusive time (checked for `--callers FN`).
pub(crate) fn assert_graph_holds(r: &Value) {
    let total: u64 = r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["instructions"].as_u64().unwrap_or(0))
        .sum();
    for f in r["functions"].as_array().unwrap() {
        let (own, inc) = (
            f["instructions"].as_u64().unwrap(),
            f["inclusive_instructions"].as_u64().unwrap(),
        );
        assert!(own <= inc && inc <= total, "{f}");
    }
    if let Some(rows) = r["callers"]["rows"].as_array() {
        let name = r["callers"]["function"].as_str().unwrap();
        let sum: u64 = rows
            .iter()
            .map(|e| e["instructions"].as_u64().unwrap())
            .sum();
        if !rows.iter().any(|e| e["name"] == name) {
            let inc = function(r, name)["inclusive_instructions"]
                .as_u64()
                .unwrap();
            assert_eq!(sum, inc, "callers of {name}: {rows:#?}");
        }
    }
}

#[test]
fn exceptions_nested_tail_chained_and_entered_at_a_device_access_close_where_they_end() {
    let handler = |name: &str, callers: &[&str]| {
        let (r, _) = profile_in("nested-irqs", &["--exact", "--callers", name]);
        assert_graph_holds(&r);
        let found: Vec<&str> = r["callers"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(found, callers, "callers of {name}");
    };
    let (r, dir) = profile_in("nested-irqs", &["--exact", "--callers", "IRQ26"]);
    assert_graph_holds(&r);
    // 500 rounds: IRQ26 is entered from the thread each round, and IRQ27 and IRQ28 nest
    // inside it; IRQ29 waits for IRQ26 to return and is chained to it, so its caller is the
    // thread, never IRQ26.
    assert_eq!(
        edge(&r, "callers", "nested_irqs::__cortex_m_rt_main").1,
        500
    );
    handler("IRQ27", &["first_work"]);
    handler("IRQ28", &["IRQ27"]);
    handler("IRQ29", &["nested_irqs::__cortex_m_rt_main"]);
    let inc = |name: &str| {
        function(&r, name)["inclusive_instructions"]
            .as_u64()
            .unwrap()
    };
    let own = |name: &str| function(&r, name)["instructions"].as_u64().unwrap();
    assert_eq!(inc("IRQ27"), own("IRQ27") + own("IRQ28"));
    assert_eq!(
        inc("IRQ26"),
        own("IRQ26") + own("first_work") + inc("IRQ27")
    );
    assert_eq!(inc("IRQ29"), own("IRQ29"));

    // Each exception's time, from the graph, against QEMU's own log of exception entries and
    // returns (the exec log with `-d int`), which follows no call at all.
    let (_, log_dir) = profile_in("nested-irqs", &["--exact", "--truth-method", "exec-log"]);
    let logged = assert_graph_matches_exec_log(&dir, &log_dir);
    assert_eq!(logged.len(), 5, "thread mode and four handlers: {logged:?}");
}

/// The instructions each exception ran, per handler address (0: thread mode), from the exact
/// call graph of the run in `graph_dir` and from QEMU's exec log of the same firmware in
/// `log_dir` (its `-d int` lines name every exception entry and return): equal. Returns them.
pub(crate) fn assert_graph_matches_exec_log(
    graph_dir: &Path,
    log_dir: &Path,
) -> BTreeMap<u32, u64> {
    use cargo_sample::analysis::callgraph::per_exception;
    use cargo_sample::dump::{callgraph, exact};
    let elf = std::fs::read(graph_dir.join("firmware.elf")).unwrap();
    let handler: BTreeMap<u32, u32> = cargo_sample::image::elf::vectors(&elf)
        .into_iter()
        .collect();
    let contexts =
        exact::parse_contexts(&std::fs::read(log_dir.join(exact::CONTEXTS_FILE)).unwrap()).unwrap();
    let mut logged: BTreeMap<u32, u64> = BTreeMap::new();
    for (exception, _, n) in contexts {
        let at = if exception == 0 {
            0
        } else {
            handler[&exception]
        };
        *logged.entry(at).or_default() += n;
    }
    let tree = callgraph::parse(&std::fs::read(graph_dir.join(callgraph::FILE)).unwrap()).unwrap();
    let from_graph: BTreeMap<u32, u64> = per_exception(&tree).into_iter().collect();
    assert_eq!(
        from_graph, logged,
        "per exception: the graph, then QEMU's log"
    );
    logged
}

/// RTIC v2 applications from crates.io's RTIC (hardware tasks at three priorities sharing
/// resources, a software task on a dispatcher, a SysTick monotonic), with fat LTO and
/// without: every exact graph holds, and its time per exception is QEMU's.
#[test]
fn rtic_applications_exact_graphs_close_every_exception() {
    for bin in ["tasks", "mono"] {
        for profile in ["release", "nolto"] {
            let args = ["--profile", profile, "--bin", bin, "--exact"];
            let (r, graph) = profile_example("rtic-app", &args);
            assert_graph_holds(&r);
            let mut log = args.to_vec();
            log.extend(["--truth-method", "exec-log"]);
            let (_, log) = profile_example("rtic-app", &log);
            let per = assert_graph_matches_exec_log(&graph, &log);
            assert!(per.len() >= 3, "{bin} {profile}: {per:?}");
        }
    }
}

/// `--elf FIXTURE --exact` on lm3s6965evb in a fresh directory, with more arguments: the
/// report and the run directory.
fn exact_of_fixture(elf: &Path, dir: &Path, extra: &[&str]) -> (Value, PathBuf) {
    let mut args = vec![
        "--elf",
        elf.to_str().unwrap(),
        "--machine",
        "lm3s6965evb",
        "--exact",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    let out = cargo_sample_env(dir, &args, &[("CARGO_TARGET_DIR", "target")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", elf.display());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_graph_invariants(&r);
    (r, run_dir_of(&out.stderr))
}

/// RTIC's own examples crate at its git HEAD (`tests/fixtures/rtic/`): dispatchers that call
/// wakers through conditional calls (`blxne r1`, not taken when no waker is stored), a
/// handler that returns right before the next one begins and that one tail-chained to it.
/// Every exact graph holds, each exception's time is what QEMU's own exception log says, and
/// `work`'s producer makes the calls its source does: 40 rounds of `crc_work`, each pending
/// the consumer's dispatcher and the hardware task.
#[test]
fn rtic_heads_examples_exact_graphs_hold_through_conditional_calls_and_tail_chains() {
    let fixtures = repo().join("tests/fixtures/rtic");
    for name in [
        "work",
        "static-resources-in-divergent",
        "static-resources-in-divergent-lto",
        "resource-user-struct",
    ] {
        let elf = fixtures.join(format!("{name}.elf"));
        let dir = tempfile::tempdir().unwrap();
        let callees: &[&str] = if name == "work" {
            &["--callees", "SSI0"]
        } else {
            &[]
        };
        let (r, graph) = exact_of_fixture(&elf, dir.path(), callees);
        assert_graph_holds(&r);
        let (_, log) = exact_of_fixture(&elf, dir.path(), &["--truth-method", "exec-log"]);
        let per = assert_graph_matches_exec_log(&graph, &log);
        assert!(per.len() >= 3, "{name}: {per:?}");
        if name == "work" {
            for callee in ["work::crc_work", "GPIOA", "QEI0"] {
                assert_eq!(edge(&r, "callees", callee).1, 40, "{callee}");
            }
        }
    }
}

/// FreeRTOS's own QEMU demo for this machine (`tests/fixtures/freertos/blinky.elf`: its blinky
/// configuration built with Debian's arm-none-eabi GCC): each task runs on a process stack of
/// its own, switched by PendSV writing PSP. The exact graph keeps a stack of calls per task:
/// every task's entry has no caller but its first run, the calls each task makes are as many
/// as the firmware's own output says (95 messages sent by the sending task, 95 plus 9 from the
/// software timer received, and the receive it blocks in at the end), no return goes astray,
/// and the exception table has a row per task.
/// (Before, each task's code was filed under the kernel call the previous task blocked in:
/// `xQueueReceive` called `prvQueueSendTask` 99.93 % of its time.)
#[test]
fn an_rtoss_tasks_each_keep_their_own_stack_of_calls() {
    let elf = repo().join("tests/fixtures/freertos/blinky.elf");
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "--elf",
            elf.to_str().unwrap(),
            "--machine",
            "mps2-an385",
            "--exact",
            "--instructions",
            "40M",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let out = cargo_sample_env(dir.path(), &args, &[("CARGO_TARGET_DIR", "target")]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_graph_invariants(&r);
        (r, run_dir_of(&out.stderr))
    };
    for task in [
        "prvQueueSendTask",
        "prvQueueReceiveTask",
        "prvIdleTask",
        "prvTimerTask",
    ] {
        let (r, _) = run(&["--callers", task]);
        let rows = r["callers"]["rows"].as_array().unwrap();
        let names: Vec<&str> = rows.iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["[start]"], "callers of {task}");
        assert_eq!(edge(&r, "callers", "[start]").1, 1, "{task}");
    }
    let (r, graph) = run(&["--callees", "prvQueueReceiveTask"]);
    let output = std::fs::read_to_string(graph.join("firmware-output.txt")).unwrap();
    let from_task = output.matches("Message received from task").count() as u64;
    let from_timer = output
        .matches("Message received from software timer")
        .count() as u64;
    assert!(from_task >= 5, "{output}");
    assert_eq!(
        edge(&r, "callees", "xQueueReceive").1,
        from_task + from_timer + 1,
        "{output}"
    );
    let (r, _) = run(&["--callees", "prvQueueSendTask"]);
    assert_eq!(edge(&r, "callees", "xQueueGenericSend").1, from_task);
    assert!(
        !kinds(&r).contains(&"stray-returns".to_owned()),
        "{:#?}",
        r["diagnostics"]
    );
    let tasks: Vec<&str> = r["tags"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["task"].as_str())
        .collect();
    for task in ["prvQueueSendTask", "prvQueueReceiveTask", "prvIdleTask"] {
        assert!(tasks.contains(&task), "{tasks:?}");
    }
}

/// Handlers nested three deep, chained, and entered at a device access: every sampled stack
/// crosses their exception frames to the thread's root (the frame records carry each
/// exception frame's stacked PC, LR and xPSR beyond the window), and the inclusive shares
/// match the exact graph's.
#[test]
fn stacks_through_nested_handlers_reach_their_root() {
    let args = ["--stacks", "--truth", "--period", "2000", "-n", "5000"];
    let (r, graph) = profile_in("nested-irqs", &args);
    // The exact graph of a run with the sampler in it: each exception's time, the sampler's
    // own included, is what QEMU's exception log of the same run says (the sampler's
    // dispatch `ldm r1, {.., pc}` is a jump, not a return that closes the handler it
    // interrupted).
    let mut log = args.to_vec();
    log.extend(["--truth-method", "exec-log"]);
    let (_, log) = profile_in("nested-irqs", &log);
    assert_graph_matches_exec_log(&graph, &log);
    let rooted = inclusive_within_3_sigma(&r);
    assert_eq!(rooted, r["samples"].as_u64().unwrap(), "{}", r["unwinding"]);
    assert!(r["unwinding"]["exception_frames"].as_u64().unwrap() > rooted / 2);
    let cut: Vec<&Value> = r["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"] == "cut-stacks")
        .collect();
    assert!(cut.is_empty(), "{cut:?}");
    // Nothing is marked as a lower bound when every stack reached its root.
    for f in r["functions"].as_array().unwrap() {
        assert!(f.get("inclusive_at_most_percent").is_none(), "{f}");
    }
}

/// Stacks cut short (a 4-word window on a deep workload): said in a warning with the count
/// and the reason, and every inclusive share marked as a lower bound, with the most it can be;
/// the exact inclusive share lies between the two (within sampling noise).
#[test]
fn stacks_cut_short_are_warned_about_and_their_shares_marked_as_lower_bounds() {
    let args = [
        "--stacks",
        "4",
        "--truth",
        "-n",
        "5000",
        "--callers",
        "hot_a",
    ];
    let (r, dir) = profile_in("workload", &args[..5]);
    let n = r["samples"].as_f64().unwrap();
    let u = &r["unwinding"];
    let cut = u["samples"].as_u64().unwrap()
        - u["complete"].as_u64().unwrap()
        - u["handler_root"].as_u64().unwrap();
    assert!(cut * 100 > u["samples"].as_u64().unwrap(), "{u}");
    let warned: Vec<&Value> = r["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"] == "cut-stacks" && d["severity"] == "warning")
        .collect();
    assert_eq!(warned.len(), 1, "{}", r["diagnostics"]);
    let msg = warned[0]["message"].as_str().unwrap();
    assert!(msg.starts_with(&format!("{cut} of ")), "{msg}");
    assert!(msg.contains("4-word window"), "{msg}");
    for f in r["functions"].as_array().unwrap() {
        let (s, x, most) = (
            f["inclusive_percent"].as_f64().unwrap(),
            f["exact_inclusive_percent"].as_f64().unwrap(),
            f["inclusive_at_most_percent"].as_f64().unwrap(),
        );
        assert!(
            (most - (s + 100.0 * cut as f64 / n).min(100.0)).abs() < 1e-6,
            "{f}"
        );
        // (4 sigma: some 50 rows, and a caller's inclusive share moves with its callees'.)
        assert!(
            (s <= x + 1e-6 || sigmas(s, x, n) <= 4.0)
                && (most >= x - 1e-6 || sigmas(most, x, n) >= -4.0),
            "{}: exact {x:.2} % outside [{s:.2}, {most:.2}] %",
            f["name"]
        );
    }
    // The text marks them; so do the callers.
    let out = cargo_sample(
        &scenarios(),
        &[
            "report",
            dir.to_str().unwrap(),
            "--callers",
            "core::fmt::write",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(" ≥"), "{text}");
    let callers = &text[text.find("callers of").unwrap()..];
    let rows: Vec<&str> = callers
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert!(
        !rows.is_empty() && rows.iter().all(|l| l.starts_with('≥')),
        "{callers}"
    );
    let _ = args;
}
