//! RTIC applications read from the image: which tasks an interrupt handler runs.
//!
//! RTIC v2 turns each hardware task into the interrupt handler it is bound to (`GPIOA` calls
//! or inlines `app::control`) and runs software tasks (async functions) from dispatcher
//! interrupts, several tasks of one priority sharing one dispatcher. The handler's own code,
//! its inline frames and its direct calls name them.

use super::disasm::Code;
use super::symbolize::Symbolizer;

/// The tasks one interrupt handler runs.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tasks {
    /// Hardware tasks bound to the interrupt (normally one).
    pub hardware: Vec<String>,
    /// Software tasks the interrupt dispatches (their futures are polled there).
    pub software: Vec<String>,
}

impl Tasks {
    /// How a report names the interrupt: `control (GPIOA, IRQ 0)`, `software tasks foo, bar
    /// (dispatcher QEI0, IRQ 13)`; `None` when it runs no task.
    pub fn describe(&self, interrupt: &str) -> Option<String> {
        match (self.hardware.as_slice(), self.software.as_slice()) {
            ([], []) => None,
            (hw, []) => Some(format!("{} ({interrupt})", hw.join(", "))),
            ([], [one]) => Some(format!("software task {one} (dispatcher {interrupt})")),
            ([], sw) => Some(format!(
                "software tasks {} (dispatcher {interrupt}, shared)",
                sw.join(", ")
            )),
            (hw, sw) => Some(format!(
                "{} and software tasks {} ({interrupt})",
                hw.join(", "),
                sw.join(", ")
            )),
        }
    }
}

/// Whether the image is an RTIC application.
pub fn is_rtic(sym: &Symbolizer) -> bool {
    sym.any_function(|f| f.starts_with("rtic::") || f.contains("__rtic_"))
}

/// The RTIC tasks the handler at `start` runs: the functions of the application's `app`
/// module among its inline frames and its direct calls (one level down).
pub fn tasks_of(sym: &mut Symbolizer, code: &mut Code, start: u64) -> Tasks {
    let mut names: Vec<String> = Vec::new();
    let Some(crate::image::CodeRange { start: lo, end: hi }) = sym.range_of(start) else {
        return Tasks::default();
    };
    let insns: Vec<(u32, Option<u32>)> = code
        .function(lo as u32, hi as u32)
        .iter()
        .map(|i| (i.addr, i.target))
        .collect();
    for (addr, target) in insns {
        for f in &sym.resolve(addr).frames {
            names.push(f.function.clone());
        }
        if let Some(t) = target
            && !(lo..hi).contains(&(t as u64))
            && let Some(f) = sym.function_of(t as u64)
        {
            names.push(f.to_owned());
        }
    }
    // The handler itself is generated in the app module too (`app::GPIOA`).
    let own = sym
        .function_of(start)
        .map(|f| f.rsplit("::").next().unwrap_or(f).to_owned());
    // A hardware task is a plain function of the app module (`app::control`); a software task
    // is an async function, seen only through its future's body (`app::sensor::{{closure}}`).
    // A hardware task's `lock` closures are its own closures, not software tasks.
    let mut plain: Vec<String> = Vec::new();
    let mut bodies: Vec<String> = Vec::new();
    for n in names {
        let Some((_, rest)) = n.split_once("::app::") else {
            continue;
        };
        let task = rest.split("::").next().unwrap_or(rest);
        if task.is_empty()
            || task.starts_with("__")
            || task.starts_with('<')
            || task == "idle"
            || own.as_deref() == Some(task)
        {
            continue;
        }
        let list = if rest == task {
            &mut plain
        } else {
            &mut bodies
        };
        if !list.iter().any(|t| t == task) {
            list.push(task.to_owned());
        }
    }
    let software = bodies.into_iter().filter(|b| !plain.contains(b)).collect();
    Tasks {
        hardware: plain,
        software,
    }
}
