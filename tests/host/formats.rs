//! The report's other formats, read back by independent readers: folded stacks by their sums,
//! the SVG flamegraph by its titles, pprof by `prost` decoding `profile.proto`.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use crate::support::*;
use serde_json::Value;

fn report(dir: &Path, format: &str) -> Vec<u8> {
    let out = cargo_sample(
        &scenarios(),
        &["report", dir.to_str().unwrap(), "--format", format],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Counts per function of the JSON report's function table.
fn by_function(r: &Value, count: &str) -> BTreeMap<String, u64> {
    r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row[count].as_u64().unwrap() > 0)
        .map(|row| {
            (
                row["name"].as_str().unwrap().to_owned(),
                row[count].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn folded_stacks_add_up_to_the_function_table() {
    let (r, dir) = profile_in("hot-loops", &["--samples", "10000"]);
    let folded = String::from_utf8(report(&dir, "folded")).unwrap();
    let mut roots: BTreeMap<String, u64> = BTreeMap::new();
    let mut total = 0;
    for line in folded.lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap();
        let n: u64 = n.parse().unwrap();
        assert!(!stack.contains(";;") && !stack.is_empty(), "{line}");
        *roots
            .entry(stack.split(';').next().unwrap().to_owned())
            .or_default() += n;
        total += n;
    }
    assert_eq!(total, 10_000);
    assert_eq!(roots, by_function(&r, "samples"));
    // Inlined frames are there: core's range iterator inside hot_a.
    assert!(
        folded
            .lines()
            .any(|l| l.starts_with("hot_a;") && l.contains("core::"))
    );
}

#[test]
fn the_flamegraph_shows_each_function_with_its_samples() {
    let (r, dir) = profile_in("hot-loops", &["--samples", "10000"]);
    let svg = String::from_utf8(report(&dir, "svg")).unwrap();
    assert!(
        svg.starts_with("<?xml") && svg.contains("<svg"),
        "{}",
        &svg[..200]
    );
    for (name, n) in by_function(&r, "samples")
        .into_iter()
        .filter(|(_, n)| *n >= 100)
    {
        // inferno writes `name (6,966 samples, 69.66%)`.
        let with_commas = n
            .to_string()
            .as_bytes()
            .rchunks(3)
            .rev()
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect::<Vec<_>>()
            .join(",");
        let title = format!("<title>{name} ({with_commas} samples,");
        assert!(svg.contains(&title), "no `{title}` in the SVG");
    }
}

/// Each frame's fill colours in an inferno SVG, by the frame's name.
fn frame_colours(svg: &str) -> BTreeMap<String, std::collections::BTreeSet<String>> {
    let mut out: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for (name, fill) in svg_frames(svg) {
        out.entry(name).or_default().insert(fill);
    }
    out
}

#[test]
fn a_function_keeps_its_flamegraph_colour_across_frames_and_runs() {
    let (_, a) = profile_in("call-graph", &["--stacks", "-n", "1000", "--seed", "1"]);
    let (_, b) = profile_in("call-graph", &["--stacks", "-n", "1000", "--seed", "2"]);
    let (ca, cb) = (
        frame_colours(&String::from_utf8(report(&a, "svg")).unwrap()),
        frame_colours(&String::from_utf8(report(&b, "svg")).unwrap()),
    );
    // `leaf` is drawn under three callers, `recurse` five deep: one colour each.
    for name in ["leaf", "recurse", "left"] {
        assert_eq!(ca[name].len(), 1, "{name}: {:?}", ca[name]);
        assert_eq!(ca[name], cb[name], "{name} changed colour between runs");
    }
}

// The subset of pprof's profile.proto that the test reads.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Profile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(message, optional, tag = "11")]
    period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    period: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Mapping {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(bool, tag = "10")]
    has_inline_frames: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(uint64, tag = "3")]
    address: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
    #[prost(int64, tag = "2")]
    line: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "4")]
    filename: i64,
}

fn decode_pprof(bytes: &[u8]) -> Profile {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut raw)
        .expect("gzip");
    <Profile as prost::Message>::decode(raw.as_slice()).expect("profile.proto")
}

/// Counts per outermost function (the last line of each location) of a pprof profile.
fn pprof_by_function(p: &Profile) -> BTreeMap<String, u64> {
    let functions: BTreeMap<u64, &Function> = p.function.iter().map(|f| (f.id, f)).collect();
    let locations: BTreeMap<u64, &Location> = p.location.iter().map(|l| (l.id, l)).collect();
    let mut out = BTreeMap::new();
    for s in &p.sample {
        let loc = locations[&s.location_id[0]];
        let outer = loc.line.last().expect("a line per location");
        let name = &p.string_table[functions[&outer.function_id].name as usize];
        *out.entry(name.clone()).or_default() += s.value[0] as u64;
    }
    out
}

#[test]
fn pprof_decodes_with_the_same_counts_and_inline_frames() {
    let (r, dir) = profile_in("hot-loops", &["--samples", "10000"]);
    let p = decode_pprof(&report(&dir, "pprof"));
    assert_eq!(p.string_table[0], "");
    let st = &p.sample_type[0];
    assert_eq!(p.string_table[st.r#type as usize], "samples");
    assert_eq!(p.mapping.len(), 1);
    assert!(p.mapping[0].has_inline_frames);
    let total: i64 = p.sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(total, 10_000);
    assert_eq!(pprof_by_function(&p), by_function(&r, "samples"));
    assert_eq!(p.period, r["period_units"].as_f64().unwrap().round() as i64);
    // Locations of the loop carry core's inlined frames before hot_a, with file and line.
    let inlined = p.location.iter().filter(|l| l.line.len() > 1).count();
    assert!(inlined > 0);
    assert!(
        p.function
            .iter()
            .any(|f| p.string_table[f.filename as usize].starts_with("core/src/"))
    );
}

#[test]
fn an_exact_profile_counts_instructions_in_every_format() {
    let (r, dir) = profile_in("early-exit", &["--exact"]);
    let p = decode_pprof(&report(&dir, "pprof"));
    assert_eq!(
        p.string_table[p.sample_type[0].r#type as usize],
        "instructions"
    );
    assert_eq!(pprof_by_function(&p), by_function(&r, "instructions"));
    let folded = String::from_utf8(report(&dir, "folded")).unwrap();
    let total: u64 = folded
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, r["instructions"].as_u64().unwrap());
}

/// Sampled call stacks reach pprof whole: every sample's locations, innermost first, name the
/// same frames (functions and what was inlined at each level) as the folded stacks of the
/// same run, with the same counts.
#[test]
fn sampled_call_stacks_reach_pprof_with_their_inlined_frames() {
    let (r, dir) = profile_in("call-graph", &["--stacks", "-n", "2000"]);
    let p = decode_pprof(&report(&dir, "pprof"));
    let functions: BTreeMap<u64, &Function> = p.function.iter().map(|f| (f.id, f)).collect();
    let locations: BTreeMap<u64, &Location> = p.location.iter().map(|l| (l.id, l)).collect();
    let mut from_pprof: BTreeMap<String, u64> = BTreeMap::new();
    for s in &p.sample {
        let mut names: Vec<&str> = Vec::new();
        for id in s.location_id.iter().rev() {
            // A location's lines are innermost first: outermost first here.
            for l in locations[id].line.iter().rev() {
                names.push(&p.string_table[functions[&l.function_id].name as usize]);
            }
        }
        *from_pprof.entry(names.join(";")).or_default() += s.value[0] as u64;
    }
    let from_folded = folded_stacks(&dir);
    assert_eq!(from_pprof, from_folded);
    assert_eq!(
        from_pprof.values().sum::<u64>(),
        r["samples"].as_u64().unwrap()
    );
    assert!(
        from_pprof
            .keys()
            .any(|k| k.contains(";right;call_graph::through_inline;leaf")),
        "{from_pprof:?}"
    );
}

/// Colour is decided per stream: a report written with `-o` never carries escape codes, even
/// with `--color always` or when standard error is a terminal; standard output gets them only
/// when it takes colour; `--color` is checked.
#[cfg(unix)]
#[test]
fn colour_is_decided_per_stream_and_never_reaches_a_file() {
    use std::os::fd::FromRawFd;
    use std::process::{Command, Stdio};
    let (_, run) = profile_in("hot-loops", &["--samples", "200"]);
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("profile.txt");
    // A terminal for standard error only.
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two descriptors into the integers given.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0);
    // SAFETY: `slave` is a descriptor this test owns.
    let tty = unsafe { std::fs::File::from_raw_fd(slave) };
    let report = |extra: &[&str], stderr: Stdio| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cargo-sample"));
        c.args(["sample", "report", run.to_str().unwrap()])
            .args(extra)
            .env_remove("NO_COLOR")
            .env_remove("CARGO_TERM_COLOR")
            .env_remove("CLICOLOR_FORCE")
            .stderr(stderr)
            .stdout(Stdio::piped());
        c.output().unwrap()
    };
    let out = report(
        &["-o", file.to_str().unwrap()],
        Stdio::from(tty.try_clone().unwrap()),
    );
    assert!(out.status.success());
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(
        written.contains("hot_a") && !written.contains('\x1b'),
        "{written}"
    );
    // The status line went to the terminal, in colour.
    let mut seen = vec![0u8; 4096];
    // SAFETY: `master` is the terminal's other end, owned by this test.
    let mut m = unsafe { std::fs::File::from_raw_fd(master) };
    let n = std::io::Read::read(&mut m, &mut seen).unwrap();
    let seen = String::from_utf8_lossy(&seen[..n]);
    assert!(seen.contains("Wrote") && seen.contains('\x1b'), "{seen}");
    // Piped standard output, with standard error on the terminal: no codes.
    let out = report(&[], Stdio::from(tty));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("hot_a") && !stdout.contains('\x1b'),
        "{stdout}"
    );
    // `--color always` colours standard output, never the file.
    let out = report(&["--color", "always"], Stdio::null());
    assert!(String::from_utf8_lossy(&out.stdout).contains('\x1b'));
    let out = report(
        &["--color", "always", "-o", file.to_str().unwrap()],
        Stdio::null(),
    );
    assert!(out.status.success());
    assert!(!std::fs::read_to_string(&file).unwrap().contains('\x1b'));
    let out = report(&["--color", "sometimes"], Stdio::piped());
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("possible values: auto, always, never"));
}

#[test]
fn pprof_of_an_exact_call_graph_carries_the_real_stacks() {
    let (r, dir) = profile_in("call-graph", &["--exact", "--instructions", "20M"]);
    let p = decode_pprof(&report(&dir, "pprof"));
    let functions: BTreeMap<u64, &Function> = p.function.iter().map(|f| (f.id, f)).collect();
    let locations: BTreeMap<u64, &Location> = p.location.iter().map(|l| (l.id, l)).collect();
    let name = |id: &u64| {
        let f = locations[id].line[0].function_id;
        p.string_table[functions[&f].name as usize].clone()
    };
    let mut stacks: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    for s in &p.sample {
        *stacks
            .entry(s.location_id.iter().map(name).collect())
            .or_default() += s.value[0] as u64;
    }
    // Innermost first: leaf under left under the entry point, and leaf under the interrupt.
    let left = [
        "leaf",
        "left",
        "call_graph::__cortex_m_rt_main",
        "main",
        "Reset",
    ]
    .map(String::from);
    assert!(stacks.contains_key(left.as_slice()), "{stacks:?}");
    assert!(
        stacks
            .keys()
            .any(|k| k.len() > 1 && k[0] == "leaf" && k[1] == "IRQ30"),
        "{stacks:?}"
    );
    let total: u64 = stacks.values().sum();
    assert_eq!(total, r["instructions"].as_u64().unwrap());
    // The innermost frames' counts are the function table's.
    assert_eq!(pprof_by_function(&p), by_function(&r, "instructions"));
}

#[test]
fn the_firefox_profile_has_a_thread_per_tag_with_the_samples_in_order() {
    let (r, dir) = profile_in("shared-isr", &["--tag", "exception", "-n", "2000"]);
    let p: Value = serde_json::from_slice(&report(&dir, "firefox")).unwrap();
    let threads = p["threads"].as_array().unwrap();
    // A thread per tag, as many samples as the tag table says.
    let mut from_profile = BTreeMap::new();
    let mut by_tag_and_leaf: BTreeMap<String, u64> = BTreeMap::new();
    for t in threads {
        let name = t["name"].as_str().unwrap().to_owned();
        let stacks = t["samples"]["stack"].as_array().unwrap();
        // Time moves forward from each sample of the thread to the next.
        let deltas = t["samples"]["timeDeltas"].as_array().unwrap();
        assert!(
            deltas.iter().skip(1).all(|d| d.as_f64().unwrap() > 0.0),
            "{name}: samples out of order"
        );
        for s in stacks {
            let frames = firefox_stack(t, s.as_u64().unwrap() as usize);
            *by_tag_and_leaf
                .entry(format!("{name} / {}", frames[0]))
                .or_default() += 1;
        }
        from_profile.insert(name, stacks.len() as u64);
    }
    assert_eq!(from_profile, rows(&r, "tags"));
    // The linker-level function (each stack's outermost frame) by tag: the report's table.
    assert_eq!(by_tag_and_leaf, rows(&r, "tag_functions"));
}

#[test]
fn the_firefox_profile_carries_the_sampled_call_stacks() {
    let (_, dir) = profile_in("call-graph", &["--stacks", "-n", "1000"]);
    let p: Value = serde_json::from_slice(&report(&dir, "firefox")).unwrap();
    let mut from_profile: BTreeMap<String, u64> = BTreeMap::new();
    for t in p["threads"].as_array().unwrap() {
        for s in t["samples"]["stack"].as_array().unwrap() {
            let frames = firefox_stack(t, s.as_u64().unwrap() as usize);
            *from_profile.entry(frames.join(";")).or_default() += 1;
        }
    }
    let from_folded = folded_stacks(&dir);
    assert_eq!(from_profile, from_folded);
    assert!(from_profile.keys().all(|k| k.starts_with("Reset;main;")));
}
