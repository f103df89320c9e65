//! A run directory's pieces: its dump (as far as it goes), the check that the ELF made it,
//! and the facts a report states from the run's metadata.

use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use sampler_rt::wire;

use crate::dump::{self, Dump};
use crate::image::elf;
use crate::report::{self, Facts};
use crate::runs::{self, RunMeta};
use crate::term;

/// Everything the report needs besides the dump and the ELF.
pub fn facts_of(meta: &RunMeta, dump: &Dump) -> Facts {
    let i = &dump.info;
    let period_ticks = i.reload as f64 + 1.0 + i.jitter_mask as f64 / 2.0;
    // A timer the firmware drives ticks at its own clock (0: not given): instructions (QEMU) or
    // core cycles (a board with `--clock`) per tick follow from it.
    let (timer_hz, units_per_tick) = if i.timer == wire::TIMER_CUSTOM {
        let hz = u64::from(i.timer_hz);
        // Not given: taken as the core clock's, and the header says so.
        let per_tick = match (hz, &meta.board) {
            (0, _) => meta.units_per_tick,
            (hz, None) => 1e9 / hz as f64 / f64::from(1u32 << meta.icount_shift.min(20)),
            (hz, Some(_)) if meta.timer_hz > 0 => meta.timer_hz as f64 / hz as f64,
            (_, Some(_)) => 1.0,
        };
        (hz, per_tick)
    } else {
        (meta.timer_hz, meta.units_per_tick)
    };
    let kept = match &dump.hist {
        Some(h) => h.total() as u32,
        None => dump.pcs.len() as u32,
    };
    let overwritten = if dump.hist.is_some() {
        0
    } else {
        // Samples lost on the way (a live capture that fell behind) are not overwritten ones.
        i.taken.saturating_sub(kept).saturating_sub(i.lost)
    };
    Facts {
        firmware: meta.target_name.clone(),
        machine: match &meta.board {
            Some(how) => format!("{} (board, {how})", meta.machine),
            None => format!("{} (QEMU)", meta.machine),
        },
        unit: meta.unit.clone(),
        on_events: i.timer == wire::TIMER_PMU && meta.timer_hz == 0,
        foreign_interrupts: i.foreign,
        timer: match i.timer {
            wire::TIMER_CUSTOM => "the firmware's timer".into(),
            _ if meta.pacer.is_some() => meta.pacer.clone().unwrap_or_default(),
            wire::TIMER_STM32 => "STM32 timer".into(),
            wire::TIMER_CMSDK => "CMSDK timer".into(),
            wire::TIMER_GPTM => "general-purpose timer".into(),
            wire::TIMER_NRF => "TIMER".into(),
            wire::TIMER_DWT => "DWT".into(),
            wire::TIMER_GENERIC => "generic timer".into(),
            // Only the cycle counter has a rate.
            wire::TIMER_PMU if meta.timer_hz > 0 => "PMU cycle counter".into(),
            wire::TIMER_PMU => "PMU event counter".into(),
            wire::TIMER_PCSR => "DWT_PCSR polled by the host".into(),
            _ => "SysTick".into(),
        },
        timer_hz,
        period_ticks,
        period_units: period_ticks * units_per_tick,
        jitter_ticks: if i.jitter_mask == 0 {
            0
        } else {
            i.jitter_mask + 1
        },
        priority: i.priority,
        taken: i.taken,
        lost: i.lost,
        overwritten,
        requested: meta.requested_samples,
        stop: report::stop_reason(i.stop).into(),
        source: meta.source.unwrap_or(runs::Source::Dump),
        duration_units: i.taken as f64 * period_ticks * units_per_tick,
    }
}

/// Load a dump from a run directory: the firmware's own, else a snapshot saved beside it.
pub fn load_dump(dir: &Path) -> Result<Dump> {
    let path = dir.join(runs::DUMP);
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let (mut d, err) = dump::decode_partial(&bytes);
    match err {
        None => Ok(d),
        Some(dump::DumpError::Truncated { at }) if !d.pcs.is_empty() => {
            term::warn(format!(
                "the dump was cut short after {at} bytes; reporting the {} samples before the \
                 cut. A firmware that ends by its own means (semihosting's `debug::exit`, \
                 `panic-semihosting`) without `sampler_rt::flush()` (or `sampler_rt::exit`) \
                 leaves its last samples unsent",
                d.pcs.len()
            ));
            // The INFO that came first was written before sampling began: the samples that
            // arrived were taken at least.
            let arrived = d.first_seq.saturating_add(d.pcs.len() as u32);
            d.info.taken = d.info.taken.max(arrived);
            Ok(d)
        }
        Some(e @ dump::DumpError::Damaged { .. }) if d.pcs.is_empty() && d.hist.is_none() => {
            Err(anyhow!("{e}, and no other sample was recorded"))
                .with_context(|| format!("decoding {}", path.display()))
        }
        Some(e @ dump::DumpError::Damaged { samples, .. }) => {
            term::warn(format!(
                "{e} (counted as lost); every other record checked out and is reported. {} is \
                 kept as it is",
                path.display()
            ));
            d.info.lost = d.info.lost.saturating_add(samples as u32);
            Ok(d)
        }
        Some(e) => Err(anyhow!(e)).with_context(|| format!("decoding {}", path.display())),
    }
}

/// Check that the dump was made by this image.
pub fn verify_fingerprint(elf_bytes: &[u8], dump: &Dump) -> Result<()> {
    let i = &dump.info;
    if i.code_end <= i.code_start {
        bail!("the dump does not say which code made it (empty fingerprint range)");
    }
    let crc = elf::code_crc(elf_bytes, i.code_start as u64, i.code_end as u64)
        .context("the ELF has no code where the dump's fingerprint says")?;
    if crc != i.code_crc {
        bail!(
            "this dump was not made by this ELF: the firmware's code at {:#x}..{:#x} had CRC {:#010x}, this \
             ELF's has {crc:#010x}. Report the run with the ELF saved beside it (`cargo sample report <run>`), \
             or run again",
            i.code_start,
            i.code_end,
            i.code_crc
        );
    }
    Ok(())
}
