//! Exact instruction counts per PC: the ground truth beside a sampled profile (`--truth`) and
//! the profile itself (`--exact`).
//!
//! Two ways to count, both exact and checked against each other:
//! - the TCG plugin of `plugin/exact.rs` (a few percent slower than plain QEMU), built for plugin
//!   API 1 (QEMU 4.2 to 8.2) and for API 2 and later (QEMU 9.0 on); the binary carries both;
//! - QEMU's exec log (`-d exec,nochain`, one instruction per block), for a QEMU built without
//!   plugin support: about a million instructions a second, read from QEMU's stderr as it
//!   runs, so nothing is written to disk.
//!
//! The files the counts are kept in are read and written by [`crate::dump::exact`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The plugin for QEMU 4.2 to 8.2, compiled by the build script for this host.
static PLUGIN_API1: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/qemu-plugin-api1.so"));
/// The plugin for QEMU 9.0 and later.
static PLUGIN_API2: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/qemu-plugin-api2.so"));

/// The QEMU versions the plugin loads in, for messages.
pub const SUPPORTED: &str = "QEMU 4.2 to 8.2 (plugin API 1) and QEMU 9.0 and later (plugin API 2; \
                             checked with QEMU 7.2 and 10.0)";

/// A QEMU release, from `qemu-system-arm --version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct QemuVersion(pub u32, pub u32, pub u32);

impl std::fmt::Display for QemuVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

impl QemuVersion {
    /// Parse the first line of `--version`: `QEMU emulator version 7.2.22 (Debian ...)`.
    pub fn parse(text: &str) -> Option<QemuVersion> {
        let rest = text.lines().next()?.split("version").nth(1)?.trim_start();
        let word = rest.split(|c: char| c.is_whitespace() || c == '(').next()?;
        let mut parts = word.split('.').map(|p| p.parse::<u32>().ok());
        Some(QemuVersion(
            parts.next()??,
            parts.next().flatten().unwrap_or(0),
            parts.next().flatten().unwrap_or(0),
        ))
    }

    /// Whether `-accel tcg,one-insn-per-tb=on` exists (QEMU 8.1 on) rather than `-singlestep`.
    pub fn has_one_insn_per_tb(self) -> bool {
        self >= QemuVersion(8, 1, 0)
    }
}

/// Plugin API generations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginApi {
    /// `qemu_plugin_version = 1`, global inline counters: QEMU 4.2 to 8.2.
    V1,
    /// `qemu_plugin_version = 2`, per-vCPU scoreboards: QEMU 9.0 and later.
    V2,
}

impl PluginApi {
    /// The plugin a QEMU release loads, if any.
    pub fn for_qemu(v: QemuVersion) -> Option<PluginApi> {
        if v < QemuVersion(4, 2, 0) {
            None
        } else if v < QemuVersion(9, 0, 0) {
            Some(PluginApi::V1)
        } else {
            Some(PluginApi::V2)
        }
    }

    pub fn number(self) -> u32 {
        match self {
            PluginApi::V1 => 1,
            PluginApi::V2 => 2,
        }
    }

    fn bytes(self) -> &'static [u8] {
        match self {
            PluginApi::V1 => PLUGIN_API1,
            PluginApi::V2 => PLUGIN_API2,
        }
    }
}

/// How a run counts instructions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Counting {
    /// The plugin at `path`, for API `api`.
    Plugin { path: PathBuf, api: PluginApi },
    /// QEMU's exec log on its stderr; `one_insn_flag` is how this QEMU spells one instruction
    /// per translation block.
    ExecLog { one_insn_flag: Vec<String> },
}

impl Counting {
    /// For the report and `run.json`.
    pub fn describe(&self) -> String {
        match self {
            Counting::Plugin { api, .. } => {
                format!("cargo-sample's QEMU plugin (API {})", api.number())
            }
            Counting::ExecLog { .. } => "QEMU's exec log".into(),
        }
    }
}

/// Write the plugin for `api` under `dir` (once per content) and return its path.
pub fn install_plugin(dir: &Path, api: PluginApi) -> Result<PathBuf> {
    let bytes = api.bytes();
    if bytes.is_empty() {
        bail!(
            "this cargo-sample was built without its QEMU plugin for API {} (the build script could not \
             compile it); use `--truth-method exec-log`",
            api.number()
        );
    }
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!(
        "qemu-plugin-api{}-{:08x}.so",
        api.number(),
        sampler_rt::wire::crc32(bytes)
    ));
    if !path.is_file() {
        let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
        std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(path)
}

/// Counts from QEMU's exec log with one instruction per translation block.
///
/// Every block QEMU enters is logged as `Trace N: HOST [CS_BASE/PC/FLAGS/CFLAGS] SYMBOL`. Two
/// other lines take one back: `Stopped execution of TB chain before HOST [PC] ...` (the block
/// was entered but an exit request, such as an interrupt under `-icount`, stopped it before
/// its instruction ran) and `cpu_io_recompile: rewound execution of TB to PC` (QEMU 7.2: an
/// I/O access is replayed). With both, the counts equal the plugin's exactly.
///
/// With `-d int` as well, exception entries (`...loading from element N of ... vector table`)
/// and returns (`Exception return: magic PC ... previous exception N`) are followed, and every
/// instruction is also counted under the exception that was running (0: thread mode), and each
/// exception's instructions (nested ones included) where the code it interrupted resumed (the
/// first block after its return that is not another exception's, which then returns there too).
#[derive(Debug, Default)]
pub struct ExecLog {
    counts: HashMap<u32, i64>,
    total: i64,
    /// Exceptions entered and not yet returned from, innermost last.
    active: Vec<u32>,
    /// Instructions per (exception, address).
    by_context: HashMap<(u32, u32), i64>,
    /// Whether any exception entry was seen (the log has `-d int`).
    contexts_seen: bool,
    /// Per exception open: the instructions counted when it was entered, and the exceptions
    /// tail-chained to it (with their instructions).
    entered: Vec<(i64, Vec<(u32, i64)>)>,
    /// Exceptions returned from whose code has not resumed yet.
    returned: Vec<(u32, i64)>,
    /// Whether the last event was a return (the next entry is tail-chained to it).
    just_returned: bool,
    /// Per (exception, context resumed, address): instructions.
    landings: HashMap<(u32, u32, u32), i64>,
    /// Where the firmware starts its sampler, and the counts when it first got there.
    start_at: Option<u32>,
    before_start: Option<HashMap<u32, i64>>,
}

impl ExecLog {
    /// A log that also keeps the counts as they stood when `start` first ran (sampler-rt's
    /// `sampler_rt_sampling_starts`).
    pub fn starting_at(start: Option<u32>) -> ExecLog {
        ExecLog {
            start_at: start,
            ..ExecLog::default()
        }
    }

    /// The counts before the sampler started, when the log got there.
    pub fn before_start(&self) -> Option<Vec<(u32, u64)>> {
        let b = self.before_start.as_ref()?;
        let mut v: Vec<(u32, u64)> = b
            .iter()
            .filter(|&(_, &n)| n > 0)
            .map(|(&pc, &n)| (pc, n as u64))
            .collect();
        v.sort_unstable();
        Some(v)
    }

    /// Take one line of QEMU's stderr. Returns `false` when it is not part of the exec log
    /// (the caller passes it on to the user).
    pub fn line(&mut self, line: &[u8]) -> bool {
        let (pc, delta) = if let Some(rest) = line.strip_prefix(b"Trace ") {
            // `[cs_base/pc/...`
            let Some(open) = rest.iter().position(|&b| b == b'[') else {
                return false;
            };
            let fields = &rest[open + 1..];
            let Some(slash) = fields.iter().position(|&b| b == b'/') else {
                return false;
            };
            let pc_field = &fields[slash + 1..];
            let end = pc_field
                .iter()
                .position(|&b| b == b'/' || b == b']')
                .unwrap_or(pc_field.len());
            (hex(&pc_field[..end]), 1)
        } else if let Some(rest) = line.strip_prefix(b"Stopped execution of TB chain before ") {
            let Some(open) = rest.iter().position(|&b| b == b'[') else {
                return false;
            };
            let field = &rest[open + 1..];
            let end = field.iter().position(|&b| b == b']').unwrap_or(field.len());
            (hex(&field[..end]), -1)
        } else if let Some(rest) =
            line.strip_prefix(b"cpu_io_recompile: rewound execution of TB to ")
        {
            (hex(rest.trim_ascii()), -1)
        } else if let Some(rest) = line.strip_prefix(b"...loading from element ") {
            // `-d int`: exception N's vector is fetched; it runs from the next instruction.
            let n = rest.split(|&b| b == b' ').next().and_then(decimal);
            if let Some(n) = n {
                self.active.push(n);
                let chained = if self.just_returned {
                    std::mem::take(&mut self.returned)
                } else {
                    Vec::new()
                };
                self.entered.push((self.total, chained));
                self.just_returned = false;
                self.contexts_seen = true;
            }
            return true;
        } else if line.starts_with(b"Exception return: ") {
            // `... previous exception N`: back to what it interrupted.
            if let (Some(n), Some((at, chained))) = (self.active.pop(), self.entered.pop()) {
                self.returned.extend(chained);
                self.returned.push((n, self.total - at));
                self.just_returned = true;
            }
            return true;
        } else {
            // Other lines of `-d exec` and `-d int` carry no count; anything else is not the
            // log's.
            return line.starts_with(b"Linking TBs")
                || line.starts_with(b"cpu_io_recompile:")
                || line.starts_with(b"Taking exception ")
                || line.starts_with(b"Loaded reset SP ")
                || line.starts_with(b"...");
        };
        let Some(pc) = pc else { return false };
        if delta > 0 && self.before_start.is_none() && self.start_at == Some(pc as u32) {
            // (A block the log takes back is counted again when it runs: counts before it
            // are final.)
            self.before_start = Some(self.counts.clone());
        }
        if std::mem::take(&mut self.just_returned) && delta > 0 {
            let context = self.active.last().copied().unwrap_or(0);
            for (n, k) in std::mem::take(&mut self.returned) {
                *self.landings.entry((n, context, pc as u32)).or_default() += k;
            }
        }
        *self.counts.entry(pc as u32).or_default() += delta;
        let context = self.active.last().copied().unwrap_or(0);
        *self.by_context.entry((context, pc as u32)).or_default() += delta;
        self.total += delta;
        true
    }

    /// Instructions per (exception, address), when the log followed exceptions: `(exception,
    /// address, count)`, exception 0 being thread mode.
    pub fn context_counts(&self) -> Option<Vec<(u32, u32, u64)>> {
        if !self.contexts_seen {
            return None;
        }
        let mut v: Vec<(u32, u32, u64)> = self
            .by_context
            .iter()
            .filter(|&(_, &n)| n > 0)
            .map(|(&(c, pc), &n)| (c, pc, n as u64))
            .collect();
        v.sort_unstable();
        Some(v)
    }

    /// Each exception's instructions by where the code it interrupted resumed: `(exception,
    /// context exception, address, instructions)`, when the log followed exceptions.
    pub fn landings(&self) -> Option<Vec<(u32, u32, u32, u64)>> {
        if !self.contexts_seen {
            return None;
        }
        let mut v: Vec<(u32, u32, u32, u64)> = self
            .landings
            .iter()
            .filter(|&(_, &n)| n > 0)
            .map(|(&(e, c, pc), &n)| (e, c, pc, n as u64))
            .collect();
        v.sort_unstable();
        Some(v)
    }

    /// Instructions counted so far.
    pub fn total(&self) -> u64 {
        self.total.max(0) as u64
    }

    /// The counts, as the plugin would report them.
    pub fn counts(&self) -> Vec<(u32, u64)> {
        let mut v: Vec<(u32, u64)> = self
            .counts
            .iter()
            .filter(|&(_, &n)| n > 0)
            .map(|(&pc, &n)| (pc, n as u64))
            .collect();
        v.sort_unstable();
        v
    }
}

fn decimal(s: &[u8]) -> Option<u32> {
    std::str::from_utf8(s).ok()?.trim().parse().ok()
}

fn hex(s: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(s).ok()?;
    let s = s.trim().trim_start_matches("0x");
    u64::from_str_radix(s, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_plugins_are_embedded() {
        assert!(!PLUGIN_API1.is_empty(), "the API 1 plugin was not embedded");
        assert!(!PLUGIN_API2.is_empty(), "the API 2 plugin was not embedded");
    }

    #[test]
    fn versions_choose_the_plugin() {
        let v = |s| QemuVersion::parse(s).unwrap();
        assert_eq!(
            v("QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b2)\nCopyright"),
            QemuVersion(7, 2, 22)
        );
        assert_eq!(
            v("QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2)"),
            QemuVersion(10, 0, 2)
        );
        assert_eq!(v("QEMU emulator version 9.1"), QemuVersion(9, 1, 0));
        assert!(QemuVersion::parse("not qemu").is_none());
        assert_eq!(
            PluginApi::for_qemu(QemuVersion(7, 2, 22)),
            Some(PluginApi::V1)
        );
        assert_eq!(
            PluginApi::for_qemu(QemuVersion(8, 2, 9)),
            Some(PluginApi::V1)
        );
        assert_eq!(
            PluginApi::for_qemu(QemuVersion(9, 0, 0)),
            Some(PluginApi::V2)
        );
        assert_eq!(
            PluginApi::for_qemu(QemuVersion(10, 0, 2)),
            Some(PluginApi::V2)
        );
        assert_eq!(PluginApi::for_qemu(QemuVersion(4, 1, 0)), None);
        assert!(!QemuVersion(7, 2, 22).has_one_insn_per_tb());
        assert!(QemuVersion(8, 1, 0).has_one_insn_per_tb());
    }

    #[test]
    fn exec_log_lines_of_qemu_7_and_10() {
        let mut log = ExecLog::default();
        // QEMU 7.2: 32-bit pc field; QEMU 10: 64-bit.
        assert!(log.line(b"Trace 0: 0x7fc5f4000100 [00800400/000000c0/00000110/ff020201] Reset"));
        assert!(
            log.line(
                b"Trace 0: 0x7f32dc000100 [00800400/00000000000000c0/00000110/ff022201] Reset"
            )
        );
        assert!(log.line(
            b"Trace 0: 0x7f32dc000240 [00800400/00000000000007dc/00000110/ff022201] __pre_init"
        ));
        assert!(
            log.line(
                b"Trace 0: 0x7f32dc000240 [00800400/00000000000011c4/00000110/ff022201] hot_a"
            )
        );
        // Entered but stopped before running, and rewound: each takes one back.
        assert!(log.line(b"Stopped execution of TB chain before 0x7fc5f4016ac0 [000011c4] hot_a"));
        assert!(
            log.line(b"Trace 0: 0x7fc5f4000240 [00800400/000007dc/00000110/ff020201] __pre_init")
        );
        assert!(log.line(b"cpu_io_recompile: rewound execution of TB to 000007dc"));
        // `-d int` at reset: the log's, not the firmware's output.
        assert!(log.line(b"Loaded reset SP 0x0 PC 0x0 from vector table"));
        // Anything else is the firmware's or QEMU's own output.
        assert!(!log.line(b"qemu-system-arm: terminating on signal 15"));
        assert!(!log.line(b"Trace of my own"));
        assert_eq!(log.counts(), vec![(0xc0, 2), (0x7dc, 1)]);
        assert_eq!(log.total(), 3);
    }
}
