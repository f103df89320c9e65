//! The host side: exact counting's overhead in QEMU, the pipeline from dump to report, ITM
//! decoding, dump transfer, end-to-end runs and live reading rates.

use crate::*;

/// Wall-clock times of repeated runs.
#[derive(Debug, Serialize)]
pub struct Timing {
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    pub runs: usize,
}

impl Timing {
    pub(crate) fn of(mut v: Vec<f64>) -> Timing {
        v.sort_by(f64::total_cmp);
        Timing {
            median_s: v[v.len() / 2],
            min_s: v[0],
            max_s: v[v.len() - 1],
            runs: v.len(),
        }
    }
}

/// What exact counting costs over a plain `-icount` QEMU run of the same image.
#[derive(Debug, Serialize)]
pub struct CountingCost {
    pub qemu: String,
    pub instructions: u64,
    pub plain: Timing,
    pub plugin: Timing,
    pub plugin_api: u32,
    /// Median plugin time over median plain time, minus one, in percent.
    pub plugin_overhead_percent: f64,
    /// The plugin following calls too (`--exact`'s call graph): time, and over plain QEMU.
    pub call_graph: Timing,
    pub call_graph_overhead_percent: f64,
    pub exec_log_instructions: u64,
    pub exec_log: Timing,
    /// Millions of guest instructions per second through the exec log.
    pub exec_log_mips: f64,
    pub plain_mips: f64,
}

/// Host time of one report, by stage, for a number of samples of one image.
#[derive(Debug, Serialize)]
pub struct PipelineTiming {
    pub firmware: String,
    /// Code and read-only data of the image, bytes.
    pub image_bytes: u64,
    pub samples: u64,
    /// Load the ELF and DWARF, decode the dump, check it, symbolize, aggregate, diagnose.
    pub load: Timing,
    /// Rendering each format, from the loaded report.
    pub formats: Vec<(String, Timing)>,
    /// Samples per second of load plus the text report.
    pub samples_per_second: f64,
}

/// ITM/SWO decoding speed, ours and pyOCD's on the same kind of stream.
#[derive(Debug, Serialize)]
pub struct ItmSpeed {
    pub bytes: u64,
    pub ours: Timing,
    pub ours_mb_per_s: f64,
    /// pyOCD's `SWOParser` (from `target/pyocd-venv`, when `tests/setup.sh --with-pyocd` made it).
    pub pyocd_bytes: u64,
    pub pyocd_mb_per_s: Option<f64>,
    pub ratio: Option<f64>,
}

/// Decode a synthetic SWO stream of 64 MiB (our decoder) and of 2 MiB (pyOCD's), made from
/// pseudo-random PCs.
pub(crate) fn itm_speed() -> Result<ItmSpeed> {
    let mut x = 0x2545_F491u32;
    let pcs: Vec<u32> = (0..12_000_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            0x0800_0000 + 2 * (x % 20_000)
        })
        .collect();
    let stream = cargo_sample::dump::itm::synthetic(&pcs, true);
    let mut times = Vec::new();
    for _ in 0..5 {
        let t0 = std::time::Instant::now();
        let mut n = 0u64;
        cargo_sample::dump::itm::Parser::new(false).feed(&stream, &mut |e| {
            if matches!(e, cargo_sample::dump::itm::Event::PcSample(_)) {
                n += 1;
            }
        });
        std::hint::black_box(n);
        times.push(t0.elapsed().as_secs_f64());
    }
    let ours = Timing::of(times);
    let ours_mb = stream.len() as f64 / ours.median_s / 1e6;
    let small = cargo_sample::dump::itm::synthetic(&pcs[..380_000], true);
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/pyocd-venv/bin/python");
    let pyocd_mb = if venv.is_file() {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("swo.bin");
        std::fs::write(&file, &small)?;
        let script = "import sys, time\nfrom pyocd.trace.swo import SWOParser\n\
                      class Core:\n    def exception_number_to_name(self, n): return str(n)\n\
                      class Sink:\n    def receive(self, e): pass\n\
                      data = open(sys.argv[1], 'rb').read()\np = SWOParser(Core(), Sink())\n\
                      t = time.perf_counter(); p.parse(data); print(time.perf_counter() - t)\n";
        let out = std::process::Command::new(&venv)
            .arg("-c")
            .arg(script)
            .arg(&file)
            .output()?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<f64>()
            .ok()
            .map(|secs| small.len() as f64 / secs / 1e6)
    } else {
        None
    };
    Ok(ItmSpeed {
        bytes: stream.len() as u64,
        ours,
        ours_mb_per_s: ours_mb,
        pyocd_bytes: small.len() as u64,
        pyocd_mb_per_s: pyocd_mb,
        ratio: pyocd_mb.map(|p| ours_mb / p),
    })
}

/// Make `n` samples drawn from the exact per-address counts of a run (xorshift, fixed seed),
/// as a run directory beside it whose dump the report reads as any other.
pub(crate) fn synthetic_run(real: &Path, n: u64) -> Result<PathBuf> {
    let counts = exact::parse(&std::fs::read(real.join(exact::FILE))?)?;
    let elf = std::fs::read(real.join(runs::ELF))?;
    let sym = cargo_sample::image::symbolize::Symbolizer::new(&real.join(runs::ELF), &elf, None)?;
    let counts: Vec<(u32, u64)> = counts
        .into_iter()
        .filter(|&(pc, _)| !sym.is_sampler(pc as u64))
        .collect();
    let mut cumulative = Vec::with_capacity(counts.len());
    let mut total = 0u64;
    for &(_, c) in &counts {
        total += c;
        cumulative.push(total);
    }
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let pcs: Vec<u32> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let r = x % total;
            counts[cumulative.partition_point(|&c| c <= r)].0
        })
        .collect();
    let dump = cargo_sample::dump::decode(&std::fs::read(real.join(runs::DUMP))?)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut info = dump.info;
    info.taken = n as u32;
    info.limit = n as u32;
    let dir = real.with_file_name(format!(
        "{}-synthetic-{n}",
        real.file_name().unwrap_or_default().to_string_lossy()
    ));
    std::fs::create_dir_all(&dir)?;
    for f in [runs::ELF, runs::META] {
        std::fs::copy(real.join(f), dir.join(f))?;
    }
    let mut meta = runs::load_meta(&dir)?;
    meta.requested_samples = n as u32;
    runs::save_meta(&dir, &meta)?;
    runs::write_atomic(
        &dir.join(runs::DUMP),
        &cargo_sample::dump::encode(&cargo_sample::dump::Dump::of_samples(
            info,
            0,
            pcs,
            Vec::new(),
        )),
    )?;
    Ok(dir)
}

/// Bytes the image puts in flash for code and constants: allocated, read-only sections.
pub(crate) fn image_bytes(elf: &[u8]) -> u64 {
    use object::ObjectSection;
    let Ok(f) = object::File::parse(elf) else {
        return 0;
    };
    f.sections()
        .filter(|s| {
            matches!(s.flags(), object::SectionFlags::Elf { sh_flags, .. }
                if sh_flags.0 & object::elf::SHF_ALLOC.0 != 0
                    && sh_flags.0 & object::elf::SHF_WRITE.0 == 0)
                && s.kind() != object::SectionKind::UninitializedData
        })
        .map(|s| s.size())
        .sum()
}

/// Time the report of `n` synthetic samples of `bin`, stage by stage.
pub(crate) fn pipeline(manifest: &Path, bin: &str, sizes: &[u64]) -> Result<Vec<PipelineTiming>> {
    let cli = release_args(manifest, &["--bin", bin, "--samples", "2000", "--truth"])?;
    let real = sample::capture(&cli.run)?;
    let elf = std::fs::read(real.join(runs::ELF))?;
    let mut out = Vec::new();
    for &n in sizes {
        let dir = synthetic_run(&real, n)?;
        let reps = if n >= 10_000_000 { 1 } else { 3 };
        let mut load = Vec::new();
        let mut report = None;
        for _ in 0..reps {
            let t0 = std::time::Instant::now();
            let r = cargo_sample::report::load::load_report(
                &dir,
                cargo_sample::report::Options::default(),
            )?;
            load.push(t0.elapsed().as_secs_f64());
            report = Some(r);
        }
        let report = report.context("no report")?;
        let mut formats = Vec::new();
        let text_opts = cargo_sample::report::text::Options {
            lines: true,
            tree: true,
            top: 20,
            min_percent: 0.0,
        };
        for name in ["text", "json", "folded", "svg", "pprof"] {
            let mut times = Vec::new();
            for _ in 0..reps {
                let t0 = std::time::Instant::now();
                let bytes = match name {
                    "text" => cargo_sample::report::text::render(&report, text_opts).len(),
                    "json" => serde_json::to_vec(&report)?.len(),
                    "folded" => cargo_sample::report::formats::folded(&report).len(),
                    "svg" => cargo_sample::report::formats::svg(&report)?.len(),
                    _ => cargo_sample::report::formats::pprof(&report)?.len(),
                };
                std::hint::black_box(bytes);
                times.push(t0.elapsed().as_secs_f64());
            }
            formats.push((name.to_owned(), Timing::of(times)));
        }
        let load = Timing::of(load);
        let text = formats[0].1.median_s;
        out.push(PipelineTiming {
            firmware: bin.to_owned(),
            image_bytes: image_bytes(&elf),
            samples: n,
            samples_per_second: n as f64 / (load.median_s + text),
            load,
            formats,
        });
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(out)
}

/// Run QEMU on a run directory's image as `cargo sample` does; returns the wall time and the
/// counts when counting.
pub(crate) fn time_qemu(
    qemu: &Path,
    meta: &runs::RunMeta,
    kernel: &Path,
    counting: Option<&Counting>,
    graph: bool,
) -> Result<(f64, Option<Counts>)> {
    let work = tempfile::tempdir()?;
    let mut cmd = std::process::Command::new(qemu);
    cmd.current_dir(work.path())
        .args(["-machine", &meta.machine, "-cpu", &meta.cpu])
        .args(["-display", "none", "-serial", "null", "-monitor", "none"])
        .args(["-semihosting-config", "enable=on,target=native"])
        .arg("-icount")
        .arg(format!("shift={}", meta.icount_shift))
        .arg("-kernel")
        .arg(kernel)
        .stdout(std::process::Stdio::null());
    let counts = work.path().join("counts.bin");
    let mut log = None;
    match counting {
        Some(Counting::Plugin { path, .. }) => {
            let graph = if graph {
                format!(",graph={}", work.path().join("graph.bin").display())
            } else {
                String::new()
            };
            cmd.arg("-plugin").arg(format!(
                "{},out={}{graph}",
                path.display(),
                counts.display()
            ));
            cmd.stderr(std::process::Stdio::null());
        }
        Some(Counting::ExecLog { one_insn_flag }) => {
            cmd.args(one_insn_flag).args(["-d", "exec,nochain"]);
            cmd.stderr(std::process::Stdio::piped());
            log = Some(ExecLog::default());
        }
        None => {
            cmd.stderr(std::process::Stdio::null());
        }
    }
    let t0 = std::time::Instant::now();
    let mut child = cmd.spawn().context("starting QEMU")?;
    if let (Some(log), Some(err)) = (log.as_mut(), child.stderr.take()) {
        use std::io::BufRead;
        let mut r = std::io::BufReader::with_capacity(1 << 20, err);
        let mut line = Vec::new();
        while r.read_until(b'\n', &mut line)? > 0 {
            log.line(line.strip_suffix(b"\n").unwrap_or(&line));
            line.clear();
        }
    }
    let status = child.wait()?;
    let wall = t0.elapsed().as_secs_f64();
    if !status.success() {
        bail!("QEMU failed ({status}) on {}", kernel.display());
    }
    let counts = match (log, counting) {
        (Some(l), _) => Some(l.counts()),
        (None, Some(_)) => Some(exact::parse(&std::fs::read(&counts)?)?),
        (None, None) => None,
    };
    Ok((wall, counts))
}

/// Plugin overhead over plain QEMU on hot-loops (10 000 samples, about 10^8 instructions),
/// runs interleaved so both see the same machine; the exec log on a shorter run.
pub(crate) fn counting_cost(manifest: &Path) -> Result<CountingCost> {
    let sampled = |n: &str| -> Result<PathBuf> {
        let cli = release_args(manifest, &["--bin", "hot-loops", "--samples", n])?;
        sample::capture(&cli.run)
    };
    let dir = sampled("10000")?;
    let meta = runs::load_meta(&dir)?;
    let qemu = meta
        .qemu_command
        .first()
        .map(PathBuf::from)
        .context("the run recorded no QEMU command")?;
    let own = dir
        .parent()
        .and_then(Path::parent)
        .context("run directory outside cargo-sample's")?;
    let plugin = cargo_sample::cmd::exact::choose_counting(TruthMethod::Plugin, &qemu, own)?;
    let api = match &plugin {
        Counting::Plugin { api, .. } => api.number(),
        Counting::ExecLog { .. } => 0,
    };
    let kernel = dir.join(runs::LOADED_ELF);
    let (mut plain, mut with, mut graph) = (Vec::new(), Vec::new(), Vec::new());
    let mut instructions = 0;
    for _ in 0..5 {
        plain.push(time_qemu(&qemu, &meta, &kernel, None, false)?.0);
        let (t, counts) = time_qemu(&qemu, &meta, &kernel, Some(&plugin), false)?;
        with.push(t);
        instructions = counts.unwrap_or_default().iter().map(|c| c.1).sum();
        graph.push(time_qemu(&qemu, &meta, &kernel, Some(&plugin), true)?.0);
    }
    let short = sampled("300")?;
    let log = cargo_sample::cmd::exact::choose_counting(TruthMethod::ExecLog, &qemu, own)?;
    let mut log_times = Vec::new();
    let mut log_instructions = 0;
    for _ in 0..3 {
        let (t, counts) = time_qemu(
            &qemu,
            &meta,
            &short.join(runs::LOADED_ELF),
            Some(&log),
            false,
        )?;
        log_times.push(t);
        log_instructions = counts.unwrap_or_default().iter().map(|c| c.1).sum();
    }
    let plain = Timing::of(plain);
    let plugin_t = Timing::of(with);
    let graph_t = Timing::of(graph);
    let exec_log = Timing::of(log_times);
    Ok(CountingCost {
        qemu: String::from_utf8_lossy(
            &std::process::Command::new(&qemu)
                .arg("--version")
                .output()?
                .stdout,
        )
        .lines()
        .next()
        .unwrap_or("")
        .to_owned(),
        instructions,
        plugin_overhead_percent: 100.0 * (plugin_t.median_s / plain.median_s - 1.0),
        call_graph_overhead_percent: 100.0 * (graph_t.median_s / plain.median_s - 1.0),
        call_graph: graph_t,
        plain_mips: instructions as f64 / plain.median_s / 1e6,
        plain,
        plugin: plugin_t,
        plugin_api: api,
        exec_log_mips: log_instructions as f64 / exec_log.median_s / 1e6,
        exec_log_instructions: log_instructions,
        exec_log,
    })
}

/// The semihosting sink streaming a large dump: bytes over QEMU's wall time (emulation of the
/// program included, so a lower bound on the transfer itself).
#[derive(Debug, Serialize)]
pub struct DumpTransfer {
    pub samples: u64,
    pub bytes: u64,
    pub wall: Timing,
    pub mb_per_s: f64,
}

pub(crate) fn dump_transfer(manifest: &Path) -> Result<DumpTransfer> {
    let mut walls = Vec::new();
    let mut bytes = 0;
    for _ in 0..3 {
        let cli = release_args(
            manifest,
            &[
                "--bin",
                "hot-loops",
                "--samples",
                "1000000",
                "--period",
                "64ticks",
            ],
        )?;
        let dir = sample::capture(&cli.run)?;
        walls.push(runs::load_meta(&dir)?.wall_seconds);
        bytes = std::fs::metadata(dir.join(runs::DUMP))?.len();
        let d = cargo_sample::report::load::load_dump(&dir)?;
        if d.pcs.len() != 1_000_000 || d.info.taken != 1_000_000 {
            bail!(
                "the streamed dump holds {} of {} samples",
                d.pcs.len(),
                d.info.taken
            );
        }
    }
    let wall = Timing::of(walls);
    Ok(DumpTransfer {
        samples: 1_000_000,
        bytes,
        mb_per_s: bytes as f64 / 1e6 / wall.median_s,
        wall,
    })
}

/// A whole `cargo sample` of the bundled example, split into its parts.
#[derive(Debug, Serialize)]
pub struct EndToEnd {
    pub build: Timing,
    pub run: Timing,
    pub report: Timing,
    pub total: Timing,
}

pub(crate) fn end_to_end(manifest: &Path) -> Result<EndToEnd> {
    let (mut build, mut qemu, mut report, mut total) = (vec![], vec![], vec![], vec![]);
    for _ in 0..5 {
        let cli = release_args(manifest, &["--bin", "hot-loops"])?;
        let t0 = std::time::Instant::now();
        // The build step alone (cached, as in everyday use), then the whole capture.
        let p = cargo_sample::project::discover(&cargo_sample::project::Selection::from(
            &cli.run.cargo,
        ))?;
        cargo_sample::project::firmware::build(
            &p,
            &cargo_sample::project::Selection::from(&cli.run.cargo),
            true,
            &[],
        )?;
        let b = t0.elapsed().as_secs_f64();
        let t1 = std::time::Instant::now();
        let dir = sample::capture(&cli.run)?;
        let captured = t1.elapsed().as_secs_f64();
        let t2 = std::time::Instant::now();
        let r = cargo_sample::report::load::load_report(
            &dir,
            cargo_sample::report::Options::default(),
        )?;
        let _ = cargo_sample::report::text::render(
            &r,
            cargo_sample::report::text::Options {
                lines: false,
                tree: false,
                top: 20,
                min_percent: 0.0,
            },
        );
        let rep = t2.elapsed().as_secs_f64();
        let meta = runs::load_meta(&dir)?;
        build.push(b);
        qemu.push(meta.wall_seconds);
        report.push(rep);
        total.push(captured + rep);
    }
    Ok(EndToEnd {
        build: Timing::of(build),
        run: Timing::of(qemu),
        report: Timing::of(report),
        total: Timing::of(total),
    })
}

/// One live capture at a sampling period: what the host read, and how fast.
#[derive(Debug, Serialize)]
pub struct LiveRate {
    pub period_instructions: f64,
    pub taken: u64,
    pub lost: u64,
    pub wall_s: f64,
    /// Samples delivered per second of host time.
    pub delivered_per_s: f64,
    /// Bytes of ring read per second of host time (4 a sample).
    pub bytes_per_s: f64,
}

/// Live capture through QEMU's monitor at shorter and shorter periods: where samples start to
/// be lost (the host reads every 10 ms; the ring holds 10 240 samples).
pub(crate) fn live_rates(manifest: &Path) -> Result<Vec<LiveRate>> {
    let mut out = Vec::new();
    for period in ["16000ticks", "1600ticks", "400ticks", "160ticks", "64ticks"] {
        let cli = release_args(
            manifest,
            &[
                "--bin",
                "hot-loops",
                "--live",
                "--samples",
                "200000",
                "--period",
                period,
            ],
        )?;
        let started = std::time::Instant::now();
        let dir = sample::capture(&cli.run)?;
        let wall = started.elapsed().as_secs_f64();
        let d = cargo_sample::report::load::load_dump(&dir)?;
        let meta = runs::load_meta(&dir)?;
        let delivered = d.pcs.len() as f64;
        out.push(LiveRate {
            period_instructions: (d.info.reload as f64 + 1.0 + d.info.jitter_mask as f64 / 2.0)
                * meta.units_per_tick,
            taken: d.info.taken as u64,
            lost: d.info.lost as u64,
            wall_s: wall,
            delivered_per_s: delivered / wall,
            bytes_per_s: delivered * 4.0 / wall,
        });
    }
    Ok(out)
}
