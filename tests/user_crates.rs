//! Crates shaped like the ones users have (`tests/crates/`: a cortex-m-quickstart crate, an RTIC
//! v2 application, an Embassy application, a workspace of two firmware crates), each copied
//! and taken from zero: `cargo sample init` with no option, then `cargo sample --release` with no
//! hand edit, profiled against the exact instruction counts of the same run.

mod support;

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use support::*;

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run `cargo sample init ARGS` in `dir`; returns the diff it printed.
fn init(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["init"];
    all.extend_from_slice(args);
    let out = cargo_sample_in_copy(dir, &all, &[]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "init {args:?} failed:\n{stderr}");
    stdout
}

/// Every file of a crate, for checking that nothing changed.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                v.push((p.display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
    }
    v.sort();
    v
}

/// Profile with `--truth` and check every function of at least 1 % within 3 sigma of its
/// exact share, except the ones the report itself flags: a masked region's time lands after
/// it (the masked-skid warning names the region and its callers).
fn profile_against_exact(dir: &Path, args: &[&str], n: u32) -> Value {
    let n = n.to_string();
    let mut all = vec!["--release", "--truth", "--format", "json", "--samples", &n];
    all.extend_from_slice(args);
    let out = cargo_sample_in_copy(dir, &all, &[]);
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "cargo sample {all:?} failed:\n{stderr}"
    );
    let r: Value = serde_json::from_str(&stdout).unwrap();
    let flagged: Vec<String> = r["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"] == "masked-skid")
        .map(|d| d["message"].as_str().unwrap().to_owned())
        .collect();
    let named = |f: &str| {
        flagged.iter().any(|m| {
            m.match_indices(f).any(|(i, _)| {
                let after = m[i + f.len()..].chars().next();
                !after.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
            })
        })
    };
    let judged: Vec<&str> = r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["exact_percent"].as_f64().unwrap_or(0.0) >= 1.0)
        .map(|f| f["name"].as_str().unwrap())
        .filter(|f| !named(f))
        .collect();
    assert!(judged.len() >= 2, "{}", r["functions"]);
    assert_within_3_sigma(&r, &judged, "function");
    r
}

#[test]
fn a_quickstart_crate_is_set_up_and_profiled_from_zero() {
    let copy = copy_crate("tests/crates/quickstart");
    let dir = copy.path();
    let diff = init(dir, &[]);
    // The entry point is `start`, after a doc comment that shows a `fn main`; the diff shows
    // where the lines went.
    assert!(
        diff.contains(" fn start() -> ! {\n+    #[cfg(feature = \"sample\")]\n+    sampler_rt::start();\n     let mut buf"),
        "{diff}"
    );
    assert!(diff.contains("@@ "), "{diff}");
    // Its semihosting exit would take the ring's last samples with it: a flush goes first.
    assert!(
        diff.contains("+    #[cfg(feature = \"sample\")]\n+    sampler_rt::flush();\n     debug::exit(debug::EXIT_SUCCESS);"),
        "{diff}"
    );
    let rt = repo().join("sampler-rt").canonicalize().unwrap();
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("sampler-rt = { path = \"") && manifest.contains("\", optional = true }"),
        "{manifest}"
    );
    assert_eq!(
        runtime_path(dir, &manifest),
        rt,
        "the checkout's runtime, by path:\n{manifest}"
    );
    // Set up already: nothing changes.
    let before = snapshot(dir);
    let out = cargo_sample_in_copy(dir, &["init"], &[]);
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success() && stdout.is_empty(),
        "{stdout}{stderr}"
    );
    assert!(stderr.contains("already set up"), "{stderr}");
    assert_eq!(before, snapshot(dir));
    let r = profile_against_exact(dir, &[], 3000);
    assert!(
        share(&r, "functions", "quickstart_app::sort") > 20.0,
        "{}",
        r["functions"]
    );
    assert!(share(&r, "functions", "quickstart_app::checksum") > 10.0);
}

#[test]
fn an_rtic_application_is_set_up_in_init_and_profiled_from_zero() {
    let copy = copy_crate("tests/crates/rtic");
    let dir = copy.path();
    let out = cargo_sample_in_copy(dir, &["init"], &[]);
    let (diff, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        diff.contains(" fn init(_: init::Context) -> (Shared, Local) {\n+        #[cfg(feature = \"sample\")]\n+        sampler_rt::start();"),
        "{diff}"
    );
    assert!(stderr.contains("RTIC enables them"), "{stderr}");
    let r = profile_against_exact(dir, &["--tag", "exception"], 4000);
    // `spawn` takes a critical section: its masked time is flagged, not silently misplaced.
    assert!(
        kinds(&r).contains(&"masked-skid".to_owned()),
        "{}",
        r["diagnostics"]
    );
    // Each hardware task is seen at its own share.
    for task in ["GPIOA", "GPIOB"] {
        let row = r["tags"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"].as_str().is_some_and(|n| n.contains(task)))
            .unwrap_or_else(|| panic!("no tag row for {task}: {}", r["tags"]));
        assert!(row["percent"].as_f64().unwrap() > 1.0, "{row}");
    }
}

/// The task of a report's task table whose name ends with `name`.
fn task_named<'a>(t: &'a Value, name: &str) -> &'a Value {
    t["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"].as_str().unwrap().ends_with(name))
        .unwrap_or_else(|| panic!("no task {name}: {t:#}"))
}

#[test]
fn an_embassy_application_is_set_up_in_its_main_and_profiled_from_zero() {
    let copy = copy_crate("tests/crates/embassy");
    let dir = copy.path();
    let diff = init(dir, &[]);
    assert!(
        diff.contains(" async fn main(spawner: Spawner) {\n+    #[cfg(feature = \"sample\")]\n+    sampler_rt::start();"),
        "{diff}"
    );
    // The task statistics are turned on with the sampler.
    assert!(
        diff.contains("features = [\"embassy\"]")
            && diff.contains("\"dep:sampler-rt\", \"embassy-executor/trace\""),
        "{diff}"
    );
    let r = profile_against_exact(dir, &[], 3000);
    assert!(share(&r, "functions", "embassy_sensors::integrate") > 40.0);
    // The task table: the two tasks take turns, every poll timed and equal to QEMU's count of
    // it to the tick, and no poll is long.
    let t = &r["tasks"];
    let tick = t["tick"].as_f64().unwrap();
    let (a, b) = (task_named(t, "::integrator"), task_named(t, "::scaler"));
    assert!(
        (a["polls"].as_i64().unwrap() - b["polls"].as_i64().unwrap()).abs() <= 1,
        "{t:#}"
    );
    for k in [a, b] {
        let slack = k["polls"].as_f64().unwrap() * tick + 1.0;
        assert!(
            (k["busy"].as_f64().unwrap() - k["exact"]["busy"].as_f64().unwrap()).abs() <= slack,
            "{k:#}"
        );
    }
    assert!(
        !r["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["kind"] == "long-poll"),
        "{:#}",
        r["diagnostics"]
    );
    // The same built for ARMv6-M (Cortex-M0, whose hooks are code of their own: no Thumb-2),
    // run on the same core: the same table, to the tick of QEMU's count.
    let r = profile_against_exact(
        dir,
        &["--target", "thumbv6m-none-eabi", "--machine", "mps2-an385"],
        2000,
    );
    for name in ["::integrator", "::scaler"] {
        let k = task_named(&r["tasks"], name);
        assert_eq!(k["polls"], k["exact"]["polls"], "{k:#}");
        assert_eq!(k["wakes"], k["exact"]["wakes"], "{k:#}");
        let slack = k["polls"].as_f64().unwrap() * tick + 1.0;
        assert!(
            (k["busy"].as_f64().unwrap() - k["exact"]["busy"].as_f64().unwrap()).abs() <= slack,
            "{k:#}"
        );
    }
    // The crate's other binary runs no executor: sampler-rt's statistics, on for the whole
    // crate, keep nothing there, and nothing is said or done for Embassy tasks (no timer
    // taken to time polls, no table); it once got a note that its polls were counted.
    let all = [
        "--release",
        "--bin",
        "plain",
        "--samples",
        "500",
        "--format",
        "json",
    ];
    let out = cargo_sample_in_copy(dir, &all, &[]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("Embassy"), "{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert!(r.get("tasks").is_none(), "{}", r["tasks"]);
    assert!(
        share(&r, "functions", "plain::mix") > 90.0,
        "{}",
        r["functions"]
    );
    assert_eq!(r["timer"], "SysTick", "{}", r["timer"]);
}

/// The release profiles Embassy applications ship: each task is named by its
/// `#[embassy_executor::task]` function, never by a symbol the compiler made. Thin LTO at
/// opt-level 3 folds the tasks' pools into a `.L_MergedGlobals` block that starts at the first
/// pool's address (its symbol once named the task); the pools' exact polls are found all the
/// same.
#[test]
fn embassy_tasks_keep_their_names_under_lto_and_every_opt_level() {
    let copy = copy_crate("tests/crates/embassy");
    let dir = copy.path();
    init(dir, &[]);
    for (lto, opt) in [("thin", "3"), ("fat", "z")] {
        let env = [
            ("CARGO_PROFILE_RELEASE_LTO", lto),
            ("CARGO_PROFILE_RELEASE_OPT_LEVEL", opt),
        ];
        let args = ["--release", "--truth", "--format", "json", "-n", "1000"];
        let out = cargo_sample_in_copy(dir, &args, &env);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{lto} {opt}: {stderr}");
        assert!(!stdout.contains("MergedGlobals"), "{lto} {opt}: {stdout}");
        let r: Value = serde_json::from_str(&stdout).unwrap();
        let mut names: Vec<&str> = r["tasks"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["name"].as_str().unwrap())
            .collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "embassy_sensors::__embassy_main",
                "embassy_sensors::integrator",
                "embassy_sensors::scaler"
            ],
            "{lto} {opt}"
        );
        for name in ["::integrator", "::scaler"] {
            let k = task_named(&r["tasks"], name);
            assert_eq!(k["polls"], k["exact"]["polls"], "{lto} {opt}: {k:#}");
        }
        let tags: Vec<&str> = r["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert!(
            tags.contains(&"task embassy_sensors::integrator"),
            "{lto} {opt}: {tags:?}"
        );
    }
}

#[test]
fn a_hal_application_on_netduinoplus2_is_set_up_and_profiled_from_zero() {
    let copy = copy_crate("tests/crates/stm32-hal");
    let dir = copy.path();
    let diff = init(dir, &[]);
    assert!(diff.contains("+    sampler_rt::start();"), "{diff}");
    // The HAL's polled delay owns SysTick: a free STM32 timer paces the sampler, on QEMU's
    // 1 GHz timer clock (no clock mismatch with the exact count of the same run), and the
    // shares are within 3 sigma of it.
    let r = profile_against_exact(dir, &[], 3000);
    assert!(
        share(&r, "functions", "stm32_hal_app::crc") > 50.0,
        "{}",
        r["functions"]
    );
    assert!(
        !kinds(&r).contains(&"clock-mismatch".to_owned()),
        "{:#}",
        r["diagnostics"]
    );
    assert!(
        r["timer"].as_str().is_some_and(|t| t.contains("TIM")),
        "{}",
        r["timer"]
    );
}

#[test]
fn a_workspace_of_two_firmware_crates_is_set_up_one_crate_at_a_time() {
    let copy = copy_crate("tests/crates/workspace");
    let dir = copy.path();
    let before = snapshot(dir);
    let out = cargo_sample_in_copy(dir, &["init"], &[]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("choose the firmware crate with `-p`: blinky, meter"),
        "{stderr}"
    );
    assert_eq!(before, snapshot(dir), "nothing may change");
    let out = cargo_sample_in_copy(dir, &["init", "-p", "meter"], &[]);
    let (diff, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(suggested_command(&stderr).join(" "), "--release -p meter");
    assert!(
        diff.contains("meter/Cargo.toml") && diff.contains("meter/src/main.rs"),
        "{diff}"
    );
    assert!(!diff.contains("blinky"), "{diff}");
    let r = profile_against_exact(dir, &["-p", "meter"], 3000);
    assert!(share(&r, "functions", "meter::energy") > 10.0);
    // The other crate is still as it was.
    let blinky = std::fs::read_to_string(dir.join("blinky/Cargo.toml")).unwrap();
    assert!(!blinky.contains("sampler-rt"));
}

/// The command `init` ends with ("profile it with `...`"), as arguments of `cargo sample`.
fn suggested_command(stderr: &str) -> Vec<String> {
    let at = stderr
        .find("profile it with `")
        .unwrap_or_else(|| panic!("no command suggested:\n{stderr}"));
    let rest = &stderr[at + "profile it with `".len()..];
    let cmd = &rest[..rest.find('`').unwrap()];
    let cmd = cmd
        .strip_prefix("cargo sample ")
        .unwrap_or_else(|| panic!("not a cargo sample command: {cmd}"));
    cmd.split_whitespace().map(str::to_string).collect()
}

#[test]
fn init_names_the_command_that_profiles_the_example_it_set_up() {
    let copy = copy_crate("tests/crates/quickstart");
    let dir = copy.path();
    // An example that needs a feature of its own, beside the crate's binary.
    std::fs::create_dir_all(dir.join("examples")).unwrap();
    std::fs::copy(dir.join("src/main.rs"), dir.join("examples/alt.rs")).unwrap();
    let mut manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    manifest += "\n[[example]]\nname = \"alt\"\nrequired-features = [\"extra\"]\n\n\
                 [features]\nextra = []\n";
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    let out = cargo_sample_in_copy(dir, &["init", "--example", "alt"], &[]);
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let cmd = suggested_command(&stderr);
    assert_eq!(
        cmd.join(" "),
        "--release --example alt --features extra",
        "{stderr}"
    );
    // The command works as printed.
    let mut args: Vec<&str> = cmd.iter().map(String::as_str).collect();
    args.extend(["--samples", "500", "--format", "json"]);
    let out = cargo_sample_in_copy(dir, &args, &[]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert!(
        share(&r, "functions", "alt::sort") > 20.0,
        "{}",
        r["functions"]
    );
}

/// An RTIC crate that picks its backend with a feature of its own (as RTIC's examples crate
/// does: `thumbv7-backend = ["rtic/thumbv7-backend"]`) builds only with it: the command init
/// prints names it, and works as printed; init again says the crate is set up, with the same
/// command.
#[test]
fn init_names_the_feature_that_picks_rtics_backend() {
    let copy = copy_crate("tests/crates/rtic");
    let dir = copy.path();
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let manifest = manifest.replace(
        "rtic = { version = \"2\", features = [\"thumbv7-backend\"] }",
        "rtic = { version = \"2\" }",
    ) + "\n[features]\nthumbv7-backend = [\"rtic/thumbv7-backend\"]\n";
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    let out = cargo_sample_in_copy(dir, &["init"], &[]);
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let cmd = suggested_command(&stderr);
    assert_eq!(
        cmd.join(" "),
        "--release --features thumbv7-backend",
        "{stderr}"
    );
    let mut args: Vec<&str> = cmd.iter().map(String::as_str).collect();
    args.extend(["--samples", "300", "--format", "json"]);
    let out = cargo_sample_in_copy(dir, &args, &[]);
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let out = cargo_sample_in_copy(dir, &["init"], &[]);
    let (_, stderr) = text(&out);
    assert!(
        stderr.contains("already set up") && suggested_command(&stderr) == cmd,
        "{stderr}"
    );
}

/// A build that fails for good prints the compiler's error and cargo's, once, before the
/// verdict (they are held back while a retry could still succeed).
#[test]
fn a_firmware_that_does_not_compile_shows_the_compilers_error() {
    let copy = copy_crate("tests/crates/quickstart");
    let dir = copy.path();
    let main = dir.join("src/main.rs");
    let src = std::fs::read_to_string(&main).unwrap();
    std::fs::write(&main, src.replace("fn sort(", "fn sort(oops oops, ")).unwrap();
    let out = cargo_sample_in_copy(dir, &["--release", "--exact"], &[]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    let compiler = stderr
        .find("error: expected")
        .unwrap_or_else(|| panic!("{stderr}"));
    let cargo = stderr
        .find("could not compile")
        .unwrap_or_else(|| panic!("{stderr}"));
    let verdict = stderr
        .find("building `quickstart-app` failed")
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(compiler < cargo && cargo < verdict, "{stderr}");
    assert_eq!(stderr.matches("could not compile").count(), 1, "{stderr}");
}

#[test]
fn crates_init_cannot_handle_are_left_as_they_were_with_the_place_named() {
    let copy = copy_crate("tests/crates/quickstart");
    let dir = copy.path();
    // Two entry points in one file: init cannot know which runs.
    let main = dir.join("src/main.rs");
    let src = std::fs::read_to_string(&main).unwrap();
    let two = src.replace(
        "// The entry point need not be called `main`.",
        "#[entry]\nfn other() -> ! {\n    loop {}\n}\n",
    );
    std::fs::write(&main, &two).unwrap();
    let before = snapshot(dir);
    let out = cargo_sample_in_copy(dir, &["init"], &[]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(stderr.contains("nothing was changed"), "{stderr}");
    assert!(
        stderr.contains("src/main.rs: several entry points"),
        "{stderr}"
    );
    assert!(
        stderr.contains("`other` (line") && stderr.contains("`start` (line"),
        "{stderr}"
    );
    assert!(stderr.contains("sampler_rt::start();"), "{stderr}");
    assert_eq!(before, snapshot(dir));

    // A runtime that does not resolve: the edit is undone and the reason given.
    std::fs::write(&main, &src).unwrap();
    let before = snapshot(dir);
    let missing = dir.join("no-such-runtime");
    std::fs::create_dir(&missing).unwrap();
    std::fs::write(
        missing.join("Cargo.toml"),
        "[package]\nname = \"not-the-runtime\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    let out = cargo_sample_in_copy(
        dir,
        &["init", "--sampler-rt-path", missing.to_str().unwrap()],
        &[],
    );
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(stderr.contains("put back as they were"), "{stderr}");
    std::fs::remove_dir_all(&missing).unwrap();
    assert_eq!(before, snapshot(dir));
}

/// An entry init does not recognise: an `extern "C"` function that the image's own assembly
/// calls. Init writes the dependency and the feature all the same, names the function the
/// assembly can call and says where the calls go; `--entry NAME` then puts the call there, and
/// the crate profiles as any other.
#[test]
fn an_extern_c_entry_called_from_assembly_is_taken_by_name() {
    let copy = copy_crate("tests/crates/quickstart");
    let dir = copy.path();
    let main = dir.join("src/main.rs");
    let src = std::fs::read_to_string(&main).unwrap();
    let asm = src
        .replace("use cortex_m_rt::entry;\n", "use cortex_m_rt as _;\n")
        .replace(
            "// The entry point need not be called `main`.\n#[entry]\nfn start() -> ! {",
            "// cortex-m-rt's reset handler calls `main`, which is this image's own assembly.\n\
             core::arch::global_asm!(\".global main\", \".thumb_func\", \"main:\", \"b kmain\");\n\n\
             #[unsafe(no_mangle)]\npub extern \"C\" fn kmain() -> ! {",
        );
    assert_ne!(asm, src);
    std::fs::write(&main, &asm).unwrap();
    let out = cargo_sample_in_copy(dir, &["init"], &[]);
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("no entry point found"), "{stderr}");
    assert!(stderr.contains("`kmain` (line"), "{stderr}");
    assert!(stderr.contains("`--entry NAME`"), "{stderr}");
    assert!(
        stderr.contains("sampler_rt::start();") && stderr.contains("sampler_rt::flush();"),
        "{stderr}"
    );
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("sampler-rt = {"), "{manifest}");
    assert!(
        manifest.contains("sample = [\"dep:sampler-rt\"]"),
        "{manifest}"
    );
    assert_eq!(std::fs::read_to_string(&main).unwrap(), asm);

    let out = cargo_sample_in_copy(dir, &["init", "--entry", "nowhere"], &[]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(stderr.contains("no function `nowhere`"), "{stderr}");
    let diff = init(dir, &["--entry", "kmain"]);
    assert!(
        diff.contains("pub extern \"C\" fn kmain() -> ! {\n+    #[cfg(feature = \"sample\")]\n+    sampler_rt::start();"),
        "{diff}"
    );
    let r = profile_against_exact(dir, &[], 3000);
    assert!(share(&r, "functions", "quickstart_app::sort") > 20.0);
}

#[test]
fn an_explicit_runtime_replaces_the_one_a_set_up_crate_has() {
    let copy = copy_crate("tests/crates/quickstart");
    let dir = copy.path();
    // Set up the way an earlier version did: a version that does not resolve.
    let manifest = dir.join("Cargo.toml");
    let text0 = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text0.replace(
            "panic-halt = \"1.0.0\"\n",
            "panic-halt = \"1.0.0\"\nsampler-rt = { version = \"0.1\", optional = true }\n",
        ) + "\n[features]\nsample = [\"dep:sampler-rt\"]\n",
    )
    .unwrap();
    let rt = repo().join("sampler-rt").canonicalize().unwrap();
    let diff = init(dir, &["--sampler-rt-path", rt.to_str().unwrap()]);
    assert!(
        diff.contains("-sampler-rt = { version = \"0.1\", optional = true }"),
        "{diff}"
    );
    let now = std::fs::read_to_string(&manifest).unwrap();
    assert_eq!(runtime_path(dir, &now), rt, "{now}");
    assert!(!now.contains("version = \"0.1\""), "{now}");
}

/// The crate's runner read as cargo reads it, with what cargo-sample keeps and replaces, and
/// bad configuration named by file and key before anything is built.
#[test]
fn runners_and_bad_configuration_are_read_as_cargo_reads_them() {
    let copy = copy_crate("tests/crates/quickstart");
    let dir = copy.path();
    init(dir, &[]);
    let config = dir.join(".cargo/config.toml");
    let original = std::fs::read_to_string(&config).unwrap();
    let set_runner = |runner: &str| {
        let text = original.replace(
            "runner = \"qemu-system-arm -cpu cortex-m3 -machine lm3s6965evb -nographic -semihosting-config enable=on,target=native -kernel\"",
            &format!("runner = {runner:?}"),
        );
        assert_ne!(text, original);
        std::fs::write(&config, text).unwrap();
    };
    let fails = |args: &[&str]| {
        let out = cargo_sample_in_copy(dir, args, &[]);
        assert!(!out.status.success());
        let (_, err) = text(&out);
        assert!(
            !err.contains("Compiling quickstart-app"),
            "refused before the build:\n{err}"
        );
        err
    };
    let shown = config.display().to_string();

    // A runner that is neither QEMU nor probe-rs.
    set_runner("arm-none-eabi-gdb -q -x openocd.gdb");
    let err = fails(&["--release"]);
    assert!(err.contains("the runner `arm-none-eabi-gdb`"), "{err}");
    assert!(
        err.contains(&format!("`target.thumbv7m-none-eabi.runner` in {shown}")),
        "{err}"
    );
    // A machine cargo-sample does not know.
    set_runner("qemu-system-arm -machine foo-board -kernel");
    let err = fails(&["--release"]);
    assert!(err.contains("QEMU machine `foo-board`"), "{err}");
    assert!(err.contains(&shown), "{err}");
    // Invalid TOML.
    std::fs::write(&config, "[build\ntarget = \"thumbv7m-none-eabi\"\n").unwrap();
    let err = fails(&["--release"]);
    assert!(err.contains(&shown), "{err}");

    // A runner's own options reach QEMU; the ones cargo-sample owns are replaced and said so;
    // a `--config` value on the command line wins over the file.
    std::fs::write(&config, &original).unwrap();
    let out = cargo_sample_in_copy(
        dir,
        &[
            "--release",
            "--samples",
            "200",
            "--format",
            "json",
            "--config",
            "target.thumbv7m-none-eabi.runner=\"qemu-system-arm -machine lm3s6965evb -no-reboot -icount shift=0 -nographic -kernel\"",
        ],
        &[],
    );
    let (_, err) = text(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("the runner's `-icount shift=0` is replaced by cargo-sample's own"),
        "{err}"
    );
    assert!(err.contains("kept: `-no-reboot`"), "{err}");
    let run = run_dir_of(&out.stderr);
    let meta: Value =
        serde_json::from_slice(&std::fs::read(run.join("run.json")).unwrap()).unwrap();
    let cmd: Vec<&str> = meta["qemu_command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert!(cmd.contains(&"-no-reboot"), "{cmd:?}");
    assert_eq!(
        cmd.iter().filter(|w| **w == "-icount").count(),
        1,
        "{cmd:?}"
    );

    // A shell script around QEMU.
    let script = dir.join("run-qemu.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\n# the board's emulator\nexec qemu-system-arm -cpu cortex-m3 -machine lm3s6965evb -nographic -semihosting-config enable=on,target=native -kernel \"$@\"\n",
    )
    .unwrap();
    set_runner(script.to_str().unwrap());
    let out = cargo_sample_in_copy(
        dir,
        &["--release", "--samples", "200", "--format", "json"],
        &[],
    );
    let (stdout, err) = text(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("the runner is a script"), "{err}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["machine"], "lm3s6965evb (QEMU)");
    assert!(!err.contains("unoptimised"), "{err}");
    // Without `--release`, the profile of a debug build comes with a word about it.
    let out = cargo_sample_in_copy(dir, &["--samples", "100", "--format", "json"], &[]);
    let (_, err) = text(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("profiling an unoptimised build (the `dev` profile)"),
        "{err}"
    );
}

/// The directory the manifest's `sampler-rt` dependency points at, resolved as cargo resolves
/// it: `init` writes a relative path when the crate and the runtime share a parent directory,
/// an absolute one otherwise.
fn runtime_path(dir: &Path, manifest: &str) -> std::path::PathBuf {
    let line = manifest
        .lines()
        .find(|l| l.starts_with("sampler-rt = "))
        .unwrap_or_else(|| panic!("no sampler-rt dependency:\n{manifest}"));
    let at = line.find("path = \"").expect("a path dependency") + "path = \"".len();
    let path = &line[at..at + line[at..].find('"').unwrap()];
    dir.join(path)
        .canonicalize()
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The benchmark template in a crate `cargo sample init` set up, as its comment says to: it
/// builds and runs with `cargo sample bench`, every iteration counted, and an iteration of the
/// checksum of 512 bytes is its call's instructions and the few around it (the crate's own
/// exact counts of the same run, read here).
#[test]
fn the_benchmark_template_runs_in_a_crate_set_up_by_init() {
    let copy = copy_crate("tests/crates/quickstart");
    let dir = copy.path();
    let out = cargo_sample_in_copy(dir, &["init"], &[]);
    assert!(out.status.success(), "{}", text(&out).1);
    std::fs::create_dir_all(dir.join("src/bin")).unwrap();
    std::fs::copy(
        repo().join("templates/bench/bench.rs"),
        dir.join("src/bin/bench.rs"),
    )
    .unwrap();
    let mut manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    manifest += "\n[[bin]]\nname = \"bench\"\nrequired-features = [\"sample\"]\n";
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    let out = cargo_sample_in_copy(
        dir,
        &["bench", "--release", "--bin", "bench", "--format", "json"],
        &[],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    let regions = r["laps"]["regions"].as_array().unwrap();
    assert_eq!(regions.len(), 2, "{regions:?}");
    let whole = regions
        .iter()
        .find(|g| g["name"] == "checksum of 512 bytes")
        .unwrap();
    assert_eq!(whole["exact"]["laps"], 100);
    assert_eq!(whole["exact"]["min"], whole["exact"]["max"]);
    // The checksum's own instructions a call, from the run's exact counts and ELF.
    let run = run_dir_of(stderr.as_bytes());
    let elf = std::fs::read(run.join("firmware.elf")).unwrap();
    use object::{Object, ObjectSymbol};
    let file = object::File::parse(&*elf).unwrap();
    let sym = file
        .symbols()
        .find(|s| s.name().is_ok_and(|n| n.contains("checksum")) && s.size() > 0)
        .unwrap();
    let (start, end) = (sym.address() & !1, (sym.address() & !1) + sym.size());
    let counts = std::fs::read(run.join("exact.counts")).unwrap();
    let pairs: Vec<(u64, u64)> = counts[8..]
        .chunks_exact(16)
        .map(|c| {
            (
                u64::from_le_bytes(c[..8].try_into().unwrap()),
                u64::from_le_bytes(c[8..].try_into().unwrap()),
            )
        })
        .collect();
    let total: u64 = pairs
        .iter()
        .filter(|p| (start..end).contains(&p.0))
        .map(|p| p.1)
        .sum();
    let calls = pairs.iter().find(|p| p.0 == start).unwrap().1;
    assert_eq!(calls, 120, "100 + 20 iterations");
    // Both benchmarks call it; the fixed one's calls are 512-byte ones.
    let iteration = whole["exact"]["median"].as_f64().unwrap();
    let fresh = regions
        .iter()
        .find(|g| g["name"] == "checksum of a fresh buffer")
        .unwrap();
    let fresh_mean = fresh["exact"]["mean"].as_f64().unwrap();
    // 100 x (512-byte call) + 20 x (64-byte call) = total, within the few instructions each
    // iteration adds around the call.
    let around = (100.0 * iteration + 20.0 * fresh_mean - total as f64) / 120.0;
    assert!(
        (0.0..=8.0).contains(&around),
        "{around} instructions an iteration beside the checksum's {total} over {calls} calls"
    );
}
