//! What a crate's runner says about where its firmware runs: a QEMU command line (kept, but
//! for the options cargo-sample must own), a probe-rs command (chip, protocol, speed, probe, as
//! probe-rs reads them, then its environment variables, then cargo-embed's files), a shell
//! script around QEMU, or something else.

use std::path::{Path, PathBuf};

/// A runner command line, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runner {
    Qemu(Qemu),
    Probe(Probe),
    /// Neither QEMU nor probe-rs (a debugger, a flashing script without QEMU in it).
    Other {
        program: String,
    },
}

/// A QEMU runner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Qemu {
    /// The QEMU executable as the runner names it.
    pub program: String,
    /// `-machine` with its options (`virt,virtualization=on`).
    pub machine: Option<String>,
    pub cpu: Option<String>,
    /// The runner's other options, passed to QEMU as they are.
    pub kept: Vec<String>,
    /// The runner's options cargo-sample replaces with its own, as written (for a note).
    pub replaced: Vec<String>,
    /// The shell script the command line was found in.
    pub script: Option<PathBuf>,
}

impl Qemu {
    /// The machine's name without its options.
    pub fn machine_name(&self) -> Option<&str> {
        self.machine
            .as_deref()
            .map(|m| m.split(',').next().unwrap_or(m))
    }

    /// The replaced options worth a note: those whose effect differs from cargo-sample's.
    pub fn noteworthy_replacements(&self) -> Vec<String> {
        self.replaced
            .iter()
            .filter(|r| {
                !matches!(
                    r.as_str(),
                    "-kernel"
                        | "-nographic"
                        | "-display none"
                        | "-semihosting"
                        | "-semihosting-config enable=on,target=native"
                        | "-serial stdio"
                        | "-monitor none"
                )
            })
            .cloned()
            .collect()
    }
}

/// A probe-rs runner (`probe-rs run`, `cargo embed`, `probe-run`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Probe {
    pub chip: Option<String>,
    pub protocol: Option<String>,
    pub speed: Option<u32>,
    pub probe: Option<String>,
    pub connect_under_reset: bool,
}

/// QEMU options cargo-sample sets itself, with whether they take a value.
const OWNED: &[(&str, bool)] = &[
    ("-kernel", true),
    ("-icount", true),
    ("-semihosting-config", true),
    ("-semihosting", false),
    ("-monitor", true),
    ("-qmp", true),
    ("-serial", true),
    ("-display", true),
    ("-nographic", false),
    ("-plugin", true),
    ("-d", true),
    ("-D", true),
    ("-gdb", true),
    ("-s", false),
    ("-S", false),
    ("-daemonize", false),
    ("-no-shutdown", false),
];

fn base_name(program: &str) -> &str {
    Path::new(program)
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or(program)
}

/// Read a runner's words (no file access: see [`read`] for scripts).
pub fn parse(words: &[String]) -> Runner {
    let Some(program) = words.first() else {
        return Runner::Other {
            program: String::new(),
        };
    };
    let base = base_name(program);
    if base.starts_with("qemu-system-") {
        return Runner::Qemu(parse_qemu(program, &words[1..]));
    }
    if matches!(
        base,
        "probe-rs" | "cargo-embed" | "probe-run" | "cargo-flash"
    ) {
        return Runner::Probe(parse_probe(&words[1..]));
    }
    Runner::Other {
        program: program.clone(),
    }
}

fn parse_qemu(program: &str, args: &[String]) -> Qemu {
    let mut q = Qemu {
        program: program.to_owned(),
        ..Qemu::default()
    };
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        // QEMU accepts `--opt` as `-opt`, and `-opt=value`.
        let norm = if word.starts_with("--") {
            &word[1..]
        } else {
            word.as_str()
        };
        let (name, inline) = match norm.split_once('=') {
            Some((n, v)) if n.starts_with('-') => (n, Some(v.to_owned())),
            _ => (norm, None),
        };
        let value = |i: &mut usize| -> Option<String> {
            if inline.is_some() {
                return inline.clone();
            }
            let v = args.get(*i + 1).cloned();
            if v.is_some() {
                *i += 1;
            }
            v
        };
        match name {
            "-machine" | "-M" => q.machine = value(&mut i),
            "-cpu" => q.cpu = value(&mut i),
            _ => {
                if let Some(&(_, takes)) = OWNED.iter().find(|(n, _)| *n == name) {
                    // `-kernel` ends most runners (cargo appends the ELF): a value only when
                    // one is written.
                    let v = if name == "-kernel" {
                        match args.get(i + 1) {
                            Some(next) if !next.starts_with('-') && inline.is_none() => {
                                i += 1;
                                Some(next.clone())
                            }
                            _ => inline.clone(),
                        }
                    } else if takes {
                        value(&mut i)
                    } else {
                        None
                    };
                    q.replaced.push(match v {
                        Some(v) => format!("{name} {v}"),
                        None => name.to_owned(),
                    });
                } else {
                    q.kept.push(word.clone());
                }
            }
        }
        i += 1;
    }
    q
}

fn parse_probe(args: &[String]) -> Probe {
    let mut p = Probe::default();
    let mut i = 0;
    while i < args.len() {
        let (name, inline) = match args[i].split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (args[i].as_str(), None),
        };
        let value = |i: &mut usize| -> Option<String> {
            if inline.is_some() {
                return inline.clone();
            }
            let v = args.get(*i + 1).cloned();
            if v.is_some() {
                *i += 1;
            }
            v
        };
        match name {
            "--chip" => p.chip = value(&mut i),
            "--protocol" => p.protocol = value(&mut i),
            "--speed" => p.speed = value(&mut i).and_then(|v| v.parse().ok()),
            "--probe" => p.probe = value(&mut i),
            "--connect-under-reset" => p.connect_under_reset = true,
            _ => {}
        }
        i += 1;
    }
    p
}

/// Like [`parse`], and a runner that is a shell script is read for the QEMU command line in it.
pub fn read(words: &[String]) -> Runner {
    let r = parse(words);
    let Runner::Other { program } = &r else {
        return r;
    };
    let path = PathBuf::from(program);
    let Ok(meta) = std::fs::metadata(&path) else {
        return r;
    };
    if !meta.is_file() || meta.len() > 256 << 10 {
        return r;
    }
    let Ok(text) = std::fs::read_to_string(&path) else {
        return r;
    };
    match qemu_in_script(&text) {
        Some(mut q) => {
            q.script = Some(path);
            Runner::Qemu(q)
        }
        None => r,
    }
}

/// The first QEMU command line of a script: its words up to the script's own arguments or a
/// shell operator, quotes removed.
pub fn qemu_in_script(text: &str) -> Option<Qemu> {
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(start) = words
            .iter()
            .position(|w| base_name(w.trim_matches(['"', '\''])).starts_with("qemu-system-"))
        else {
            continue;
        };
        let mut cmd = Vec::new();
        for w in &words[start..] {
            if w.starts_with('$')
                || w.starts_with("\"$")
                || matches!(*w, "|" | "||" | "&&" | ";" | "&" | ">" | "2>" | ">>" | "\\")
                || w.starts_with('>')
                || w.starts_with("2>")
            {
                break;
            }
            cmd.push(w.trim_matches(['"', '\'']).to_owned());
        }
        if let Runner::Qemu(q) = parse(&cmd) {
            return Some(q);
        }
    }
    None
}

/// The probe settings of cargo-embed's files beside the manifest, merged as cargo-embed merges
/// them: `.embed`, `Embed`, `.embed.local`, `Embed.local`, each as `.toml`, `.json`, `.yaml`
/// and `.yml` in that order, a later file winning key by key; profile `default`.
pub fn embed_settings(package_dir: &Path) -> Probe {
    let mut p = Probe::default();
    for name in [".embed", "Embed", ".embed.local", "Embed.local"] {
        for ext in ["toml", "json", "yaml", "yml"] {
            let Ok(text) = std::fs::read_to_string(package_dir.join(format!("{name}.{ext}")))
            else {
                continue;
            };
            // One model for the three formats; a file that does not parse is passed over.
            let parsed: Option<serde_json::Value> = match ext {
                "toml" => text
                    .parse::<toml::Table>()
                    .ok()
                    .and_then(|t| serde_json::to_value(t).ok()),
                "json" => serde_json::from_str(&text).ok(),
                _ => yaml_serde::from_str(&text).ok(),
            };
            if let Some(d) = parsed.as_ref().and_then(|v| v.get("default")) {
                apply_embed_profile(&mut p, d);
            }
        }
    }
    p
}

/// The probe settings of one cargo-embed profile over those before it.
fn apply_embed_profile(p: &mut Probe, d: &serde_json::Value) {
    let get = |table: &str, key: &str| d.get(table).and_then(|t| t.get(key));
    let text = |table: &str, key: &str| get(table, key).and_then(|v| v.as_str().map(str::to_owned));
    if let Some(c) = text("general", "chip") {
        p.chip = Some(c);
    }
    if let Some(c) = get("general", "connect_under_reset").and_then(|c| c.as_bool()) {
        p.connect_under_reset = c;
    }
    if let Some(s) = text("probe", "protocol") {
        p.protocol = Some(s);
    }
    if let Some(s) = get("probe", "speed").and_then(|c| c.as_u64()) {
        p.speed = u32::try_from(s).ok();
    }
    if let (Some(vid), Some(pid)) = (text("probe", "usb_vid"), text("probe", "usb_pid")) {
        p.probe = Some(match text("probe", "serial") {
            Some(s) => format!("{vid}:{pid}:{s}"),
            None => format!("{vid}:{pid}"),
        });
    }
}

/// The `PROBE_RS_*` variables probe-rs reads for these settings.
pub fn env_settings(get: impl Fn(&str) -> Option<String>) -> Probe {
    Probe {
        chip: get("PROBE_RS_CHIP"),
        protocol: get("PROBE_RS_PROTOCOL"),
        speed: get("PROBE_RS_SPEED").and_then(|s| s.trim().parse().ok()),
        probe: get("PROBE_RS_PROBE"),
        connect_under_reset: get("PROBE_RS_CONNECT_UNDER_RESET")
            .is_some_and(|v| matches!(v.trim(), "1" | "true" | "yes" | "on")),
    }
}

impl Probe {
    /// `self`, with what it leaves open taken from `other` (lower precedence).
    pub fn or(self, other: Probe) -> Probe {
        Probe {
            chip: self.chip.or(other.chip),
            protocol: self.protocol.or(other.protocol),
            speed: self.speed.or(other.speed),
            probe: self.probe.or(other.probe),
            connect_under_reset: self.connect_under_reset || other.connect_under_reset,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn qemu_options_are_kept_but_for_the_ones_cargo_sample_owns() {
        let r = parse(&words(
            "qemu-system-aarch64 -machine virt,virtualization=on -cpu cortex-a72 -m 128M -serial mon:stdio -nographic -semihosting-config enable=on,target=native -icount shift=3 -device loader,file=x.bin,addr=0x40000000 -kernel",
        ));
        let Runner::Qemu(q) = r else { panic!() };
        assert_eq!(q.machine.as_deref(), Some("virt,virtualization=on"));
        assert_eq!(q.machine_name(), Some("virt"));
        assert_eq!(q.cpu.as_deref(), Some("cortex-a72"));
        assert_eq!(
            q.kept,
            words("-m 128M -device loader,file=x.bin,addr=0x40000000")
        );
        assert_eq!(
            q.replaced,
            [
                "-serial mon:stdio",
                "-nographic",
                "-semihosting-config enable=on,target=native",
                "-icount shift=3",
                "-kernel"
            ]
        );
        assert_eq!(
            q.noteworthy_replacements(),
            ["-serial mon:stdio", "-icount shift=3"]
        );
        let Runner::Qemu(q) = parse(&words(
            "/usr/bin/qemu-system-arm -M=microbit --cpu cortex-m0",
        )) else {
            panic!()
        };
        assert_eq!(q.machine.as_deref(), Some("microbit"));
        assert_eq!(q.cpu.as_deref(), Some("cortex-m0"));
    }

    #[test]
    fn probe_rs_runners_and_their_settings() {
        let r = parse(&words(
            "probe-rs run --chip STM32F407VGTx --protocol swd --speed=4000 --connect-under-reset",
        ));
        assert_eq!(
            r,
            Runner::Probe(Probe {
                chip: Some("STM32F407VGTx".into()),
                protocol: Some("swd".into()),
                speed: Some(4000),
                probe: None,
                connect_under_reset: true,
            })
        );
        assert!(matches!(
            parse(&words("arm-none-eabi-gdb -q")),
            Runner::Other { .. }
        ));
        let env = env_settings(|k| match k {
            "PROBE_RS_CHIP" => Some("nRF52840_xxAA".into()),
            "PROBE_RS_SPEED" => Some("1000".into()),
            _ => None,
        });
        // The runner's own arguments win over the environment.
        let Runner::Probe(p) = r else { panic!() };
        let merged = p.or(env);
        assert_eq!(merged.chip.as_deref(), Some("STM32F407VGTx"));
        assert_eq!(merged.speed, Some(4000));
    }

    #[test]
    fn a_script_around_qemu_is_read() {
        let q = qemu_in_script(
            "#!/bin/sh\n# run in qemu-system-arm\nset -e\nexec qemu-system-arm -cpu cortex-m3 -machine lm3s6965evb -nographic -kernel \"$@\" | tee log\n",
        )
        .unwrap();
        assert_eq!(q.machine.as_deref(), Some("lm3s6965evb"));
        assert_eq!(q.program, "qemu-system-arm");
        assert!(q.kept.is_empty(), "{:?}", q.kept);
        assert!(qemu_in_script("#!/bin/sh\nopenocd -f x.cfg\n").is_none());
    }

    #[test]
    fn embed_files_merge_in_cargo_embeds_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("Embed.toml"),
            "[default.general]\nchip = \"nRF52840_xxAA\"\n[default.probe]\nprotocol = \"Swd\"\nspeed = 4000\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("Embed.local.toml"),
            "[default.probe]\nspeed = 1000\nusb_vid = \"1366\"\nusb_pid = \"1015\"\n",
        )
        .unwrap();
        std::fs::write(dir.path().join(".embed.toml"), "not [toml").unwrap();
        let p = embed_settings(dir.path());
        assert_eq!(p.chip.as_deref(), Some("nRF52840_xxAA"));
        assert_eq!(p.speed, Some(1000), "the local file wins");
        assert_eq!(p.protocol.as_deref(), Some("Swd"));
        assert_eq!(p.probe.as_deref(), Some("1366:1015"));
    }

    #[test]
    fn embed_files_in_json_and_yaml_count_too_after_toml() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("Embed.toml"),
            "[default.general]\nchip = \"STM32F401RETx\"\n[default.probe]\nspeed = 4000\n",
        )
        .unwrap();
        // Same name, later format: JSON overrides the TOML key by key.
        std::fs::write(
            dir.path().join("Embed.json"),
            r#"{"default": {"probe": {"protocol": "Jtag"}}}"#,
        )
        .unwrap();
        // The personal file in YAML wins over both.
        std::fs::write(
            dir.path().join(".embed.local.yml"),
            "default:\n  probe:\n    speed: 1800\n  general:\n    connect_under_reset: true\n",
        )
        .unwrap();
        let p = embed_settings(dir.path());
        assert_eq!(p.chip.as_deref(), Some("STM32F401RETx"));
        assert_eq!(p.protocol.as_deref(), Some("Jtag"));
        assert_eq!(p.speed, Some(1800));
        assert!(p.connect_under_reset);
    }
}
