//! Saved runs: `<target>/cargo-sample/runs/<time>-<name>-<pid>/` holds the ELF that was built
//! (`firmware.elf`), the copy that ran with the run's configuration (`loaded.elf`), the raw
//! dump exactly as it arrived (`sampler.dump`), the firmware's output, and `run.json`.
//! Files are written whole (temporary name, then rename), so a crash leaves no half-written
//! metadata; concurrent runs get distinct directories.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::image::elf;

/// File names inside a run directory.
pub const ELF: &str = "firmware.elf";
pub const LOADED_ELF: &str = "loaded.elf";
pub const DUMP: &str = "sampler.dump";
pub const META: &str = "run.json";
pub const OUTPUT: &str = "firmware-output.txt";
/// The firmware's defmt log, decoded (the raw frames stay in `rtt-0.bin`).
pub const DEFMT_LOG: &str = "defmt.log";
/// What a `--serial` run's port carried, as it came.
pub const SERIAL: &str = "serial.bin";
/// The SWO stream of a board's `--method dwt` run, as it came.
pub const SWO: &str = "swo.bin";
/// What a streaming firmware had written when its run was cut short (raw, as received).
pub const STREAM: &str = "streamed.dump";
/// The run's ELF: `firmware.elf`, else `loaded.elf` (the same code, with the run's
/// configuration written into its data; a note says which was read). Returns its path and bytes.
pub fn elf_of(dir: &Path) -> Result<(PathBuf, Vec<u8>)> {
    let built = dir.join(ELF);
    match std::fs::read(&built) {
        Ok(bytes) => Ok((built, bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let loaded = dir.join(LOADED_ELF);
            let bytes = std::fs::read(&loaded).with_context(|| {
                format!(
                    "the run {} has neither `{ELF}` nor `{LOADED_ELF}`: its code cannot be named; \
                     copy the ELF that ran to {}",
                    dir.display(),
                    built.display()
                )
            })?;
            crate::term::note(format!(
                "`{ELF}` is missing from {}: reading `{LOADED_ELF}`, the same code as it ran",
                dir.display()
            ));
            Ok((loaded, bytes))
        }
        Err(e) => Err(e).with_context(|| format!("reading {}", built.display())),
    }
}

/// How a run stands, or how it ended (`state` in `meta.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum RunState {
    /// Started, not ended (or cargo-sample itself was killed meanwhile).
    #[default]
    #[serde(rename = "running")]
    Running,
    /// The firmware ended the run.
    #[serde(rename = "finished")]
    Finished,
    /// Cut short by `--timeout`.
    #[serde(rename = "timed out")]
    TimedOut,
    /// Cut short by Ctrl-C.
    #[serde(rename = "interrupted")]
    Interrupted,
    /// QEMU or the probe failed, or the firmware exited with an error.
    #[serde(rename = "failed")]
    Failed,
    /// The core sat in a fault handler when the run was cut short.
    #[serde(rename = "faulted")]
    Faulted,
    /// `--duration` elapsed.
    #[serde(rename = "duration reached")]
    DurationReached,
    /// `--instructions` (the exact run's budget) ran out.
    #[serde(rename = "budget reached")]
    BudgetReached,
    /// Written by a version that knew a state this one does not.
    #[serde(other, rename = "unknown")]
    Unknown,
}

impl RunState {
    /// The word `meta.json` holds.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Finished => "finished",
            RunState::TimedOut => "timed out",
            RunState::Interrupted => "interrupted",
            RunState::Failed => "failed",
            RunState::Faulted => "faulted",
            RunState::DurationReached => "duration reached",
            RunState::BudgetReached => "budget reached",
            RunState::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The sampler's state block read from the target when a run was cut short.
pub const STATE: &str = "state.bin";
/// The sampler's ring read from the target when a run was cut short.
pub const RING: &str = "ring.bin";

/// What kind of run it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The sampler ran (`--truth` may have counted instructions beside it).
    #[default]
    #[serde(alias = "")]
    Sampled,
    /// `--exact`: no sampler; the plugin's counts are the profile.
    Exact,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Sampled => "sampled",
            Mode::Exact => "exact",
        }
    }
}

/// Where a run's samples came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The dump the firmware sent (semihosting).
    Dump,
    /// The ring read while the firmware ran (`--live`).
    Live,
    /// Memory read after a run was cut short.
    Snapshot,
    /// The dump the firmware wrote to a serial port.
    Serial,
    /// A board, through a probe: the sampler's ring (`--method timer`).
    Timer,
    /// A board: DWT PC samples over SWO.
    Dwt,
    /// A board: DWT_PCSR polled by the host.
    Pcsr,
    /// A recorded SWO capture (`cargo sample swo`).
    Swo,
    /// The C profiler's text dump (`cargo sample report --text-dump`).
    #[serde(rename = "text dump")]
    TextDump,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Dump => "dump",
            Source::Live => "live",
            Source::Snapshot => "snapshot",
            Source::Serial => "serial",
            Source::Timer => "timer",
            Source::Dwt => "dwt",
            Source::Pcsr => "pcsr",
            Source::Swo => "swo",
            Source::TextDump => "text dump",
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What `run.json` records.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct RunMeta {
    pub format_version: u32,
    /// `cargo sample bench`: the lap regions are benchmarks.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bench: bool,
    pub package: String,
    pub target_name: String,
    pub triple: String,
    pub profile: String,
    pub machine: String,
    pub cpu: String,
    /// Frequency of the sampling timer's clock, Hz.
    pub timer_hz: u64,
    /// Unit of the profile: `instructions` in QEMU.
    pub unit: String,
    /// Instructions (or cycles) per timer tick.
    pub units_per_tick: f64,
    pub workspace_root: Option<PathBuf>,
    pub started_unix: u64,
    /// `running` while the run goes on, then how it ended.
    pub state: RunState,
    pub exit_code: Option<i32>,
    pub wall_seconds: f64,
    pub qemu_command: Vec<String>,
    /// Where the samples came from.
    pub source: Option<Source>,
    pub requested_samples: u32,
    /// Sampled, or exact (`--exact`: no sampler, counts only).
    #[serde(default)]
    pub mode: Mode,
    /// `--exact`: the instruction budget of the run.
    #[serde(default)]
    pub instruction_budget: Option<u64>,
    /// `--align`: every function aligned to this many bytes.
    #[serde(default)]
    pub align: Option<u32>,
    /// `--align`: code bytes without and with the alignment.
    #[serde(default)]
    pub code_growth: Option<(u64, u64)>,
    /// `--align`: functions that kept another alignment (precompiled code).
    #[serde(default)]
    pub unaligned_functions: Vec<String>,
    /// QEMU's `-icount shift`.
    #[serde(default)]
    pub icount_shift: u8,
    /// `--truth`, `--exact`: how instructions were counted.
    #[serde(default)]
    pub counted_by: Option<String>,
    /// On a board: how the samples were taken (`timer`, `dwt`, `pcsr`); `None` in QEMU.
    #[serde(default)]
    pub board: Option<String>,
    /// The core's state when the run was cut short (a firmware stuck in a fault handler).
    #[serde(default)]
    pub core: Option<crate::dump::fault::CoreState>,
    /// The device timer that paced the sampler, as reports name it (`GPTM0 (IRQ 19)`); `None`
    /// for SysTick and the ARMv8-A timers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacer: Option<String>,
    /// On a board: seconds spent attaching, downloading the image and capturing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board_seconds: Option<BoardSeconds>,
}

/// Where a board run's time went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct BoardSeconds {
    pub attach: f64,
    pub download: f64,
    pub capture: f64,
}

/// The directory runs are kept in.
pub fn runs_dir(own_dir: &Path) -> PathBuf {
    own_dir.join("runs")
}

/// Create a fresh run directory.
pub fn create(runs: &Path, name: &str) -> Result<PathBuf> {
    std::fs::create_dir_all(runs).with_context(|| format!("creating {}", runs.display()))?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let stamp = format_utc(now.as_secs());
    for n in 0..1000 {
        let dir = runs.join(format!("{stamp}-{name}-{}-{n}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
    }
    bail!("could not create a run directory in {}", runs.display())
}

/// Write a file whole: to a temporary name first, then renamed over the target.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// An entry of a small JSON map kept beside the builds (sizes, timers chosen per crate).
pub fn recall(path: &Path, key: &str) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get(key).cloned()
}

/// Set an entry of such a map (best effort: a map that cannot be written is only not
/// remembered).
pub fn remember(path: &Path, key: &str, value: serde_json::Value) {
    let mut v: serde_json::Map<String, serde_json::Value> = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    v.insert(key.to_owned(), value);
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = write_atomic(path, serde_json::Value::Object(v).to_string().as_bytes());
}

pub fn save_meta(dir: &Path, meta: &RunMeta) -> Result<()> {
    write_atomic(&dir.join(META), &serde_json::to_vec_pretty(meta)?)
}

pub fn load_meta(dir: &Path) -> Result<RunMeta> {
    let path = dir.join(META);
    let text = std::fs::read(&path)
        .with_context(|| format!("reading {} (is this a run directory?)", path.display()))?;
    serde_json::from_slice(&text).with_context(|| format!("{} is not a run record", path.display()))
}

/// Find a run: a path, a directory name under `runs`, or `latest` (the newest run that ended;
/// one still being written, by another run of the same crate, is passed over with a note).
pub fn find(runs: &Path, which: &str) -> Result<PathBuf> {
    let direct = PathBuf::from(which);
    if direct.join(META).is_file() {
        return Ok(direct);
    }
    let named = runs.join(which);
    if which != "latest" && named.join(META).is_file() {
        return Ok(named);
    }
    if which == "latest" {
        let mut all: Vec<PathBuf> = std::fs::read_dir(runs)
            .with_context(|| format!("no saved runs in {}", runs.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join(META).is_file())
            .collect();
        all.sort();
        let newest = all
            .last()
            .cloned()
            .with_context(|| format!("no saved runs in {}", runs.display()))?;
        let ended = all
            .iter()
            .rev()
            .find(|p| load_meta(p).is_ok_and(|m| m.state != RunState::Running));
        return Ok(match ended {
            Some(p) if *p != newest => {
                crate::term::note(format!(
                    "the newest run, {}, has not ended (it is still being written, or the run \
                     that wrote it was killed): reporting {}, the newest that has. Name a run \
                     to report that one",
                    newest.display(),
                    p.display()
                ));
                p.clone()
            }
            _ => newest,
        });
    }
    bail!(
        "no run `{which}`: give a run directory, a name under {}, or `latest`",
        runs.display()
    )
}

/// `YYYYMMDD-HHMMSS` in UTC (sortable, no dependency on a date library).
pub fn format_utc(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!("{y:04}{mo:02}{d:02}-{h:02}{m:02}{s:02}")
}

/// Whether the image's defmt frames come out on QEMU's standard output (defmt without RTT:
/// `defmt-semihosting`): then the image saved in `dir` decodes them.
pub fn defmt_on_stdout(elf_bytes: &[u8], dir: &Path) -> Option<PathBuf> {
    let rtt = elf::symbol_address(elf_bytes, "_SEGGER_RTT").is_some();
    (!rtt && crate::dump::defmt::DefmtLog::in_elf(elf_bytes)).then(|| dir.join(ELF))
}

/// The defmt log a run kept raw (RTT channel 0, QEMU's standard output for firmware that logs
/// through semihosting, or what came before the dump on a `--serial` port), decoded again
/// against its image, and whether its timestamps are sampler-rt's sample counts. `None` when
/// the image has no defmt table or nothing was kept.
pub fn kept_defmt_log(
    elf_bytes: &[u8],
    dir: &Path,
) -> Result<Option<(Vec<crate::dump::defmt::LogLine>, bool)>> {
    let serial = dir.join(SERIAL);
    let raw = if serial.is_file() {
        serial
    } else if defmt_on_stdout(elf_bytes, dir).is_some() {
        dir.join(OUTPUT)
    } else {
        dir.join("rtt-0.bin")
    };
    let Ok(mut bytes) = std::fs::read(&raw) else {
        return Ok(None);
    };
    if raw.ends_with(SERIAL) {
        // The frames come before the dump on the port.
        bytes.truncate(crate::dump::stream::before_dump(&bytes));
    }
    let Some(mut log) = crate::dump::defmt::DefmtLog::of_elf(elf_bytes)? else {
        return Ok(None);
    };
    let lines = log.feed_lines(&bytes);
    Ok(Some((lines, log.stamped_with_samples)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_stamps() {
        assert_eq!(format_utc(0), "19700101-000000");
        assert_eq!(format_utc(1_796_236_954), "20261202-184234");
    }

    #[test]
    fn concurrent_creates_are_distinct_and_latest_is_found() {
        let tmp = tempfile::tempdir().unwrap();
        let a = create(tmp.path(), "x").unwrap();
        let b = create(tmp.path(), "x").unwrap();
        assert_ne!(a, b);
        let ended = RunMeta {
            state: RunState::Finished,
            ..RunMeta::default()
        };
        save_meta(&a, &ended).unwrap();
        save_meta(&b, &ended).unwrap();
        assert_eq!(find(tmp.path(), "latest").unwrap(), b);
        // A newer run still being written is passed over; alone, it is taken.
        let c = create(tmp.path(), "x").unwrap();
        save_meta(&c, &RunMeta::default()).unwrap();
        assert_eq!(find(tmp.path(), "latest").unwrap(), b);
        let only = tempfile::tempdir().unwrap();
        let d = create(only.path(), "x").unwrap();
        save_meta(&d, &RunMeta::default()).unwrap();
        assert_eq!(find(only.path(), "latest").unwrap(), d);
        assert!(find(tmp.path(), "nope").is_err());
        assert!(!b.join("run.tmp").exists());
    }

    #[test]
    fn run_states_are_the_words_meta_json_always_held() {
        use RunState::*;
        for (state, word) in [
            (Running, "running"),
            (Finished, "finished"),
            (TimedOut, "timed out"),
            (Interrupted, "interrupted"),
            (Failed, "failed"),
            (Faulted, "faulted"),
            (DurationReached, "duration reached"),
            (BudgetReached, "budget reached"),
        ] {
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{word}\""));
            assert_eq!(state.as_str(), word);
            assert_eq!(serde_json::from_str::<RunState>(&json).unwrap(), state);
        }
        // A state this version does not know still loads.
        assert_eq!(
            serde_json::from_str::<RunState>("\"rebooted\"").unwrap(),
            Unknown
        );
    }
}
