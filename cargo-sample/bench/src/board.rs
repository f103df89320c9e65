//! A board run's time through the emulated probe: attach, download, capture.

use crate::*;

/// A board run through probe-rs and the emulated probe, by method: where its time goes.
#[derive(Debug, Serialize)]
pub struct BoardTiming {
    pub method: String,
    pub samples: u64,
    pub attach: Timing,
    pub download: Timing,
    pub capture: Timing,
    /// Samples delivered per second of capture (median run).
    pub samples_per_s: f64,
}

/// `cargo sample --chip mps2-an385 --probe qemu` on hot-loops, three runs per method.
pub(crate) fn board_timings(manifest: &Path) -> Result<Vec<BoardTiming>> {
    let mut out = Vec::new();
    for (method, n) in [("timer", "20000"), ("pcsr", "5000"), ("dwt", "20000")] {
        let (mut a, mut d, mut c, mut samples) = (Vec::new(), Vec::new(), Vec::new(), 0);
        for _ in 0..3 {
            let cli = release_args(
                manifest,
                &[
                    "--bin",
                    "hot-loops",
                    "--chip",
                    "mps2-an385",
                    "--probe",
                    "qemu",
                    "--method",
                    method,
                    "-n",
                    n,
                ],
            )?;
            let dir = sample::capture(&cli.run)?;
            let meta = runs::load_meta(&dir)?;
            let t = meta
                .board_seconds
                .context("a board run without its timings")?;
            a.push(t.attach);
            d.push(t.download);
            c.push(t.capture);
            let dump = cargo_sample::dump::decode(&std::fs::read(dir.join(runs::DUMP))?)?;
            samples = dump.pcs.len() as u64;
        }
        let capture = Timing::of(c);
        out.push(BoardTiming {
            method: method.into(),
            samples,
            samples_per_s: samples as f64 / capture.median_s,
            attach: Timing::of(a),
            download: Timing::of(d),
            capture,
        });
    }
    Ok(out)
}

pub(crate) fn print_board(b: &[BoardTiming]) {
    println!(
        "board runs through probe-rs and the emulated probe (`--chip mps2-an385 --probe qemu`, hot-loops), medians of 3:"
    );
    println!(
        "{:<7} {:>8} {:>9} {:>10} {:>9} {:>12}",
        "method", "samples", "attach s", "download s", "capture s", "samples/s"
    );
    for t in b {
        println!(
            "{:<7} {:>8} {:>9.3} {:>10.3} {:>9.3} {:>12.0}",
            t.method,
            t.samples,
            t.attach.median_s,
            t.download.median_s,
            t.capture.median_s,
            t.samples_per_s
        );
    }
}
