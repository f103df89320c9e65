//! The sampler's ring read over the debug link while the firmware runs, with the firmware's own
//! RTT output passed through.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use probe_rs::Session;

use super::session::{Capture, CaptureSpec, should_stop, start};
use crate::capture::live::{AppRtt, Live, Reader, Step};
use crate::term::spinner;

/// Reads of the ring in a row that may fail before the capture ends.
const READ_ATTEMPTS: u32 = 3;

/// How long the sample count may stand still before the host looks at the core.
const STALL: Duration = Duration::from_secs(1);

pub(crate) fn capture_ring(
    session: &mut Session,
    opts: &CaptureSpec,
    out: &mut Capture,
) -> Result<()> {
    let state = opts
        .state_addr
        .context("the firmware has no sampler state to read")?;
    let mut target = start(session)?;
    let started = Instant::now();
    let bar = spinner("waiting for sampler_rt::start()");
    let mut saved = Instant::now();
    // The application's RTT channels (`defmt-rtt`, `rtt-target`), read beside the sampler's
    // ring so that its output is not lost while cargo-sample holds the probe: each up channel
    // goes to `rtt-N.bin` of the run directory. The sampler has no control block of its own.
    let app_rtt = opts
        .rtt_addr
        .and_then(|a| u32::try_from(a).ok())
        .map(|a| AppRtt::new(a, &opts.dir));
    let mut reader = Reader::new(state, opts.names, app_rtt);
    // When the count stops moving, where the core is says why (a fault handler, or code that
    // masks the sampler's interrupt for long).
    let mut last_taken = None;
    let mut moved = Instant::now();
    let mut failures = 0;
    let mut top =
        crate::capture::top::Top::new(opts.functions.clone()).with_tasks(opts.tasks.clone());
    let mut top_drawn = Instant::now();
    // How far the reader had got: a step that failed after some progress is no failure of
    // the link (a long backlog takes many reads, one of which may fault).
    let progress = |r: &Reader| r.live().map_or(0, |l| l.pcs.len() as u64 + l.lost);
    loop {
        let before = progress(&reader);
        let stepped = reader.step(&mut target);
        // The firmware's defmt log, as it arrives.
        for line in reader.take_log_lines() {
            crate::term::line_above(&bar, &line);
        }
        let step = match stepped {
            Ok(s) => {
                failures = 0;
                s
            }
            // A read that fails is tried again (probes see the odd WAIT or FAULT); a link
            // that keeps failing ends the capture with what was read.
            Err(e) => {
                failures = if progress(&reader) > before {
                    1
                } else {
                    failures + 1
                };
                if failures < READ_ATTEMPTS {
                    std::thread::sleep(opts.interval);
                    continue;
                }
                if reader.live_mut().is_none() {
                    bar.finish_and_clear();
                    return Err(e.context("reading the sampler through the probe"));
                }
                // The innermost cause says it (probe-rs wraps it in its access layers).
                let why = e.root_cause().to_string();
                out.link_error = Some(
                    why.strip_prefix("Another ARM error occurred: ")
                        .unwrap_or(&why)
                        .to_owned(),
                );
                break;
            }
        };
        match step {
            Step::Waiting(_) if started.elapsed() < Duration::from_secs(10) => {
                // A sampler about to start is looked for often, whatever the poll interval:
                // a short run may end before a long interval does.
                std::thread::sleep(opts.interval.min(Duration::from_millis(5)));
                if should_stop(opts, started, out) {
                    break;
                }
                continue;
            }
            Step::Waiting(e) => {
                bar.finish_and_clear();
                return Err(e.context(
                    "the sampler did not start within 10 s: does `main` call \
                     `sampler_rt::start()`?",
                ));
            }
            Step::Stopped => break,
            Step::Running => {}
        }
        let Some(l) = reader.live_mut() else { break };
        let taken = l.taken();
        if last_taken != Some(taken) {
            last_taken = Some(taken);
            moved = Instant::now();
        } else if moved.elapsed() >= STALL {
            moved = Instant::now();
            if let Ok(core) = target.core_state()
                && core.faulted()
            {
                out.core = Some(core);
                reader.finish(&mut target)?;
                break;
            }
        }
        // The top view, twice a second.
        if top_drawn.elapsed() >= Duration::from_millis(500) {
            top_drawn = Instant::now();
            bar.set_message(top.table(&format!("sampling on {}", opts.conn.chip), l));
        }
        if should_stop(opts, started, out) {
            reader.finish(&mut target)?;
            break;
        }
        if saved.elapsed() >= Duration::from_secs(1) {
            // A crash of the host loses at most a second of samples (bins: as they are now).
            l.read_bins(&mut target)?;
            save_progress(&opts.dir, l);
            saved = Instant::now();
        }
        reader.pause(&mut target, opts.interval);
    }
    bar.finish_and_clear();
    out.live = reader.into_live();
    Ok(())
}

/// Keep what arrived so far in the run directory.
pub(crate) fn save_progress(dir: &Path, l: &Live) {
    let d = l.to_dump(
        crate::dump::Fingerprint::default(),
        sampler_rt::wire::STOP_SNAPSHOT,
    );
    let bytes = crate::dump::encode(&d);
    let _ = crate::runs::write_atomic(&dir.join(crate::runs::DUMP), &bytes);
}
