//! Which timer paces the sampler. SysTick, unless the firmware owns it (an RTIC monotonic, a
//! HAL's tick): then a timer of the machine whose interrupt the firmware leaves to the default
//! handler, found in the built image. sampler-rt is built again with that timer's interrupt
//! handler in it (`SAMPLER_RT_TIMER_VECTOR`, `SAMPLER_RT_TIMER_ACK`) and SysTick left alone,
//! and the choice is remembered for the crate so that the next run builds once.

use anyhow::{Result, bail};

use super::capture::{self, Image, Runtime};
use super::settings::Timer;
use crate::cli::RunArgs;
use crate::exec::machine::{DeviceTimer, Machine};
use crate::image::wiring;
use crate::project::{Project, Selection, firmware};
use crate::term;

/// sampler-rt's build-time settings for a device timer's handler.
const VECTOR_ENV: &str = "SAMPLER_RT_TIMER_VECTOR";
const ACK_ENV: &str = "SAMPLER_RT_TIMER_ACK";

/// SysTick's control and reload registers: code that holds their address programs SysTick.
const SYST_CSR: u32 = 0xE000_E010;
const SYST_CVR: u32 = 0xE000_E018;

/// The build environment that builds `t`'s handler in, under the vector name `vector`.
fn env_for(t: &DeviceTimer, vector: &str) -> Vec<(String, String)> {
    vec![
        (VECTOR_ENV.to_owned(), vector.to_owned()),
        (ACK_ENV.to_owned(), t.ack.to_string()),
    ]
}

/// Build the firmware with the sampler, paced by `timer` (`explicit`: the user chose it), or,
/// when the user did not choose and the firmware owns SysTick, by a free timer of `m`. Returns
/// the image and the timer that paces it.
pub(crate) fn build(
    p: &Project,
    args: &RunArgs,
    m: &Machine,
    timer: Timer,
    explicit: bool,
    calls: &str,
) -> Result<(Image, Timer)> {
    let cortex_m = !m.targets.iter().any(|t| t.starts_with("aarch64"));
    if !cortex_m || args.laps {
        return Ok((
            capture::build(p, &args.cargo, Runtime::Sampler(calls))?,
            timer,
        ));
    }
    let key = format!(
        "{} on {}",
        crate_key(p, &Selection::from(&args.cargo)),
        m.name
    );
    let remembered = remembered(p, &key);
    // A timer of the machine: asked for by name, or chosen for this crate before.
    let mut wanted: Option<&'static DeviceTimer> = match timer {
        Timer::Device { known: Some(t), .. } => Some(t),
        Timer::SysTick if !explicit => remembered
            .as_ref()
            .filter(|r| r.auto)
            .and_then(|r| m.timers.iter().find(|t| t.name == r.timer)),
        _ => None,
    };
    if let (Some(t), Some(r)) = (wanted, &remembered)
        && t.name == r.timer
    {
        let img = build_with(p, args, env_for(t, &r.vector), calls)?;
        // A timer chosen because the firmware owned SysTick (or its Embassy statistics time
        // polls with it): only while it still does.
        let stale = r.auto
            && !explicit
            && timer == Timer::SysTick
            && systick_owner(&img).is_none()
            && !crate::image::elf::keeps_task_statistics(&img.bytes);
        if !stale {
            return Ok((img, device(t)));
        }
        term::note(format!(
            "the firmware no longer owns SysTick: sampling on it again (`{}`, chosen for this \
             crate when it did, is forgotten)",
            t.name
        ));
        forget(p, &key);
        wanted = None;
    }
    let (inspect, owner) = match first_build(p, args, timer, explicit, wanted.is_some(), calls)? {
        First::Done(img, timer) => return Ok((img, timer)),
        First::Inspect(img, owner) => (img, owner),
    };
    let for_tasks = owner.as_deref() == Some(TASK_CLOCK);
    let (t, vector) = match pick_free(m, &inspect, wanted, owner.as_deref()) {
        Ok(pick) => pick,
        // Embassy's polls are then counted, not timed; the report says so too.
        Err(_) if for_tasks => {
            let timers: Vec<String> = m.timers.iter().map(|t| t.describe()).collect();
            let why = match timers.as_slice() {
                [] => "it has no device timer the sampler drives".to_owned(),
                [one] => format!("{one} is the application's"),
                [rest @ .., last] => {
                    format!("{} and {last} are the application's", rest.join(", "))
                }
            };
            term::note(format!(
                "no timer of {} is free to pace the sampler ({why}): it samples on SysTick, \
                 and the Embassy tasks' polls are counted, not timed (QEMU models no cycle \
                 counter)",
                m.name
            ));
            return Ok((inspect, timer));
        }
        Err(e) => return Err(e),
    };
    if for_tasks {
        term::note(format!(
            "the sampler is paced by {} (its interrupt `{vector}` is free), so that SysTick \
             times the Embassy tasks' polls (the core has no cycle counter QEMU models). \
             `--timer systick` samples on SysTick and counts the polls without timing them",
            t.describe()
        ));
    } else if let Some(owner) = &owner {
        term::note(format!(
            "the firmware owns SysTick ({owner}): the sampler is paced by \
             {} instead, whose interrupt (`{vector}`) the firmware leaves free. `--timer` \
             chooses another",
            t.describe()
        ));
    }
    let img = build_with(p, args, env_for(t, &vector), calls)?;
    remember(
        p,
        &key,
        &Remembered {
            timer: t.name.to_owned(),
            vector,
            auto: owner.is_some(),
        },
    );
    Ok((img, device(t)))
}

/// What the first build says.
enum First {
    /// The sampler is paced as asked: nothing more to build.
    Done(Image, Timer),
    /// A timer must be found: the image to look for a free one in, and who owns SysTick.
    Inspect(Image, Option<String>),
}

/// The build as asked (with no sampler vector when a timer is `wanted`); it shows whether the
/// firmware owns SysTick.
fn first_build(
    p: &Project,
    args: &RunArgs,
    timer: Timer,
    explicit: bool,
    wanted: bool,
    calls: &str,
) -> Result<First> {
    let first = if wanted {
        build_with(
            p,
            args,
            vec![(VECTOR_ENV.to_owned(), "none".to_owned())],
            calls,
        )
    } else {
        capture::build(p, &args.cargo, Runtime::Sampler(calls))
    };
    Ok(match first {
        Err(e)
            if timer == Timer::SysTick
                && !explicit
                && format!("{e:#}").contains(firmware::DUPLICATE_SYSTICK) =>
        {
            // Without LTO the link refuses two SysTick handlers: build without sampler-rt's
            // to read the image.
            term::note(
                "the link found two SysTick handlers, the application's and sampler-rt's: \
                 building again to find a free timer for the sampler",
            );
            let img = build_with(
                p,
                args,
                vec![(VECTOR_ENV.to_owned(), "none".to_owned())],
                calls,
            )?;
            let owner = wiring::systick_owner(&img.bytes)
                .unwrap_or_else(|| "the application's `SysTick`".to_owned());
            First::Inspect(img, Some(SysTickOwner::Vector(owner).said()))
        }
        Err(e) => return Err(e),
        Ok(img) if wanted => First::Inspect(img, None),
        Ok(img) => {
            match systick_owner(&img) {
                Some(owner) if timer == Timer::SysTick && !explicit => {
                    First::Inspect(img, Some(owner.said()))
                }
                // Asked for: the wiring check refuses a vector that is not the sampler's; a
                // firmware that only programs SysTick would reprogram it under the sampler.
                Some(owner @ SysTickOwner::Code(_)) if timer == Timer::SysTick => {
                    let owner = owner.said();
                    term::warn(format!(
                        "the firmware owns SysTick ({owner}), and `--timer systick` samples on \
                         it: each side reprograms it under the other, so neither the \
                         application's timing nor the sampling period holds. Leave `--timer` \
                         out to sample on a free timer"
                    ));
                    First::Done(img, timer)
                }
                // sampler-rt's Embassy statistics time polls with SysTick where there is no
                // cycle counter (QEMU models none): a free timer paces the sampler instead.
                None if timer == Timer::SysTick
                    && !explicit
                    && crate::image::elf::keeps_task_statistics(&img.bytes) =>
                {
                    First::Inspect(img, Some(TASK_CLOCK.to_owned()))
                }
                _ => First::Done(img, timer),
            }
        }
    })
}

/// The reason a free timer paces the sampler in an image that keeps Embassy task statistics.
const TASK_CLOCK: &str = "sampler-rt's Embassy statistics time polls with it";

/// A timer of `m` whose interrupt the image leaves free (the `wanted` one, when given), and the
/// name of its vector; `owner`: who owns SysTick, for the error when there is none.
fn pick_free(
    m: &Machine,
    inspect: &Image,
    wanted: Option<&'static DeviceTimer>,
    owner: Option<&str>,
) -> Result<(&'static DeviceTimer, String)> {
    let candidates: Vec<&'static DeviceTimer> = match wanted {
        Some(t) => vec![t],
        None => m.timers.iter().collect(),
    };
    // Free: its interrupt goes to the default handler under a name the image knows (the
    // device crate's; a firmware built for another chip has none of the timer's names), and
    // no code of the firmware drives the timer.
    let pick = candidates.iter().find_map(|t| {
        let name = wiring::free_vector(&inspect.bytes, t.irq, t.vectors)??;
        if wanted.is_none()
            && wiring::code_refers_to(&inspect.bytes, t.base, t.base + t.span()).is_some()
        {
            return None;
        }
        Some((*t, name))
    });
    let Some((t, vector)) = pick else {
        match (wanted, owner) {
            (Some(t), _) => bail!(
                "{}'s interrupt (IRQ {}) cannot pace the sampler: either the application \
                 handles it (its vector does not go to the default handler) or the image has no \
                 interrupt of that name ({}; is the firmware built for {}?). Choose another \
                 timer with `--timer` ({})",
                t.name,
                t.irq,
                t.vectors.join(", "),
                m.name,
                timer_names(m)
            ),
            (None, Some(owner)) => bail!(
                "the firmware owns SysTick ({owner}), and {} has no \
                 other timer that cargo-sample knows and the firmware leaves free{}. Sampling on \
                 SysTick would break the application's time base. What can be done: pace the \
                 sampler with a timer of your chip the application leaves free — define its \
                 handler with `sampler_rt::timer_interrupt!(NAME, ack = V)` (V: 1 for `cmsdk` \
                 and `gptm`, 0 for `nrf` and `stm32`) and run with `--timer cmsdk:BASE:IRQ`, \
                 `gptm:BASE:IRQ`, `nrf:BASE:IRQ` or `stm32:BASE:IRQ` — or profile with \
                 `--exact` (instruction counts, no timer)",
                m.name,
                if m.timers.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (of its timers {}, none has its interrupt free under its device \
                         crate's name in this image, or the firmware drives them)",
                        timer_names(m)
                    )
                }
            ),
            (None, None) => unreachable!("a pick is made only for an owner or a wanted timer"),
        }
    };
    Ok((t, vector))
}

/// On a board (no table of the chip's timers): build with the sampler on SysTick, unless the
/// firmware owns SysTick; then build again without sampler-rt's SysTick handler, so that the
/// firmware paces the sampler with a timer of its own (`sampler_rt::start_with_timer`; without
/// one, sampler-rt sees SysTick is not its own and does not start, and the report says so).
/// Returns the image and whether the sampler may take SysTick.
pub(crate) fn build_on_board(p: &Project, args: &RunArgs, calls: &str) -> Result<(Image, bool)> {
    let leave_systick = |owner: String| -> Result<(Image, bool)> {
        term::note(format!(
            "the firmware owns SysTick ({owner}): sampler-rt is built without its SysTick \
             handler, and the firmware's own timer paces it (`sampler_rt::start_with_timer`; \
             the guide, docs/guide/timers.md: \"When SysTick is yours\")"
        ));
        let img = build_with(
            p,
            args,
            vec![(VECTOR_ENV.to_owned(), "none".to_owned())],
            calls,
        )?;
        Ok((img, false))
    };
    match capture::build(p, &args.cargo, Runtime::Sampler(calls)) {
        Err(e) if format!("{e:#}").contains(firmware::DUPLICATE_SYSTICK) => {
            leave_systick("the link found the application's SysTick handler".to_owned())
        }
        Err(e) => Err(e),
        Ok(img) => match systick_owner(&img) {
            Some(owner) => leave_systick(owner.said()),
            None => Ok((img, true)),
        },
    }
}

/// How the firmware owns SysTick.
enum SysTickOwner {
    /// Its vector is the application's handler (named).
    Vector(String),
    /// The firmware's code programs the registers (a polled delay; the function named).
    Code(String),
}

impl SysTickOwner {
    /// In words, for messages.
    fn said(&self) -> String {
        match self {
            SysTickOwner::Vector(h) => format!("its vector points at {h}"),
            SysTickOwner::Code(f) => format!("{f} programs it"),
        }
    }
}

/// Whether the firmware owns SysTick, and how.
fn systick_owner(img: &Image) -> Option<SysTickOwner> {
    wiring::systick_owner(&img.bytes)
        .map(SysTickOwner::Vector)
        .or_else(|| wiring::code_refers_to(&img.bytes, SYST_CSR, SYST_CVR).map(SysTickOwner::Code))
}

fn device(t: &'static DeviceTimer) -> Timer {
    Timer::Device {
        kind: t.kind,
        base: t.base,
        irq: t.irq,
        known: Some(t),
    }
}

fn timer_names(m: &Machine) -> String {
    m.timers
        .iter()
        .map(|t| format!("`{}`", t.name))
        .collect::<Vec<_>>()
        .join(", ")
}

fn build_with(
    p: &Project,
    args: &RunArgs,
    env: Vec<(String, String)>,
    calls: &str,
) -> Result<Image> {
    let mut sel = Selection::from(&args.cargo);
    sel.env = env;
    let built = firmware::build(p, &sel, true, &[])?;
    let img = capture::read_image(built)?;
    capture::sampler_state(&img, &args.cargo.feature_name, calls)?;
    Ok(img)
}

fn crate_key(p: &Project, sel: &Selection) -> String {
    format!(
        "{} {}/{}/{}",
        p.manifest_path.display(),
        p.target_name,
        p.triple,
        sel.profile_name()
    )
}

/// A device timer used for this crate before: its name, the spelling of its vector, and
/// whether cargo-sample chose it (the firmware owns SysTick: the default from then on) or the
/// user did (`--timer NAME`: only the spelling is reused).
struct Remembered {
    timer: String,
    vector: String,
    auto: bool,
}

fn remembered(p: &Project, key: &str) -> Option<Remembered> {
    let e = crate::runs::recall(&firmware::own_dir(p).join("timers.json"), key)?;
    Some(Remembered {
        timer: e.get("timer")?.as_str()?.to_owned(),
        vector: e.get("vector")?.as_str()?.to_owned(),
        auto: e.get("auto")?.as_bool()?,
    })
}

fn forget(p: &Project, key: &str) {
    crate::runs::remember(
        &firmware::own_dir(p).join("timers.json"),
        key,
        serde_json::Value::Null,
    );
}

fn remember(p: &Project, key: &str, r: &Remembered) {
    crate::runs::remember(
        &firmware::own_dir(p).join("timers.json"),
        key,
        serde_json::json!({ "timer": r.timer, "vector": r.vector, "auto": r.auto }),
    );
}
