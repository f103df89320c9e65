//! The sampler's ring read over the debug link while the firmware runs, with the firmware's own
//! RTT output passed through.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use probe_rs::Session;

use super::session::{Capture, Options, should_stop, spinner, start};
use crate::capture::live::Live;

pub(crate) fn capture_ring(session: &mut Session, opts: &Options, out: &mut Capture) -> Result<()> {
    let state = opts
        .state_addr
        .context("the firmware has no sampler state to read")?;
    let mut target = start(session)?;
    let started = Instant::now();
    let bar = spinner("waiting for sampler_rt::start()");
    let mut live: Option<Live> = None;
    let mut saved = Instant::now();
    let mut app_rtt = AppRtt::new(opts.rtt_addr, &opts.dir);
    loop {
        let l = match &mut live {
            Some(l) => l,
            None => match Live::attach(&mut target, state) {
                Ok(l) => live.insert(l),
                Err(_) if started.elapsed() < Duration::from_secs(10) => {
                    std::thread::sleep(opts.interval);
                    if should_stop(opts, started, out) {
                        break;
                    }
                    continue;
                }
                Err(e) => {
                    bar.finish_and_clear();
                    return Err(e.context(
                        "the sampler did not start within 10 s: does `main` call \
                         `sampler_rt::start()`?",
                    ));
                }
            },
        };
        l.poll(&mut target)?;
        app_rtt.forward(&mut target.core);
        bar.set_message(format!(
            "sampling on {}: {} samples, {} lost",
            opts.conn.chip,
            l.taken() - l.lost,
            l.lost
        ));
        if l.stopped() {
            l.finish(&mut target, opts.names)?;
            let _ = l.release(&mut target);
            break;
        }
        if should_stop(opts, started, out) {
            l.finish(&mut target, opts.names)?;
            break;
        }
        if saved.elapsed() >= Duration::from_secs(1) {
            // A crash of the host loses at most a second of samples (bins: as they are now).
            l.read_bins(&mut target)?;
            save_progress(&opts.dir, l);
            saved = Instant::now();
        }
        std::thread::sleep(opts.interval);
    }
    bar.finish_and_clear();
    out.live = live;
    Ok(())
}

/// The application's RTT channels, read beside the sampler's ring so that its `defmt-rtt` or
/// `rtt-target` output is not lost while cargo-sample holds the probe: each up channel's bytes
/// go to `rtt-N.bin` in the run directory (defmt frames stay binary: `defmt-print -e
/// firmware.elf < rtt-0.bin` decodes them). The sampler has no control block of its own, so
/// the two never compete for a channel.
pub(crate) struct AppRtt {
    addr: Option<u64>,
    rtt: Option<probe_rs::rtt::Rtt>,
    dir: PathBuf,
    tries: u32,
}

impl AppRtt {
    fn new(addr: Option<u64>, dir: &Path) -> AppRtt {
        AppRtt {
            addr,
            rtt: None,
            dir: dir.to_path_buf(),
            tries: 0,
        }
    }

    fn forward(&mut self, core: &mut probe_rs::Core<'_>) {
        let Some(addr) = self.addr else { return };
        if self.rtt.is_none() {
            // The application sets its control block up after reset; try for a while.
            if self.tries > 100 {
                return;
            }
            self.tries += 1;
            self.rtt =
                probe_rs::rtt::Rtt::attach_region(core, &probe_rs::rtt::ScanRegion::Exact(addr))
                    .ok();
        }
        let Some(rtt) = &mut self.rtt else { return };
        let mut buf = [0u8; 4096];
        for ch in rtt.up_channels().iter_mut() {
            let n = ch.number();
            if let Ok(k) = ch.read(core, &mut buf)
                && k > 0
            {
                use std::io::Write;
                if let Ok(mut f) = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(self.dir.join(format!("rtt-{n}.bin")))
                {
                    let _ = f.write_all(&buf[..k]);
                }
            }
        }
    }
}

/// Keep what arrived so far in the run directory.
pub(crate) fn save_progress(dir: &Path, l: &Live) {
    let d = l.to_dump((0, 0, 0), sampler_rt::wire::STOP_SNAPSHOT);
    let bytes = crate::dump::encode_samples(&d);
    let _ = crate::runs::write_atomic(&dir.join(crate::runs::DUMP), &bytes);
}
