//! Helpers shared by the end-to-end test binaries: run the real `cargo-sample` on the bundled
//! examples and read its JSON.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use object::{Object, ObjectSymbol};
use serde_json::Value;

pub fn scenarios() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/scenarios")
}

pub fn cargo_sample(dir: &Path, args: &[&str]) -> Output {
    let _one = one_at_a_time(dir);
    Command::new(env!("CARGO_BIN_EXE_cargo-sample"))
        .arg("sample")
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("running cargo-sample")
}

/// RTIC's example crate builds its binaries with sampler-rt set up differently from run to run
/// (a timer's handler built in or not) in one target directory: two tests building it at once
/// can each link the other's sampler-rt. Its runs take turns.
fn one_at_a_time(dir: &Path) -> Option<std::sync::MutexGuard<'static, ()>> {
    static RTIC_APP: std::sync::Mutex<()> = std::sync::Mutex::new(());
    dir.ends_with("rtic-app")
        .then(|| RTIC_APP.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Tests that load the host on purpose, and tests whose host side must keep pace with the
/// firmware's bounded waits, take turns: hold this while doing either.
pub fn host_timing() -> std::sync::MutexGuard<'static, ()> {
    static HOST: std::sync::Mutex<()> = std::sync::Mutex::new(());
    HOST.lock().unwrap_or_else(|e| e.into_inner())
}

/// [`cargo_sample`] with more environment variables.
pub fn cargo_sample_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let _one = one_at_a_time(dir);
    let mut c = Command::new(env!("CARGO_BIN_EXE_cargo-sample"));
    c.arg("sample")
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("running cargo-sample")
}

/// What every report's call graph must hold, sampled or exact, on every architecture: a
/// function's inclusive share is at least its self share and at most 100 %, in the sampled
/// column and in the exact one; a function's callers hold no more of it than its inclusive
/// share. Every report the tests load through [`profile_in`] and [`profile_example`] is held
/// to it, to the rounding of the shares.
pub fn assert_graph_invariants(r: &Value) {
    const EPS: f64 = 1e-9;
    let Some(rows) = r["functions"].as_array() else {
        return;
    };
    for f in rows {
        let name = &f["name"];
        let self_share = f["percent"].as_f64().unwrap_or(0.0);
        if let Some(inc) = f["inclusive_percent"].as_f64() {
            assert!(
                inc + EPS >= self_share && inc <= 100.0 + EPS,
                "{name}: inclusive {inc} % against self {self_share} %"
            );
        }
        if let Some(x) = f["exact_inclusive_percent"].as_f64() {
            let exact_self = f["exact_percent"].as_f64().unwrap_or(0.0);
            assert!(
                x + EPS >= exact_self && x <= 100.0 + EPS,
                "{name}: exact inclusive {x} % against exact self {exact_self} %"
            );
        }
    }
    if let Some(function) = r["callers"]["function"].as_str()
        && let Some(row) = rows.iter().find(|f| f["name"] == function)
    {
        let callers: Vec<&Value> = r["callers"]["rows"]
            .as_array()
            .map(|v| v.iter().filter(|c| c["name"] != function).collect())
            .unwrap_or_default();
        for (key, of) in [
            ("percent", "inclusive_percent"),
            ("exact_percent", "exact_inclusive_percent"),
        ] {
            if let Some(inc) = row[of].as_f64() {
                let sum: f64 = callers.iter().filter_map(|c| c[key].as_f64()).sum();
                assert!(
                    sum <= inc + EPS,
                    "the callers of {function} hold {sum} % ({key}), more than its {inc} % ({of})"
                );
            }
        }
    }
}

/// Run a scenario and return its JSON report.
pub fn profile(bin: &str, extra: &[&str]) -> Value {
    profile_in(bin, extra).0
}

/// Run `cargo sample ARGS --format json` in `examples/NAME` and return the report and the run
/// directory.
pub fn profile_example(name: &str, args: &[&str]) -> (Value, PathBuf) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name);
    let mut all = args.to_vec();
    all.extend_from_slice(&["--format", "json"]);
    let out = cargo_sample(&dir, &all);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "cargo sample {all:?} in {name} failed:\n{stderr}"
    );
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}):\n{}", String::from_utf8_lossy(&out.stdout)));
    assert_graph_invariants(&report);
    (report, run_dir_of(&out.stderr))
}

/// Run a scenario and return its JSON report and its run directory.
pub fn profile_in(bin: &str, extra: &[&str]) -> (Value, PathBuf) {
    let mut args = vec!["--release", "--bin", bin, "--format", "json"];
    args.extend_from_slice(extra);
    let out = cargo_sample(&scenarios(), &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "cargo sample {args:?} failed:\n{stderr}"
    );
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}):\n{}", String::from_utf8_lossy(&out.stdout)));
    assert_graph_invariants(&report);
    (report, run_dir_of(&out.stderr))
}

pub fn share(report: &Value, table: &str, name: &str) -> f64 {
    report[table]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .map(|r| r["percent"].as_f64().unwrap())
        .unwrap_or(0.0)
}

pub fn sigma_points(p_percent: f64, n: f64) -> f64 {
    let p = p_percent / 100.0;
    100.0 * (p * (1.0 - p) / n).sqrt()
}

/// hot_a's share in hot-loops (69.5 % of the instructions) within 4 sigma of `n` samples.
pub fn assert_hot_a_share(r: &Value, n: f64) {
    let a = share(r, "functions", "hot_a");
    let bound = 4.0 * sigma_points(69.5, n);
    assert!(
        (a - 69.5).abs() < bound,
        "hot_a {a}, expected 69.5 ± {bound}"
    );
}

pub fn run_dir_of(stderr: &[u8]) -> PathBuf {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("Saved "))
        .unwrap_or_else(|| panic!("no `Saved` line in:\n{text}"));
    PathBuf::from(line.trim_start().trim_start_matches("Saved ").trim())
}

/// Exact executed-instruction counts per linker-level function, from the exact-count QEMU
/// plugin, for a run directory's `loaded.elf`. sampler-rt's own functions (the handler, the dump
/// writer) are left out: a sampler cannot sample itself; and so is what ran before the sampler
/// started (the counts when `sampler_rt_sampling_starts` first ran, taken off).
pub fn exact_shares(run: &Path) -> std::collections::HashMap<String, f64> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let build = Command::new(env!("CARGO"))
        .args(["build", "-q", "-p", "cargo-sample-qemu-plugin"])
        .current_dir(&root)
        .status()
        .unwrap();
    assert!(build.success());
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let plugin = target.join("debug/libcargo_sample_exact.so");
    let work = tempfile::tempdir().unwrap();
    let counts = work.path().join("counts.bin");
    let before = work.path().join("before.bin");
    let elf = std::fs::read(run.join("firmware.elf")).unwrap();
    let file = object::File::parse(&*elf).unwrap();
    let start = file
        .symbols()
        .find(|s| s.name() == Ok("sampler_rt_sampling_starts"))
        .map(|s| {
            format!(
                ",start={:x},startout={}",
                s.address() & !1,
                before.display()
            )
        })
        .unwrap_or_default();
    let meta: Value =
        serde_json::from_slice(&std::fs::read(run.join("run.json")).unwrap()).unwrap();
    let shift = format!("shift={}", meta["icount_shift"].as_u64().unwrap());
    let status = Command::new("qemu-system-arm")
        .args([
            "-machine",
            "mps2-an385",
            "-cpu",
            "cortex-m3",
            "-display",
            "none",
        ])
        .args(["-serial", "null", "-monitor", "none"])
        .args([
            "-semihosting-config",
            "enable=on,target=native",
            "-icount",
            &shift,
        ])
        .arg("-kernel")
        .arg(run.join("loaded.elf"))
        .arg("-plugin")
        .arg(format!(
            "{},out={}{start}",
            plugin.display(),
            counts.display()
        ))
        .current_dir(work.path())
        .status()
        .unwrap();
    assert!(status.success());
    let bytes = std::fs::read(&counts).unwrap();
    assert_eq!(&bytes[..8], b"SMPLEXC1");
    let pairs = |b: &[u8]| -> Vec<(u64, u64)> {
        b[8..]
            .chunks_exact(16)
            .map(|p| {
                (
                    u64::from_le_bytes(p[..8].try_into().unwrap()),
                    u64::from_le_bytes(p[8..].try_into().unwrap()),
                )
            })
            .collect()
    };
    let earlier: std::collections::HashMap<u64, u64> = std::fs::read(&before)
        .map(|b| pairs(&b).into_iter().collect())
        .unwrap_or_default();
    let mut funcs: Vec<(u64, u64, String)> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
        .map(|s| {
            let a = s.address() & !1;
            (a, a + s.size(), s.name().unwrap().to_owned())
        })
        .collect();
    funcs.sort();
    let mut per: std::collections::HashMap<String, u64> = Default::default();
    for (pc, n) in pairs(&bytes) {
        let n = n - earlier.get(&pc).copied().unwrap_or(0);
        // An address covered by any sampler-rt symbol (SysTick is an alias of its entry) is
        // the sampler's own.
        let covering: Vec<_> = funcs.iter().filter(|f| f.0 <= pc && pc < f.1).collect();
        if let Some(f) = covering.first()
            && !covering.iter().any(|f| f.2.contains("sampler_rt"))
        {
            *per.entry(f.2.clone()).or_default() += n;
        }
    }
    let total: u64 = per.values().sum();
    per.into_iter()
        .map(|(k, v)| (k, 100.0 * v as f64 / total as f64))
        .collect()
}

/// A table of a JSON report as name -> samples.
pub fn rows(r: &Value, table: &str) -> BTreeMap<String, u64> {
    r[table]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["name"].as_str().unwrap().to_owned(),
                row["samples"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The exact share of `function`'s instructions that runs in the calls with `n_first`
/// iterations, when it is called alternately with `n_first` and `n_second` iterations: from
/// the exact per-address counts of the run, instructions that run once a call and those that
/// run once an iteration are told apart by their counts.
pub fn exact_first_share(run: &Path, function: &str, n_first: u64, n_second: u64) -> f64 {
    let elf = std::fs::read(run.join("firmware.elf")).unwrap();
    let file = object::File::parse(&*elf).unwrap();
    let sym = file
        .symbols()
        .find(|s| s.name() == Ok(function))
        .unwrap_or_else(|| panic!("no {function}"));
    let (start, end) = (sym.address() & !1, (sym.address() & !1) + sym.size());
    let bytes = std::fs::read(run.join("exact.counts")).unwrap();
    let counts: Vec<u64> = bytes[8..]
        .chunks_exact(16)
        .filter(|c| (start..end).contains(&u64::from_le_bytes(c[..8].try_into().unwrap())))
        .map(|c| u64::from_le_bytes(c[8..].try_into().unwrap()))
        .collect();
    let calls = *counts.iter().min().unwrap();
    let per_call = counts.iter().filter(|&&n| n == calls).count() as f64;
    let per_iteration = counts.len() as f64 - per_call;
    let first = per_call + n_first as f64 * per_iteration;
    let second = per_call + n_second as f64 * per_iteration;
    first / (first + second)
}

/// `function`'s samples by tag.
pub fn split_of(r: &Value, function: &str) -> BTreeMap<String, u64> {
    let suffix = format!(" / {function}");
    rows(r, "tag_functions")
        .into_iter()
        .filter_map(|(k, n)| k.strip_suffix(&suffix).map(|t| (t.to_owned(), n)))
        .collect()
}

pub fn assert_split(r: &Value, function: &str, first: &str, exact: f64) {
    let split = split_of(r, function);
    let total: u64 = split.values().sum();
    let got = split[first] as f64 / total as f64;
    let s = (exact * (1.0 - exact) / total as f64).sqrt();
    assert!(
        (got - exact).abs() < 3.0 * s,
        "{function}: {first} has {got:.4} of it, exactly {exact:.4} (sigma {s:.4}); {split:?}"
    );
}

/// The kinds of a JSON report's diagnostics.
pub fn kinds(r: &Value) -> Vec<String> {
    r["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["kind"].as_str().unwrap().to_owned())
        .collect()
}

/// Assert that each function's sampled share is within 3 binomial sigmas of its exact share
/// (`--truth`).
pub fn assert_within_3_sigma(r: &Value, functions: &[&str], what: &str) {
    for name in functions {
        let row = r["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == *name)
            .unwrap_or_else(|| panic!("{what}: no row {name}"));
        let sigma = row["error_sigma"].as_f64().unwrap();
        assert!(sigma.abs() < 3.0, "{what} {name}: {sigma} sigma ({row})");
    }
}

/// The run directory a failed run names in its error ("... are kept in DIR)").
pub fn kept_dir(stderr: &str) -> PathBuf {
    stderr
        .split("the run are kept in ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no run directory in:\n{stderr}"))
}

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The target directory cargo gives `krate` (`CARGO_TARGET_DIR` when set, as cargo-sample's
/// builds honour it).
pub fn target_dir_of(krate: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| krate.join("target"))
}

/// Where tests leave files for a person to look at (the suite's target directory), created.
pub fn artifacts_dir() -> PathBuf {
    let dir = target_dir_of(&repo());
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// Where copies of firmware crates build: one target directory for all of them, so that their
/// dependencies are compiled once (only the copied crate itself is rebuilt).
pub fn copies_target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"))
        .join("crate-copies")
}

/// A copy of a firmware crate of the repository (`examples/NAME`, `tests/crates/NAME`) in a
/// temporary directory, its path dependencies on sampler-rt made absolute.
pub fn copy_crate(rel: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree_skipping_target(&repo().join(rel), tmp.path());
    let rt = repo().join("sampler-rt").canonicalize().unwrap();
    for entry in walk(tmp.path()) {
        if entry.file_name().is_some_and(|n| n == "Cargo.toml") {
            let text = std::fs::read_to_string(&entry).unwrap();
            let fixed = text
                .replace(
                    "path = \"../../sampler-rt\"",
                    &format!("path = {:?}", rt.display().to_string()),
                )
                .replace(
                    "path = \"../../../sampler-rt\"",
                    &format!("path = {:?}", rt.display().to_string()),
                );
            std::fs::write(&entry, fixed).unwrap();
        }
    }
    tmp
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            v.extend(walk(&p));
        } else {
            v.push(p);
        }
    }
    v
}

fn copy_tree_skipping_target(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name == "target" {
            continue;
        }
        let (src, dst) = (e.path(), to.join(&name));
        if src.is_dir() {
            copy_tree_skipping_target(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// `cargo sample ARGS` in `dir` with the shared target directory of crate copies and extra
/// environment.
pub fn cargo_sample_in_copy(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cargo-sample"));
    c.arg("sample")
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("CARGO_TARGET_DIR", copies_target_dir());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("running cargo-sample")
}

/// A run's folded stacks (`report --format folded`) as stack -> count.
pub fn folded_stacks(dir: &Path) -> BTreeMap<String, u64> {
    let out = cargo_sample(
        &scenarios(),
        &["report", dir.to_str().unwrap(), "--format", "folded"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').unwrap();
            (stack.to_owned(), n.parse().unwrap())
        })
        .collect()
}

/// Each frame of an inferno SVG: its name and fill colour, in drawing order.
pub fn svg_frames(svg: &str) -> Vec<(String, String)> {
    svg.split("<g><title>")
        .skip(1)
        .map(|g| {
            let name = g.split(" (").next().unwrap().to_owned();
            let fill = g
                .split("fill=\"")
                .nth(1)
                .and_then(|f| f.split('"').next())
                .unwrap()
                .to_owned();
            (name, fill)
        })
        .collect()
}

/// One sample of a Firefox Profiler thread: its frames' names, outermost first.
pub fn firefox_stack(thread: &Value, stack: usize) -> Vec<String> {
    let st = &thread["stackTable"];
    let ft = &thread["frameTable"];
    let fu = &thread["funcTable"];
    let strings = &thread["stringArray"];
    let mut names = Vec::new();
    let mut at = Some(stack);
    while let Some(i) = at {
        let frame = st["frame"][i].as_u64().unwrap() as usize;
        let func = ft["func"][frame].as_u64().unwrap() as usize;
        let name = fu["name"][func].as_u64().unwrap() as usize;
        names.push(strings[name].as_str().unwrap().to_owned());
        at = st["prefix"][i].as_u64().map(|p| p as usize);
    }
    names.reverse();
    names
}

/// A marker of a Firefox Profiler thread.
#[derive(Debug, Clone)]
pub struct FirefoxMarker {
    pub name: String,
    /// Milliseconds; `end` is `None` for an instant.
    pub start: f64,
    pub end: Option<f64>,
    /// The marker's data, its string fields resolved.
    pub data: serde_json::Map<String, Value>,
}

/// A thread's markers, and its samples' times (milliseconds, in order).
pub fn firefox_markers(thread: &Value) -> (Vec<FirefoxMarker>, Vec<f64>) {
    let strings = &thread["stringArray"];
    let m = &thread["markers"];
    let markers = (0..m["length"].as_u64().unwrap() as usize)
        .map(|i| {
            let mut data = m["data"][i].as_object().cloned().unwrap_or_default();
            // String fields are indexes into the thread's strings.
            for key in ["lap", "message", "poll"] {
                if let Some(k) = data.get(key).and_then(Value::as_u64) {
                    data.insert(key.into(), strings[k as usize].clone());
                }
            }
            FirefoxMarker {
                name: strings[m["name"][i].as_u64().unwrap() as usize]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                start: m["startTime"][i].as_f64().unwrap(),
                // Phase 0: an instant; 1: an interval.
                end: (m["phase"][i] == 1).then(|| m["endTime"][i].as_f64().unwrap()),
                data,
            }
        })
        .collect();
    let mut at = 0.0;
    let times = thread["samples"]["timeDeltas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            at += d.as_f64().unwrap();
            at
        })
        .collect();
    (markers, times)
}

/// Where a scenario's source makes a defmt call, as the decoded line ends:
/// `  (src/bin/BIN.rs:LINE)`.
pub fn logged_at(bin: &str, call: &str) -> String {
    let source = std::fs::read_to_string(scenarios().join(format!("src/bin/{bin}.rs"))).unwrap();
    let line = source
        .lines()
        .position(|l| l.contains(call))
        .unwrap_or_else(|| panic!("no {call} in {bin}.rs"))
        + 1;
    format!("  (src/bin/{bin}.rs:{line})")
}

/// A run that succeeded printed the firmware's defmt lines that mention `about`, in order, as
/// `expected`, and kept them in `defmt.log`; its run directory, and the raw bytes in `raw` (which
/// must be frames, not text).
pub fn assert_defmt_log(out: &Output, about: &str, expected: &[String], raw: &str) -> PathBuf {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let printed: Vec<&str> = err.lines().filter(|l| l.contains(about)).collect();
    assert_eq!(printed, expected, "{err}");
    let dir = run_dir_of(&out.stderr);
    let kept = std::fs::read_to_string(dir.join("defmt.log")).unwrap();
    assert_eq!(kept.lines().collect::<Vec<_>>(), expected);
    let bytes = std::fs::read(dir.join(raw)).unwrap();
    let text = about.trim_end_matches(": ").as_bytes();
    assert!(
        !bytes.is_empty() && !bytes.windows(text.len()).any(|w| w == text),
        "frames, not text, in {raw}"
    );
    dir
}
