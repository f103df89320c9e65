//! Settings a capture works out from the project and the command line: the QEMU machine, the
//! sampler's configuration on a board, the help for a crate not set up, what a live run says
//! when it ends. The flow itself is in [`super::capture`].

use anyhow::{Context, Result, bail};
use sampler_rt::wire;

use super::settings::{hist_layout, tag_for};
use crate::cli::RunArgs;
use crate::exec::machine::{self, Machine};
use crate::exec::qemu;
use crate::image::elf;
use crate::project::{self, Project};
use crate::term;

pub(crate) fn missing_setup_help(p: &Project, feature: &str) -> String {
    let dep = match crate::cmd::init::checkout_runtime() {
        Some(dir) => format!("path = \"{}\"", dir.display()),
        None => format!("version = \"{}\"", env!("CARGO_PKG_VERSION")),
    };
    format!(
        "`{}` is not set up for sampling. `cargo sample init` does it (and shows the change), or \
         add to {}:\n\n\
         [dependencies]\n\
         sampler-rt = {{ {dep}, optional = true }}\n\n\
         [features]\n\
         {feature} = [\"dep:sampler-rt\"]\n\n\
         and at the top of your entry point (`#[entry]`, RTIC's `#[init]`, \
         `#[embassy_executor::main]`):\n\n    \
         #[cfg(feature = \"{feature}\")]\n    sampler_rt::start();",
        p.package,
        p.manifest_path.display()
    )
}

/// Where the firmware runs in QEMU: the machine (with its options), the CPU, the executable the
/// runner names, and the runner's options that go to QEMU as they are.
pub struct QemuTarget {
    pub machine: &'static Machine,
    /// `-machine` as given (`virt,virtualization=on`).
    pub machine_arg: String,
    pub cpu: String,
    pub program: Option<String>,
    pub extra: Vec<String>,
}

/// The machine and CPU: `--machine`, else the runner's `-machine`, else the triple's default;
/// the runner's other QEMU options are kept (a note lists the ones cargo-sample replaces).
pub(crate) fn choose_machine(args: &RunArgs, p: &Project) -> Result<QemuTarget> {
    let q = p.qemu_runner();
    let name = match (&args.machine, q.and_then(|q| q.machine.clone()), &p.runner) {
        (Some(m), _, _) => m.clone(),
        (None, Some(m), _) => m,
        (None, None, Some(project::Runner::Other { program })) => bail!(
            "the runner `{program}` ({}) is neither QEMU nor probe-rs. Pass `--machine NAME` to \
             profile in QEMU (known: {}), or `--chip NAME` to profile on a board",
            p.runner_origin,
            machine::names()
        ),
        (None, None, _) => match machine::default_for(&p.triple) {
            Some(m) => {
                term::note(format!(
                    "no QEMU machine in the crate's runner; using {} for {}",
                    m.name, p.triple
                ));
                m.name.to_owned()
            }
            None => bail!(
                "no QEMU machine for target `{}`: pass `--machine` (known: {})",
                p.triple,
                machine::names()
            ),
        },
    };
    // `virt,virtualization=on`: options after the name go to QEMU as they are.
    let m = machine::find(name.split(',').next().unwrap_or(&name)).with_context(|| {
        let from = if args.machine.is_some() {
            "`--machine`".to_owned()
        } else {
            p.runner_origin.clone()
        };
        format!(
            "QEMU machine `{name}` (from {from}) is not one cargo-sample knows the clocks of \
             (known: {})",
            machine::names()
        )
    })?;
    if !m.repeats {
        term::note(format!(
            "QEMU's {} does not repeat a run exactly under `-icount`: its STM32 timers' \
             interrupts come at different instructions from run to run, with or without the \
             sampler, so two runs of the same firmware and seed may differ (every other \
             machine cargo-sample knows repeats them exactly)",
            m.name
        ));
    }
    if !m.targets.contains(&p.triple.as_str()) {
        term::warn(format!(
            "QEMU {} has a {} core, which does not run `{}` code",
            m.name, m.cpu, p.triple
        ));
    }
    let cpu = args
        .cpu
        .clone()
        .or(q.and_then(|q| q.cpu.clone()))
        .unwrap_or_else(|| m.cpu.to_owned());
    if let Some(q) = q {
        if let Some(script) = &q.script {
            term::note(format!(
                "the runner is a script ({}); cargo-sample runs the QEMU command line found in it \
                 itself: {} -machine {}",
                script.display(),
                q.program,
                q.machine.as_deref().unwrap_or(m.name)
            ));
        }
        let replaced = q.noteworthy_replacements();
        if !replaced.is_empty() {
            term::note(format!(
                "the runner's {} replaced by cargo-sample's own (it needs semihosting, its \
                 monitor, the firmware's UART on its output and its `-icount`){}",
                replaced
                    .iter()
                    .map(|r| format!("`{r}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
                    + if replaced.len() == 1 { " is" } else { " are" },
                if q.kept.is_empty() {
                    String::new()
                } else {
                    format!("; kept: `{}`", q.kept.join(" "))
                }
            ));
        }
    }
    Ok(QemuTarget {
        machine: m,
        machine_arg: if args.machine.is_some() || q.and_then(|q| q.machine.as_ref()).is_some() {
            name.clone()
        } else {
            m.name.to_owned()
        },
        cpu,
        program: q.map(|q| q.program.clone()),
        extra: q.map(|q| q.kept.clone()).unwrap_or_default(),
    })
}

/// Say how a live capture went: losses, and a firmware that ended between two reads.
/// Samples the host read too late (a ring read live, on a board or in QEMU).
pub(crate) fn warn_overwritten(l: &crate::capture::live::Live) {
    let read = l.pcs.len() as u64;
    if l.lost > 0 {
        let window = (l.state.tag_kind >> 8) & 0xFF;
        let stacks = if window != 0 {
            format!(
                "; with `--stacks {window}` a sample takes {} bytes of the ring, which holds {} \
                 of them (a smaller window leaves room for more)",
                l.state.entry_bytes(),
                l.state.capacity
            )
        } else {
            String::new()
        };
        term::warn(format!(
            "{} of {} samples were overwritten before the host read them (counted as lost): \
             lower the rate (`--period`), read more often (`--poll-interval`) or enlarge the \
             ring (`SAMPLER_RT_RING_SLOTS`){stacks}",
            l.lost,
            read + l.lost
        ));
    }
}

pub(crate) fn note_live(l: &crate::capture::live::Live, lo: &qemu::LiveOutcome) {
    warn_overwritten(l);
    if lo.unread_tail {
        warn_unread_tail(l);
    }
}

/// The target went away (the firmware ended, the link broke) before the host saw the sampler
/// stop: the samples taken after the last read are neither in the capture nor counted.
pub(crate) fn warn_unread_tail(l: &crate::capture::live::Live) {
    let limit = l.state.limit;
    let of = if limit > 0 {
        format!(" of the {limit} asked for")
    } else {
        String::new()
    };
    term::warn(format!(
        "the target went away before the host saw the sampler stop: the last read found {} \
         samples taken{of}; any taken after it are not in the capture (nor counted as lost). \
         A firmware that ends after `sampler_rt::flush()` waits for a host that keeps reading",
        l.taken()
    ));
}

/// The sampler's configuration on a board (through a probe or a serial port): SysTick at the
/// core clock, the period and random span in cycles, ring or bins, tags.
pub(crate) fn board_config(
    args: &RunArgs,
    elf_bytes: &[u8],
    fw: &elf::Firmware,
    sink: u8,
    (reload, jitter_mask): (u32, u32),
    requested: u32,
) -> Result<wire::Config> {
    let (tag_kind, tag_addr) = match &args.tag {
        Some(what) => tag_for(fw.aarch64, what, elf_bytes)?,
        None => (wire::TAG_NONE, 0),
    };
    let (mode, hist_base, hist_shift) = match args.mode {
        crate::cli::Mode::Ring => (wire::MODE_RING, 0, 0),
        crate::cli::Mode::Hist => {
            let text = fw.text.context("the firmware has no `__stext`/`__etext`")?;
            let (base, shift) = hist_layout(text, fw.hist_counters, args.bin_size)?;
            (wire::MODE_HIST, base, shift)
        }
    };
    Ok(wire::Config {
        mode,
        hist_base,
        hist_shift,
        sink,
        priority: args.priority.unwrap_or(0),
        timer: wire::TIMER_SYSTICK,
        reload,
        jitter_mask,
        limit: requested,
        seed: super::settings::generator_state(args.seed),
        tag_kind,
        tag_addr,
        stack_words: args.stacks.unwrap_or(0),
        frame_records: if args.stacks.is_some() {
            super::settings::DEFAULT_FRAME_RECORDS
        } else {
            0
        },
        // SysTick at the core clock: ticks are cycles.
        late_ticks: super::settings::late_ticks(1.0, false, true),
        ..wire::Config::default()
    })
}
