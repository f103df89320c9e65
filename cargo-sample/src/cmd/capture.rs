//! The one flow every capture goes through, whatever runs the firmware (QEMU's semihosting
//! dump, a live ring, a probe, a serial port, exact counting, PMU counting):
//!
//! 1. `preflight`: what can be refused before a build (the crate not set up, a `--tag` that
//!    cannot work) and the warning for an unoptimised profile;
//! 2. `build`: the firmware built and its image read once, with the check that sampler-rt's
//!    runtime survived the link;
//! 3. `Run::start`: a new run directory holding the image as built, the image that runs (the
//!    sampler's configuration written into it) and `run.json`;
//! 4. the mode's own run, which keeps every raw byte in the directory as it arrives;
//! 5. `Run::finish` (or `Run::failed`): the run's end state saved, where it is said, and an
//!    error naming the directory when nothing reportable came back.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use sampler_rt::wire;

use super::settings::{check_stacks_before_build, check_tag_before_build, warn_if_unoptimised};
use crate::cli::{CargoArgs, RunArgs};
use crate::exec::machine::{self, Machine};
use crate::exec::qemu;
use crate::image::elf;
use crate::project::{self, Project, Selection, firmware};
use crate::runs::{self, RunMeta, RunState};
use crate::term;

/// What to refuse before building, and what to warn about: a sampling run (`sampler`) needs
/// the crate set up for sampler-rt and a `--tag` that can work.
pub(crate) fn preflight(args: &RunArgs, p: &Project, sampler: bool) -> Result<()> {
    if sampler {
        check_tag_before_build(args, p)?;
    }
    check_stacks_before_build(args, p)?;
    warn_if_unoptimised(p, &args.cargo);
    if sampler && (!p.has_feature || !p.has_dependency) {
        bail!(missing_setup_help(p, &args.cargo.feature_name));
    }
    Ok(())
}

/// A built image, read and inspected once.
pub(crate) struct Image {
    pub bytes: Vec<u8>,
    pub fw: elf::Firmware,
}

/// Inspect a built image (its bytes as they were read when the build ended).
pub(crate) fn read_image(built: firmware::Built) -> Result<Image> {
    let fw = elf::inspect(&built.bytes)
        .with_context(|| format!("the built firmware {}", built.elf.display()))?;
    Ok(Image {
        bytes: built.bytes,
        fw,
    })
}

/// A prebuilt ELF (`--elf`), read and inspected as a build's would be.
pub(crate) fn read_prebuilt(path: &Path) -> Result<Image> {
    let bytes =
        std::fs::read(path).with_context(|| format!("reading `--elf {}`", path.display()))?;
    let fw = elf::inspect(&bytes).with_context(|| format!("`--elf {}`", path.display()))?;
    Ok(Image { bytes, fw })
}

/// The sampler's state block `(address, size)`: the image must carry sampler-rt's runtime,
/// which the link drops when nothing calls it. `calls` is what the entry point should call.
pub(crate) fn sampler_state(img: &Image, feature: &str, calls: &str) -> Result<(u64, u64)> {
    match (img.fw.config, img.fw.state) {
        (Some(_), Some(state)) => Ok(state),
        _ => bail!(
            "the firmware does not contain sampler-rt's runtime (no `{}` symbol): it is linked \
             out when nothing calls it. Does `main` call {calls} when the `{feature}` feature is on?",
            wire::CONFIG_SYMBOL
        ),
    }
}

/// What a run needs of sampler-rt in the firmware.
#[derive(Clone, Copy)]
pub(crate) enum Runtime<'a> {
    /// Nothing: the program as it is (exact counting, DWT and PCSR sampling).
    Off,
    /// The feature on; the command checks the parts it uses (`stat`'s PMU blocks).
    On,
    /// The sampler, which the entry point starts by calling this.
    Sampler(&'a str),
}

/// The firmware built, and its image read. With [`Runtime::Sampler`] the image must still hold
/// sampler-rt's runtime after the link (then `fw.state` is its state block).
pub(crate) fn build(p: &Project, cargo: &CargoArgs, runtime: Runtime) -> Result<Image> {
    let feature = !matches!(runtime, Runtime::Off);
    let built = firmware::build(p, &Selection::from(cargo), feature, &[])?;
    let img = read_image(built)?;
    if let Runtime::Sampler(calls) = runtime {
        sampler_state(&img, &cargo.feature_name, calls)?;
    }
    Ok(img)
}

/// `--align N`: what aligning every function cost.
pub(crate) struct Alignment {
    pub to: u32,
    /// Code bytes before and after.
    pub plain_bytes: u64,
    pub grown_bytes: u64,
    /// Precompiled functions that kept their own alignment.
    pub unaligned: Vec<String>,
}

/// [`build`] with every function aligned to `n` bytes (with the sampler): the plain build too,
/// to say what the alignment cost.
pub(crate) fn build_aligned(
    p: &Project,
    cargo: &CargoArgs,
    n: u32,
    calls: &str,
) -> Result<(Image, Alignment)> {
    let sel = Selection::from(cargo);
    let plain = firmware::build(p, &sel, true, &[])?;
    let plain_bytes = elf::code_bytes(&plain.bytes);
    let aligned = firmware::build_aligned(p, &sel, true, n)?;
    let img = read_image(aligned)?;
    let odd = elf::unaligned_functions(&img.bytes, n as u64);
    let grown = elf::code_bytes(&img.bytes);
    term::status(
        "Aligned",
        format!(
            "every function to {n} bytes: code {plain_bytes} -> {grown} bytes ({:+}, {:+.1} %){}",
            grown as i64 - plain_bytes as i64,
            100.0 * (grown as f64 / plain_bytes.max(1) as f64 - 1.0),
            if odd.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} precompiled function{} kept {}: {}",
                    odd.len(),
                    if odd.len() == 1 { "" } else { "s" },
                    if odd.len() == 1 { "its own" } else { "theirs" },
                    odd.join(", ")
                )
            }
        ),
    );
    sampler_state(&img, &cargo.feature_name, calls)?;
    Ok((
        img,
        Alignment {
            to: n,
            plain_bytes,
            grown_bytes: grown,
            unaligned: odd,
        },
    ))
}

/// What every run's `run.json` starts with: the project, the build and the start.
pub(crate) fn project_meta(p: &Project, cargo: &Selection) -> RunMeta {
    RunMeta {
        format_version: 1,
        package: p.package.clone(),
        target_name: p.target_name.clone(),
        triple: p.triple.clone(),
        profile: firmware::profile_name(cargo),
        workspace_root: Some(p.workspace_root.clone()),
        started_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        state: RunState::Running,
        ..RunMeta::default()
    }
}

/// A new run directory named after `name`, holding the image as built and, with the sampler's
/// configuration written into it, the image that runs (the same bytes when there is none).
pub(crate) fn new_dir(
    p: &Project,
    name: &str,
    elf_bytes: &[u8],
    config: Option<&wire::Config>,
) -> Result<PathBuf> {
    let dir = runs::create(&runs::runs_dir(&firmware::own_dir(p)), name)?;
    std::fs::write(dir.join(runs::ELF), elf_bytes)
        .with_context(|| format!("saving the ELF in {}", dir.display()))?;
    let mut loaded = elf_bytes.to_vec();
    if let Some(c) = config {
        elf::patch_config(&mut loaded, c)?;
    }
    std::fs::write(dir.join(runs::LOADED_ELF), &loaded)?;
    Ok(dir)
}

/// A run under way: its directory and its `run.json`, saved at every step.
pub(crate) struct Run {
    pub dir: PathBuf,
    pub meta: RunMeta,
}

impl Run {
    /// The run directory with its images (see [`new_dir`]) and `meta` saved as `run.json`.
    pub fn start(
        p: &Project,
        elf_bytes: &[u8],
        config: Option<&wire::Config>,
        meta: RunMeta,
    ) -> Result<Run> {
        let dir = new_dir(p, &p.target_name, elf_bytes, config)?;
        let run = Run { dir, meta };
        run.save()?;
        Ok(run)
    }

    /// `run.json` as it stands.
    pub fn save(&self) -> Result<()> {
        runs::save_meta(&self.dir, &self.meta)
    }

    /// Keep raw bytes in the run directory (atomically: a crash leaves the old file or the new).
    pub fn keep(&self, name: &str, bytes: &[u8]) -> Result<()> {
        runs::write_atomic(&self.dir.join(name), bytes)
    }

    /// The run could not go on: marked failed, and the error says where it is kept.
    pub fn failed(mut self, e: anyhow::Error) -> anyhow::Error {
        self.meta.state = RunState::Failed;
        if let Err(save) = self.save() {
            return e.context(format!("(and saving its state failed: {save:#})"));
        }
        anyhow::anyhow!(
            "{e:#}\n(the image and the run are kept in {})",
            self.dir.display()
        )
    }

    /// The end every mode shares: the state saved, the directory said, and the directory back
    /// when `product` (the dump, the counts) is in it; otherwise `why_not` explains.
    pub fn finish(
        mut self,
        state: RunState,
        product: &str,
        why_not: impl FnOnce(&Path) -> String,
    ) -> Result<PathBuf> {
        self.meta.state = state;
        self.save()?;
        term::status("Saved", self.dir.display());
        if !self.dir.join(product).is_file() {
            bail!(why_not(&self.dir));
        }
        Ok(self.dir)
    }
}

/// What a QEMU run's end says, for sampled and counted runs alike: a fault, Ctrl-C, the
/// timeout, or the firmware's own failing exit (not when it ran into the instruction budget).
/// `so_far` names what the report holds ("the samples taken").
pub(crate) fn warn_qemu_end(outcome: &qemu::Outcome, timeout_s: u64, so_far: &str) {
    if let Some(c) = outcome.core.filter(|c| c.faulted()) {
        term::warn(format!(
            "the firmware is stuck in {} (PC {:#010x}); reporting {so_far} before",
            c.describe(),
            c.pc
        ));
    } else if outcome.interrupted {
        term::warn(format!("interrupted: reporting {so_far} so far"));
    } else if outcome.timed_out {
        term::warn(format!(
            "the run did not finish within {timeout_s} s (`--timeout`); reporting {so_far} so far"
        ));
    } else if !outcome.budget_reached
        && let Some(status) = outcome.status
        && !status.success()
    {
        match status.code() {
            Some(code) => term::warn(format!("the firmware exited with code {code}")),
            None => term::warn(format!("QEMU ended abnormally ({status})")),
        }
    }
}

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
