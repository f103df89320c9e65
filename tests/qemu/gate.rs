//! The performance gate on a user's crate (a copy of `tests/crates/quickstart`, its rounds cut
//! so that it ends by itself): the same build against its own baseline passes; a slowdown
//! planted in one function fails with exit status 3 and names that function with its exact
//! delta, which is checked against the two runs' exact counts read here, byte by byte, over
//! the function's symbol range; the Markdown comment and GitHub's annotations say the same.

use std::path::Path;
use std::process::Output;

use crate::support::*;

/// `cargo sample ARGS` in the copy, with GitHub's environment when asked.
fn gate(dir: &Path, args: &[&str], github: bool) -> Output {
    let env: &[(&str, &str)] = if github {
        &[("GITHUB_ACTIONS", "true")]
    } else {
        &[("GITHUB_ACTIONS", "false")]
    };
    cargo_sample_in_copy(dir, args, env)
}

/// Instructions executed in `[start, end)`, from a run's `exact.counts` read here: `SMPLEXC1`
/// then `(pc u64, count u64)` little-endian pairs.
fn executed_in(run: &Path, start: u64, end: u64) -> u64 {
    let b = std::fs::read(run.join("exact.counts")).unwrap();
    assert_eq!(&b[..8], b"SMPLEXC1");
    b[8..]
        .chunks_exact(16)
        .map(|c| {
            (
                u64::from_le_bytes(c[..8].try_into().unwrap()),
                u64::from_le_bytes(c[8..].try_into().unwrap()),
            )
        })
        .filter(|(pc, _)| (start..end).contains(pc))
        .map(|(_, n)| n)
        .sum()
}

/// The address range of the function whose symbol contains `name`, from the run's ELF.
fn symbol_range(run: &Path, name: &str) -> (u64, u64) {
    use object::{Object, ObjectSymbol};
    let elf = std::fs::read(run.join("firmware.elf")).unwrap();
    let f = object::File::parse(&*elf).unwrap();
    let s = f
        .symbols()
        .find(|s| s.name().is_ok_and(|n| n.contains(name)) && s.size() > 0)
        .unwrap_or_else(|| panic!("no symbol {name}"));
    (s.address() & !1, (s.address() & !1) + s.size())
}

#[test]
fn a_planted_slowdown_fails_the_gate_naming_the_function_and_its_exact_delta() {
    let copy = copy_crate("tests/crates/quickstart");
    let dir = copy.path();
    let main = dir.join("src/main.rs");
    let src = std::fs::read_to_string(&main).unwrap();
    std::fs::write(
        &main,
        src.replace("for round in 0..100_000u32", "for round in 0..2_000u32"),
    )
    .unwrap();
    let store = dir.join("baselines");
    let store = store.to_str().unwrap();
    let base = ["--release", "--exact", "--cycles", "--baseline-dir", store];
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter().chain(extra).map(|s| (*s).to_owned()).collect()
    };
    let run = |extra: &[&str], github: bool| {
        let args = with(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        gate(dir, &args, github)
    };
    let out = run(&["--save-baseline", "main"], false);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    assert!(err.contains("Saved baseline `main`"), "{err}");
    let before = run_dir_of(&out.stderr);

    // The same build against its own baseline: nothing changed, exit 0.
    let limits = ["--limit", "function=+1%", "--limit", "total=+0%"];
    let mut args = vec!["--baseline", "main", "--format", "json"];
    args.extend(limits);
    let out = run(&args, false);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &r["comparison"];
    assert_eq!(c["total"]["delta"], 0, "{c}");
    assert_eq!(c["regressions"].as_array().unwrap().len(), 0, "{c}");

    // A slowdown planted in `checksum`.
    let src = std::fs::read_to_string(&main).unwrap();
    let planted = src.replace(
        "        b = (b + a) % 65521;\n",
        "        b = (b + a) % 65521;\n        b = core::hint::black_box(b);\n",
    );
    assert_ne!(planted, src);
    std::fs::write(&main, &planted).unwrap();
    let out = run(&args, false);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(3), "{err}");
    let after = run_dir_of(&out.stderr);
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &r["comparison"];
    let reg = c["regressions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["metric"] == "function" && x["exceeded"] == true)
        .unwrap_or_else(|| panic!("no function over its limit: {c}"));
    let name = reg["name"].as_str().unwrap();
    assert!(name.ends_with("checksum"), "{reg}");
    assert!(err.contains(&format!("function:{name} +")), "{err}");
    // The exact delta, from both runs' counts over the function's own range.
    let (a0, a1) = symbol_range(&before, "checksum");
    let (b0, b1) = symbol_range(&after, "checksum");
    let delta = executed_in(&after, b0, b1) as i64 - executed_in(&before, a0, a1) as i64;
    assert!(delta > 1_000_000, "{delta}");
    assert_eq!(reg["delta"].as_i64(), Some(delta), "{reg}");
    // The run's total too, over its limit of 0.
    assert_eq!(c["total"]["exceeded"], true, "{c}");
    // In estimated cycles as well (both runs were timed by the same model): the function
    // and the run grew, each by at least its instructions' growth.
    let cycles_of = |metric: &str, n: &str| {
        c["regressions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["metric"] == metric && x["name"] == n)
            .unwrap_or_else(|| panic!("no {metric}:{n} among the regressions: {c}"))
            .clone()
    };
    let fc = cycles_of("function-cycles", name);
    assert!(fc["delta"].as_i64().unwrap() >= delta, "{fc}");
    assert!(
        cycles_of("cycles", "")["delta"].as_i64().unwrap() >= delta,
        "{c}"
    );
    // A limit on cycles judges them; another timing model is refused, saying which.
    let out = run(
        &[
            "--baseline",
            "main",
            "--limit",
            "function-cycles:*checksum=+1%",
        ],
        false,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains(&format!("function-cycles:{name} +")), "{err}");
    let out = run(&["--baseline", "main", "--core", "cortex-m0"], false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cortex-m0 timing") && err.contains("against cortex-m"),
        "{err}"
    );

    // A pull-request comment and GitHub's annotations on the function's source line.
    let md = dir.join("gate.md");
    let mut args = vec![
        "--baseline",
        "main",
        "--format",
        "markdown",
        "-o",
        md.to_str().unwrap(),
    ];
    args.extend(limits);
    let out = run(&args, true);
    assert_eq!(out.status.code(), Some(3));
    let comment = std::fs::read_to_string(&md).unwrap();
    assert!(
        comment.starts_with("**cargo-sample**: 2 over their limits"),
        "{comment}"
    );
    assert!(
        comment.contains(&format!("| `function:{name}` |")) && comment.contains("**exceeded**"),
        "{comment}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let fn_line = planted
        .lines()
        .position(|l| l.starts_with("fn checksum"))
        .unwrap()
        + 1;
    let annotation = stdout
        .lines()
        .find(|l| l.contains(&format!("function:{name} grew by")))
        .unwrap_or_else(|| panic!("no annotation for {name}:\n{stdout}"));
    assert!(
        annotation.starts_with(&format!("::error file=src/main.rs,line={fn_line}::")),
        "{annotation}"
    );

    // The crate keeps its baselines and limits in its manifest.
    let manifest = dir.join("Cargo.toml");
    let m = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        m + "\n[package.metadata.sample]\nbaseline-dir = \"perf\"\nlimits = [\"function:*checksum=+1%\"]\n",
    )
    .unwrap();
    std::fs::write(&main, &src).unwrap();
    let plain = |extra: &[&str], github: bool| {
        let mut args = vec!["--release", "--exact"];
        args.extend_from_slice(extra);
        gate(dir, &args, github)
    };
    let out = plain(&["--save-baseline", "clean"], false);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.join("perf/clean.json").is_file());
    std::fs::write(&main, &planted).unwrap();
    let out = plain(&["--baseline", "clean"], false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!("function:{name} +")) && err.contains("function:*checksum=+1%"),
        "{err}"
    );
}

/// RTIC software tasks that share a dispatcher (`examples/rtic-app`'s `tasks`: `sensor` and
/// `logger` on one interrupt): a slowdown planted in `logger` is the metric `task:logger` over
/// its limit, by the exact count the dispatcher splits into per task (its call graph's stacks,
/// its own code by each address's inline chain), while `task:sensor` stays as it was; GitHub's
/// annotation lands on the task's `fn`, not on the `#[rtic::app]` line the compiler gives its
/// code.
#[test]
fn a_slower_rtic_task_is_the_task_over_its_limit_on_its_own_line() {
    let copy = copy_crate("examples/rtic-app");
    let dir = copy.path();
    let main = dir.join("src/bin/tasks.rs");
    let src = std::fs::read_to_string(&main).unwrap();
    let store = dir.join("baselines");
    let args = |extra: &[&str]| -> Vec<String> {
        ["--release", "--bin", "tasks", "--exact", "--baseline-dir"]
            .iter()
            .map(|s| (*s).to_owned())
            .chain([store.to_str().unwrap().to_owned()])
            .chain(extra.iter().map(|s| (*s).to_owned()))
            .collect()
    };
    let run = |extra: &[&str]| {
        let a = args(extra);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        gate(dir, &a, true)
    };
    let out = run(&["--save-baseline", "main"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let planted = src.replace(
        "        let v = crunch(round, 20);\n",
        "        let v = crunch(round, 20);\n        let v = core::hint::black_box(v ^ crunch(v, 40));\n",
    );
    assert_ne!(planted, src);
    std::fs::write(&main, &planted).unwrap();
    let out = run(&[
        "--baseline",
        "main",
        "--limit",
        "task=+5%",
        "--format",
        "json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(3), "{err}");
    // The JSON report on standard output; the workflow commands then go to standard error.
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &r["comparison"];
    let over: Vec<&str> = c["regressions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["exceeded"] == true)
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    // (The dispatcher's own prologue grew too, by the stack frame the planted code needs:
    // four instructions at each of its entries, which are RTIC's executor's, not a task's.)
    assert!(over.contains(&"logger"), "{c}");
    assert!(
        over.iter()
            .all(|n| *n == "logger" || n.contains("RTIC's executor")),
        "{c}"
    );
    assert!(
        c["regressions"]
            .as_array()
            .unwrap()
            .iter()
            .chain(c["improvements"].as_array().unwrap())
            .all(|x| x["name"] != "sensor"),
        "sensor did not change: {c}"
    );
    assert!(
        err.contains("over their limits") && err.contains("task:logger +"),
        "{err}"
    );
    let fn_line = planted
        .lines()
        .position(|l| l.trim_start().starts_with("async fn logger"))
        .unwrap()
        + 1;
    let annotation = err
        .lines()
        .find(|l| l.contains("task:logger grew by"))
        .unwrap_or_else(|| panic!("no annotation for task:logger:\n{err}"));
    assert!(
        annotation.starts_with(&format!("::error file=src/bin/tasks.rs,line={fn_line}::")),
        "{annotation}"
    );
}

/// What the gate compares repeats exactly: the same image counted twice, the second time with
/// every core of the host kept busy, gives the same counts and call graph, byte for byte.
/// (Tests whose host must keep pace with the firmware do not run meanwhile.)
#[test]
fn exact_counts_repeat_under_load() {
    let run = || profile_in("call-graph", &["--exact"]).1;
    let quiet = run();
    let _turn = host_timing();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hogs: Vec<_> = (0..std::thread::available_parallelism().map_or(2, |n| n.get()))
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
        })
        .collect();
    let busy = run();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in hogs {
        h.join().unwrap();
    }
    for file in ["exact.counts", "callgraph.bin"] {
        let (a, b) = (
            std::fs::read(quiet.join(file)).unwrap(),
            std::fs::read(busy.join(file)).unwrap(),
        );
        assert!(!a.is_empty());
        assert!(a == b, "{file} differs between a quiet and a loaded host");
    }
}

/// Lap regions are metrics of the gate on a `--laps --cycles` run: each region's mean lap in
/// instructions and in estimated cycles, as the report gives them. The same build against its
/// own baseline passes; against a baseline in which one region was faster, the gate fails with
/// exit status 3 naming that region and the difference.
#[test]
fn lap_regions_are_gated_in_instructions_and_cycles() {
    let store = tempfile::tempdir().unwrap();
    let store = store.path().to_str().unwrap().to_owned();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "--release",
            "--bin",
            "laps",
            "--laps",
            "--cycles",
            "--baseline-dir",
            &store,
        ];
        args.extend_from_slice(extra);
        cargo_sample_env(&scenarios(), &args, &[("GITHUB_ACTIONS", "false")])
    };
    let out = run(&["--save-baseline", "main", "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let path = Path::new(&store).join("main.json");
    let mut base: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let regions = r["laps"]["regions"].as_array().unwrap();
    assert_eq!(
        base["metrics"]["region"].as_object().unwrap().len(),
        regions.len()
    );
    for g in regions {
        let name = g["name"].as_str().unwrap();
        assert_eq!(
            base["metrics"]["region"][name].as_f64().unwrap(),
            g["mean"].as_f64().unwrap().round(),
            "{name}"
        );
        assert_eq!(
            base["metrics"]["region-cycles"][name].as_f64().unwrap(),
            g["cycles"]["mean"].as_f64().unwrap().round(),
            "{name}"
        );
    }
    let limits = [
        "--baseline",
        "main",
        "--limit",
        "region=+0%",
        "--limit",
        "region-cycles=+0%",
        "--format",
        "json",
    ];
    let out = run(&limits);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(c["comparison"]["regressions"].as_array().unwrap().len(), 0);

    // `sum_array` was 10 instructions a lap faster in the baseline.
    let was = base["metrics"]["region"]["sum_array"].as_u64().unwrap();
    base["metrics"]["region"]["sum_array"] = (was - 10).into();
    std::fs::write(&path, serde_json::to_string(&base).unwrap()).unwrap();
    let out = run(&limits);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let over: Vec<_> = c["comparison"]["regressions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["exceeded"] == true)
        .map(|x| (x["metric"].clone(), x["name"].clone(), x["delta"].clone()))
        .collect();
    assert_eq!(
        over,
        [("region".into(), "sum_array".into(), 10.into())],
        "{c}"
    );
}
