//! The exact call graph (`--exact`: the QEMU plugin follows every call, return and
//! exception), checked against the call-graph scenario, whose graph is known by
//! construction, and against the plugin's own per-instruction counts, which it keeps by
//! another mechanism (an inline counter on every instruction).

use std::collections::BTreeMap;

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
    assert!(err.contains("--exact"), "{err}");
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
}
