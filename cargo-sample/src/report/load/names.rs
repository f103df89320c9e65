//! Names of what a dump points at: tags (exceptions by their handlers, RTIC tasks, words by
//! the names the firmware sent), and the handlers the sampler cannot preempt.

use std::collections::HashMap;

use sampler_rt::wire;

use crate::dump::Dump;
use crate::image::disasm;
use crate::image::symbolize::Symbolizer;
use crate::report;

/// A name for each tag of a dump: exceptions by their handlers, words by the names the firmware
/// sent or the symbols they point to.
pub fn tag_names(
    kind: u8,
    tags: &[u32],
    names: &[(u32, String)],
    vectors: &[(u32, u32)],
    sym: &mut Symbolizer,
    mut code: Option<&mut disasm::Code>,
) -> HashMap<u32, String> {
    let rtic = kind == wire::TAG_XPSR && crate::image::rtic::is_rtic(sym);
    const SYSTEM: [&str; 16] = [
        "thread mode",
        "Reset",
        "NMI",
        "HardFault",
        "MemManage",
        "BusFault",
        "UsageFault",
        "SecureFault",
        "exception 8",
        "exception 9",
        "exception 10",
        "SVCall",
        "DebugMonitor",
        "exception 13",
        "PendSV",
        "SysTick",
    ];
    let mut out = HashMap::new();
    for &t in tags {
        if out.contains_key(&t) {
            continue;
        }
        let name = if kind == wire::TAG_XPSR {
            let n = t & 0x1FF;
            match n {
                0..16 => SYSTEM[n as usize].to_owned(),
                _ => {
                    let address = vectors.iter().find(|v| v.0 == n).map(|v| v.1 as u64);
                    let handler = address
                        .and_then(|a| sym.function_of(a))
                        .filter(|f| !f.contains("DefaultHandler"))
                        .map(str::to_owned);
                    let interrupt = match &handler {
                        Some(f) if *f == format!("IRQ{}", n - 16) => f.to_owned(),
                        Some(f) => format!("{f}, IRQ {}", n - 16),
                        None => format!("IRQ {}", n - 16),
                    };
                    // RTIC: the task the interrupt runs, by its name.
                    let task = match (rtic, address, code.as_deref_mut()) {
                        (true, Some(a), Some(c)) if handler.is_some() => {
                            crate::image::rtic::tasks_of(sym, c, a).describe(&interrupt)
                        }
                        _ => None,
                    };
                    match (task, &handler) {
                        (Some(t), _) => t,
                        (None, Some(f)) if *f == format!("IRQ{}", n - 16) => f.to_owned(),
                        (None, Some(f)) => format!("{f} (IRQ {})", n - 16),
                        (None, None) => format!("IRQ {}", n - 16),
                    }
                }
            }
        } else if let Some((_, n)) = names.iter().rev().find(|(tag, _)| *tag == t) {
            n.clone()
        } else if t == 0 {
            "0 (no tag)".to_owned()
        } else {
            let name = sym.name_address(t);
            // An Embassy task's header is in its task pool: `crate::task_fn::POOL`.
            match name.split_once("::POOL") {
                Some((task, _)) => format!("task {task}"),
                None => name,
            }
        };
        out.insert(t, name);
    }
    out
}

/// Handlers the firmware left as urgent as the sampler (their priority byte at or below the
/// sampler's): a sample due while one runs waits until it returns and lands in the code it
/// interrupted, so its time is counted there. Only handlers the image has (not cortex-m-rt's
/// defaults, not the sampler's own), from the priorities the firmware sent at its end.
pub fn unpreemptable(urgent: Option<&[String]>, own: u8) -> Option<report::Diagnostic> {
    let names = urgent?;
    if names.is_empty() {
        return None;
    }
    let one = names.len() == 1;
    let fix = if own == 0 {
        format!(
            "Nothing is more urgent than 0: give {} a less urgent priority (a larger number) \
             where the application allows it",
            if one { "it" } else { "them" }
        )
    } else {
        format!(
            "Sample at a more urgent priority (`--priority`, 0 is the most urgent), or give {} \
             a less urgent one",
            if one { "it" } else { "them" }
        )
    };
    Some(report::Diagnostic::warning(
        report::Finding::Unpreemptable,
        format!(
            "the sampler (priority {own:#04x}) cannot preempt {} ({}): a sample due while {} \
             runs waits until it returns and is taken in the code it interrupted, so that time \
             is counted there and {} never {} in the profile. {fix}",
            names.join(", "),
            if one {
                "as urgent as the sampler or more"
            } else {
                "each as urgent as the sampler or more"
            },
            if one { "it" } else { "one" },
            if one { "it" } else { "they" },
            if one { "shows" } else { "show" },
        ),
    ))
}

/// A handler the sampler cannot preempt.
pub struct Urgent {
    pub exception: u16,
    /// The handler's function.
    pub function: String,
    /// Its function's name (RTIC: the task's).
    pub label: String,
    pub priority: u8,
}

impl Urgent {
    /// `NAME at 0xPP`.
    pub fn said(&self) -> String {
        format!("{} at {:#04x}", self.label, self.priority)
    }
}

/// The image's handlers (not cortex-m-rt's defaults, not the sampler's own) that the
/// priorities the firmware sent at its end make as urgent as the sampler or more (RTIC: named
/// by the task); `None` when the firmware sent no priorities.
pub fn urgent(
    dump: &Dump,
    vectors: &[(u32, u32)],
    sym: &mut Symbolizer,
    code: Option<&mut disasm::Code>,
) -> Option<Vec<Urgent>> {
    if dump.priorities.is_empty() {
        return None;
    }
    let own = dump.info.priority;
    let mut code = code;
    let mut found = Vec::new();
    let rtic = crate::image::rtic::is_rtic(sym);
    for &(exc, prio, enabled) in &dump.priorities {
        if !enabled || prio > own {
            continue;
        }
        let Some(addr) = vectors
            .iter()
            .find(|v| v.0 == u32::from(exc))
            .map(|v| v.1 as u64)
        else {
            continue;
        };
        let Some(name) = sym.function_of(addr).map(str::to_owned) else {
            continue;
        };
        if name.starts_with("DefaultHandler") || sym.is_sampler(addr) {
            continue;
        }
        let label = match (exc >= 16, code.as_deref_mut()) {
            (true, Some(c)) if rtic => crate::image::rtic::tasks_of(sym, c, addr)
                .describe(&name)
                .unwrap_or_else(|| name.clone()),
            _ => name.clone(),
        };
        found.push(Urgent {
            exception: exc,
            function: name,
            label,
            priority: prio,
        });
    }
    Some(found)
}
