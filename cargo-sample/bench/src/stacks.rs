//! `--stacks`: the handler's cost with stack windows, and the host's cost of a million stack
//! samples (unwinding, the report, the HTML page).

use crate::*;

/// A real run of `call-graph` with stacks, its samples repeated to a million, saved as a run
/// beside it; its directory and sample count.
pub(crate) fn million_stack_samples(manifest: &Path, bin: &str) -> Result<(PathBuf, usize)> {
    let cli = release_args(manifest, &["--bin", bin, "--samples", "10000", "--stacks"])?;
    let real = sample::capture(&cli.run)?;
    let dump = cargo_sample::dump::decode(&std::fs::read(real.join(runs::DUMP))?)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let n = 1_000_000usize;
    let mut big = cargo_sample::dump::Dump::of_samples(dump.info, 0, Vec::new(), Vec::new());
    for i in 0..n {
        let j = i % dump.pcs.len();
        big.pcs.push(dump.pcs[j]);
        big.tags.push(dump.tags[j]);
        big.stacks.push(dump.stacks[j].clone());
    }
    big.info.taken = n as u32;
    big.info.limit = n as u32;
    let dir = real.with_file_name(format!(
        "{}-stacks-{n}",
        real.file_name().unwrap_or_default().to_string_lossy()
    ));
    std::fs::create_dir_all(&dir)?;
    for f in [runs::ELF, runs::META] {
        std::fs::copy(real.join(f), dir.join(f))?;
    }
    runs::write_atomic(&dir.join(runs::DUMP), &cargo_sample::dump::encode(&big))?;
    Ok((dir, n))
}

/// The HTML report of a million samples with stacks: size, time to write, time to draw.
pub(crate) fn html_cost(manifest: &Path) -> Result<()> {
    // The real workload (core::fmt, sorting, CRC, soft-float): the most distinct stacks.
    let (dir, n) = million_stack_samples(manifest, "workload")?;
    let view = release_args(manifest, &["--format", "html", "--lines"])?
        .run
        .view;
    let page = dir.join("report.html");
    let t0 = std::time::Instant::now();
    let report = cargo_sample::report::load::load_report(
        &dir,
        cargo_sample::cmd::saved::build_options(&view),
    )?;
    let bytes = cargo_sample::report::html::html(&report)?;
    let made = t0.elapsed().as_secs_f64();
    std::fs::write(&page, &bytes)?;
    println!(
        "  {n} samples with stacks of `workload` ({} distinct stacks, {} distinct addresses): \
         report built and written as HTML in {made:.2} s, {:.0} KiB",
        report.inline_stacks.len(),
        report.distinct_pcs,
        bytes.len() as f64 / 1024.0
    );
    let chromium = Path::new("/usr/bin/chromium");
    if chromium.is_file() {
        let profile = tempfile::tempdir()?;
        let mut drawn = Vec::new();
        for _ in 0..3 {
            let out = std::process::Command::new(chromium)
                .args([
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--dump-dom",
                ])
                .arg(format!("--user-data-dir={}", profile.path().display()))
                .arg(format!("file://{}", page.canonicalize()?.display()))
                .output()?;
            let dom = String::from_utf8_lossy(&out.stdout);
            let ms = dom
                .split("data-drawn-ms=\"")
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .and_then(|v| v.parse::<f64>().ok())
                .context("Chromium did not draw the page (no data-drawn-ms in its DOM)")?;
            drawn.push(ms);
        }
        drawn.sort_by(f64::total_cmp);
        println!(
            "  headless Chromium: navigation to a drawn page in {:.0} ms (median of 3; min {:.0} ms)",
            drawn[1], drawn[0]
        );
    } else {
        println!("  (no /usr/bin/chromium: `tests/setup.sh --with-chromium` installs it)");
    }
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// Stack capture's cost on the target, by window size, and the host's unwinding throughput.
pub(crate) fn stack_costs(manifest: &Path) -> Result<()> {
    println!("stack capture (--stacks), exact in QEMU mps2-an385 with a random period:");
    let (plain, _, _) = measure(manifest, &[])?;
    println!(
        "  {:<26} {:>8.2} instructions/sample {:>5} bytes of ring a sample",
        "no stacks", plain, 4
    );
    for words in ["16", "32", "64"] {
        let (per, n, elf) = measure(manifest, &["--stacks", words, "--truth"])?;
        // The ring slot: header, window and 64 frame records.
        let bytes = 4 * (6 + words.parse::<u32>()? + 2 * 64);
        // The handler alone, from the exact counts of its two functions over the whole run
        // (the rest is the dump's CRC and the write of each full chunk).
        let dir = latest_run(manifest, "cost")?;
        let dump = cargo_sample::dump::decode(&std::fs::read(dir.join(runs::DUMP))?)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let sym =
            cargo_sample::image::symbolize::Symbolizer::new(&dir.join(runs::ELF), &elf, None)?;
        let handler: u64 = exact::parse(&std::fs::read(dir.join(exact::FILE))?)?
            .into_iter()
            .filter(|&(pc, _)| {
                matches!(
                    sym.function_of(pc as u64),
                    Some(f) if f.ends_with("sample_stack") || f.ends_with("sampler_rt_stack") || f == "sampler_rt_entry"
                )
            })
            .map(|x| x.1)
            .sum();
        let chunk = 10240 / (6 + words.parse::<u32>()? + 2 * 64);
        println!(
            "  {:<26} {:>8.2} instructions/sample {:>5} bytes of ring a sample ({n} samples); the \
             handler alone {:.2}, the rest the dump's CRC and write of each full chunk ({chunk} samples)",
            format!("stacks, {words}-word window"),
            per,
            bytes,
            handler as f64 / dump.info.taken.max(1) as f64
        );
    }
    // ARMv6-M: the handler alone (the entry, the variant that finds the frame again and the
    // entry writer), in the microbit example.
    let examples = manifest
        .parent()
        .and_then(Path::parent)
        .context("the scenarios crate is not in an examples folder")?;
    for c in handler_costs(
        &examples.join("microbit-m0/Cargo.toml"),
        &[("stacks, 32-word window", &["--stacks", "32"])],
        |short| {
            short == "sampler_rt_entry"
                || short.ends_with("sample_stack")
                || short == "sampler_rt_stack"
        },
    )? {
        println!(
            "  {:<26} {:>8.2} instructions/sample (Cortex-M0, microbit: the handler alone, {} samples)",
            c.name, c.instructions_per_sample, c.samples
        );
    }
    // ARMv8-A: the vectors' path and the entry writer, in the aarch64 example.
    for c in handler_costs(
        &examples.join("aarch64-pmu/Cargo.toml"),
        &[(
            "stacks, 32-word window",
            &["--bin", "calls", "--stacks", "32"],
        )],
        |short| short == "sampler_rt_vectors" || short == "sampler_rt_a64_stack",
    )? {
        println!(
            "  {:<26} {:>8.2} instructions/sample (ARMv8-A, virt: the handler alone, {} samples)",
            c.name, c.instructions_per_sample, c.samples
        );
    }
    // Host: a real run's stacks, repeated to a million samples, reported.
    let (dir, n) = million_stack_samples(manifest, "call-graph")?;
    let mut times = Vec::new();
    for _ in 0..3 {
        let t0 = std::time::Instant::now();
        let r = cargo_sample::report::load::load_report(
            &dir,
            cargo_sample::report::Options {
                callers: Some("leaf".into()),
                ..cargo_sample::report::Options::default()
            },
        )?;
        times.push(t0.elapsed().as_secs_f64());
        let u = r.unwinding.context("no unwinding in the report")?;
        if u.samples != n as u64 {
            bail!("{} of {n} stacks unwound", u.samples);
        }
    }
    times.sort_by(f64::total_cmp);
    println!(
        "  host: {n} samples with stacks loaded, unwound and reported (with --callers) in {:.2} s (median of 3; min {:.2} s)",
        times[1], times[0]
    );
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}
