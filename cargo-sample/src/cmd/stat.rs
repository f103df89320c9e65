//! `cargo sample stat`: build once, run the firmware once per group of events, merge.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use sampler_rt::wire;

use crate::analysis::events::table_for;
use crate::analysis::pmu::{Stat, groups, merge};
use crate::cli::{StatArgs, TableFormat};
use crate::project::Project;
use crate::report::stat::render;
use crate::{dump, exec::qemu, image::elf, project, runs, term};

/// `cargo sample stat`.
pub fn stat(args: &StatArgs) -> Result<()> {
    let s = run_stat(args)?;
    match args.format {
        TableFormat::Json => anstream::println!("{}", serde_json::to_string_pretty(&s)?),
        TableFormat::Text => anstream::print!("{}", render(&s)),
    }
    Ok(())
}

/// Where `stat` counts: a board's chip, or a QEMU machine, its CPU and its program.
struct Place {
    chip: Option<String>,
    machine: String,
    cpu: String,
    extra_args: Vec<String>,
    qemu_path: PathBuf,
}

/// The board or QEMU machine to count on, with the CPU QEMU can model.
fn place(args: &StatArgs, p: &Project, t: &crate::analysis::events::Table) -> Result<Place> {
    let q = p.qemu_runner();
    let cpu = args
        .cpu
        .clone()
        .or(q.and_then(|q| q.cpu.clone()))
        .unwrap_or_else(|| "cortex-a53".to_owned());
    let machine = args
        .machine
        .clone()
        .or(q.and_then(|q| q.machine.clone()))
        .unwrap_or_else(|| "virt".to_owned());
    let extra_args = q.map(|q| q.kept.clone()).unwrap_or_default();
    // A board: `--chip`, or the runner's `probe-rs run --chip` unless a QEMU machine is named.
    let chip = args.conn.chip.clone().or_else(|| {
        p.probe_runner()
            .and_then(|r| r.chip.clone())
            .filter(|_| args.machine.is_none())
    });
    if chip.is_some()
        && args.conn.probe.as_deref() == Some(crate::exec::probe::emulated::PROBE_NAME)
    {
        bail!(
            "`stat` on a board through `--probe qemu` is not possible: the emulated probe plays \
             Cortex-M debug (an ADIv5 AHB-AP in front of an M-profile core), and probe-rs drives \
             an ARMv8-A core through its external debug registers and cross-trigger interface, \
             which QEMU does not model. `stat --read-memory` rehearses the same protocol in QEMU \
             (the counts read out of memory, as on a board)"
        );
    }
    let qemu_path = match chip {
        Some(_) => PathBuf::new(),
        None => qemu::locate(
            args.qemu.as_deref(),
            Some(
                q.map(|q| q.program.as_str())
                    .unwrap_or("qemu-system-aarch64"),
            ),
        )?,
    };
    // The table names the events; QEMU models only some CPUs. Architectural events count the
    // same on its `max` CPU, so a CPU it lacks runs there (the names stay the table's).
    let cpu = if chip.is_none() && !qemu::models_cpu(&qemu_path, &cpu) {
        term::note(format!(
            "QEMU does not model `{cpu}`: counting on QEMU's `max` CPU, with {}'s event names \
             and counters",
            t.cpu
        ));
        "max".to_owned()
    } else {
        cpu
    };
    Ok(Place {
        chip,
        machine,
        cpu,
        extra_args,
        qemu_path,
    })
}

/// Build once, run once per group, merge.
pub fn run_stat(args: &StatArgs) -> Result<Stat> {
    let p = project::discover(&crate::project::Selection::from(&args.cargo))?;
    if !p.triple.starts_with("aarch64") {
        bail!(
            "`cargo sample stat` counts ARMv8-A PMU events: the crate builds for `{}`, not \
             aarch64 (profile Cortex-M firmware with `cargo sample`)",
            p.triple
        );
    }
    let t = table_for(
        &args
            .cpu
            .clone()
            .or(p.qemu_runner().and_then(|q| q.cpu.clone()))
            .unwrap_or_else(|| "cortex-a53".to_owned()),
        args.pmu_data.as_deref(),
    )?;
    let at = place(args, &p, &t)?;
    let asked: Vec<u16> = args
        .events
        .iter()
        .map(|e| t.find(e))
        .collect::<Result<_>>()?;
    let size = args.group_size.unwrap_or(t.counters as usize);
    let gs = groups(&asked, size);
    let elf_bytes = super::capture::build(&p, &args.cargo, super::capture::Runtime::On)?.bytes;
    if elf::symbol_address(&elf_bytes, wire::PMU_CONFIG_SYMBOL).is_none() {
        bail!(
            "the firmware has no `{}`: does it call `sampler_rt::pmu::init` (sampler-rt built \
             for aarch64)?",
            wire::PMU_CONFIG_SYMBOL
        );
    }
    // On a board (and in QEMU with `--read-memory`) the counts are read out of memory.
    let in_memory = at.chip.is_some() || args.read_memory;
    let out_addr = match elf::symbol_address(&elf_bytes, wire::PMU_OUT_SYMBOL) {
        Some(a) => Some(u32::try_from(a).context("the counts' block lies above 4 GiB")?),
        None if in_memory => bail!(
            "the firmware has no `{}` to leave its counts in: update sampler-rt",
            wire::PMU_OUT_SYMBOL
        ),
        None => None,
    };
    let name = format!("{}-stat", p.target_name);
    let dir = super::capture::new_dir(&p, &name, &elf_bytes, None)?;
    term::status(
        "Counting",
        format!(
            "{} event{} of {} in {} run{} {} ({}: {} counters and the cycle counter)",
            asked.len(),
            if asked.len() == 1 { "" } else { "s" },
            p.target_name,
            gs.len(),
            if gs.len() == 1 { "" } else { "s" },
            match &at.chip {
                Some(c) => format!("on {c}"),
                None => format!("of QEMU {}", at.machine),
            },
            at.cpu,
            t.counters
        ),
    );
    let mut records = Vec::new();
    for (i, g) in gs.iter().enumerate() {
        let mut image = elf_bytes.clone();
        let id = crate::capture::pmu::run_id(i);
        let (flags, memory) = match out_addr.filter(|_| in_memory) {
            Some(a) => (wire::PMU_FLAG_MEMORY, Some((a, id))),
            None => (0, None),
        };
        elf::patch_symbol(
            &mut image,
            wire::PMU_CONFIG_SYMBOL,
            &wire::pmu_config_with(g, flags, id),
        )?;
        // A sampler linked in stays off: its interrupts would be counted inside the regions.
        if elf::symbol_address(&image, wire::CONFIG_SYMBOL).is_some() {
            elf::patch_config(
                &mut image,
                &wire::Config {
                    mode: wire::MODE_OFF,
                    sink: wire::SINK_SEMIHOSTING,
                    ..Default::default()
                },
            )?;
        }
        let kernel = dir.join(format!("loaded-{}.elf", i + 1));
        std::fs::write(&kernel, &image)?;
        let run = Group {
            args,
            p: &p,
            at: &at,
            dir: &dir,
            index: i,
            of: gs.len(),
        };
        let (bytes, full) = run.counts(kernel, memory)?;
        records.push(run.record(&bytes, full, g)?);
    }
    let el = records.first().map(|r| r.el).unwrap_or(0);
    let counters = records.first().map(|r| r.counters).unwrap_or(t.counters);
    Ok(Stat {
        cpu: t.cpu.clone(),
        counters,
        exception_level: el,
        groups: gs
            .iter()
            .map(|g| g.iter().map(|&c| t.name(c)).collect())
            .collect(),
        regions: merge(&t, &asked, &records),
        run_dir: dir,
    })
}

/// One run of the firmware, counting one group of events.
struct Group<'a> {
    args: &'a StatArgs,
    p: &'a Project,
    at: &'a Place,
    dir: &'a Path,
    index: usize,
    of: usize,
}

impl Group<'_> {
    /// The counts `kernel` left (read out of memory at `memory` when given, else its dump),
    /// and whether its buffer filled.
    fn counts(&self, kernel: PathBuf, memory: Option<(u32, u32)>) -> Result<(Vec<u8>, bool)> {
        let (i, n, dir) = (self.index, self.of, self.dir);
        let timeout = Duration::from_secs(self.args.timeout);
        if let Some(chip) = &self.at.chip {
            let (addr, id) = memory.context("no address for the counts")?;
            let conn = crate::exec::probe::Connection::new(
                chip,
                self.args.conn.settings(chip),
                self.p
                    .probe_runner()
                    .cloned()
                    .unwrap_or_default()
                    .or(self.p.probe_defaults.clone()),
            );
            let c = crate::exec::probe::pmu_counts(&conn, &kernel, addr, id, timeout)
                .with_context(|| {
                    format!(
                        "run {} of {n} on {chip} (its image is kept in {})",
                        i + 1,
                        kernel.display()
                    )
                })?;
            return Ok((c.dump, c.full));
        }
        let outcome = qemu::run(&qemu::RunSpec {
            qemu: self.at.qemu_path.clone(),
            machine: self.at.machine.clone(),
            extra_args: self.at.extra_args.clone(),
            cpu: self.at.cpu.clone(),
            kernel,
            icount_shift: 0,
            timeout,
            label: format!("group {} of {n}", i + 1),
            snapshot: None,
            output_log: Some(dir.join(format!("output-{}.txt", i + 1))),
            defmt_stdout: None,
            counting: None,
            budget: None,
            expected_samples: None,
            live: None,
            pmu_in_memory: memory,
            call_graph: None,
            contexts: None,
            start_marker: None,
            lap_fns: None,
            stack: None,
            tasks: None,
        })?;
        Ok(match (outcome.pmu_in_memory, outcome.dump) {
            (Some(c), _) => (c.dump, c.full),
            (None, Some(bytes)) => (bytes, false),
            (None, None) => bail!(
                "run {} of {n} sent no counts ({}); its output is in {}. Does the firmware end \
                 with `sampler_rt::pmu::finish`?",
                i + 1,
                match (outcome.timed_out, outcome.status) {
                    (true, _) => "timed out".to_owned(),
                    (_, Some(s)) => format!("QEMU exited with {s}"),
                    _ => "stopped".to_owned(),
                },
                dir.display()
            ),
        })
    }

    /// The counts kept, then checked and decoded.
    fn record(&self, bytes: &[u8], full: bool, g: &[u16]) -> Result<crate::dump::pmu::Record> {
        let (i, dir) = (self.index, self.dir);
        runs::write_atomic(&dir.join(format!("pmu-{}.dump", i + 1)), bytes)?;
        if full {
            bail!(
                "run {} left more counts than its buffer holds ({} bytes kept in {}): build \
                 the firmware with a larger SAMPLER_RT_PMU_OUT_BYTES (default 4096), or count \
                 fewer regions",
                i + 1,
                bytes.len(),
                dir.display()
            );
        }
        let (d, err) = dump::decode_partial(bytes);
        if let Some(e) = err {
            bail!("run {} sent a damaged dump: {e}", i + 1);
        }
        let Some(rec) = d.pmu else {
            bail!(
                "run {} sent no counts (a dump without a PMU record, in {}): does the firmware \
                 count regions (`sampler_rt::pmu::init`, then `pmu::Region`) and end with \
                 `sampler_rt::pmu::finish` or `sampler_rt::exit`?",
                i + 1,
                dir.display()
            );
        };
        match rec.status {
            wire::PMU_OK => {}
            wire::PMU_TOO_MANY => bail!(
                "the firmware refused a group of {} events: this CPU has {} event counters \
                 (PMCR_EL0.N). Leave out `--group-size`, or ask for fewer events per run",
                g.len(),
                rec.counters
            ),
            _ => bail!("this CPU has no PMUv3 (ID_AA64DFR0_EL1 = {:#x})", rec.dfr0),
        }
        Ok(rec)
    }
}
