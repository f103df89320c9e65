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

/// Where an RTIC task is written: `file:line` of its `fn` in the source of the application's
/// `app` module (the compiler places its code at the `#[rtic::app]` line, which names no
/// task), when that source is on disk.
pub fn task_fn_line(sym: &mut Symbolizer, task: &str) -> Option<String> {
    let starts: Vec<u64> = sym
        .all_functions()
        .into_iter()
        .filter(|f| f.2.contains("::app::"))
        .map(|f| f.0)
        .collect();
    let mut files: Vec<String> = Vec::new();
    for start in starts {
        let r = sym.resolve(start as u32);
        if let Some(file) = r.frames.last().and_then(|f| f.file.clone())
            && !files.contains(&file)
        {
            files.push(file);
        }
    }
    for file in files {
        let Some(path) = sym.source_file(&file) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            let mut words = line.split(|c: char| !(c.is_alphanumeric() || c == '_'));
            if words.any(|w| w == "fn") && fn_named(line, task) {
                return Some(format!("{file}:{}", i + 1));
            }
        }
    }
    None
}

/// Whether a line declares `fn NAME` (its next word after `fn`).
fn fn_named(line: &str, name: &str) -> bool {
    line.split("fn ").skip(1).any(|rest| {
        let rest = rest.trim_start();
        rest.strip_prefix(name)
            .is_some_and(|after| !after.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
    })
}

/// RTIC v1's software tasks: each has a free queue, `app::__rtic_internal_NAME_FQ`, which v2
/// has not (its software tasks are async functions).
fn v1_software_tasks(sym: &Symbolizer) -> Vec<String> {
    sym.object_names()
        .filter_map(|o| {
            let (_, rest) = o.split_once("::app::__rtic_internal_")?;
            let task = rest.strip_suffix("_FQ")?;
            (!task.is_empty()).then(|| task.to_owned())
        })
        .collect()
}

/// The task of the app module a frame's function belongs to (`app::control` → `control`,
/// `app::sensor::{{closure}}` → `sensor`), with whether it is the function itself (a plain
/// function) or a body inside it (an async task's future); `None` outside the app module and
/// for RTIC's generated code.
fn app_task(function: &str) -> Option<(&str, bool)> {
    let (_, rest) = function.split_once("::app::")?;
    let task = rest.split("::").next().unwrap_or(rest);
    if task.is_empty()
        || task.starts_with("__")
        || task.starts_with('<')
        || task == "idle"
        || task == "monotonics"
        || task == "rtic_ext"
    {
        return None;
    }
    Some((task, rest == task))
}

/// Which of a dispatcher's software tasks the code at `pc` is: the outermost function of the
/// app module in its inline chain that is one of `software` (the dispatcher's own closure,
/// `app::QEI0::{{closure}}`, is in the app module too, and outside the task it inlines);
/// `None` in RTIC's own code or in a function the tasks call (which the address alone does not
/// tell apart).
pub fn software_task_at(sym: &mut Symbolizer, pc: u32, software: &[String]) -> Option<usize> {
    sym.resolve(pc).frames.iter().rev().find_map(|f| {
        let (task, _) = app_task(&f.function)?;
        software.iter().position(|s| s == task)
    })
}

/// The RTIC tasks the handler at `start` runs: at each of its instructions, the outermost
/// function of the application's `app` module in the inline chain (what the handler itself
/// called or inlined: a function that task calls in turn, inlined deeper, is its helper, not a
/// task), and the targets of the calls the handler makes from its own code.
pub fn tasks_of(sym: &mut Symbolizer, code: &mut Code, start: u64) -> Tasks {
    let Some(crate::image::CodeRange { start: lo, end: hi }) = sym.range_of(start) else {
        return Tasks::default();
    };
    let insns: Vec<(u32, Option<u32>)> = code
        .function(lo as u32, hi as u32)
        .iter()
        .map(|i| (i.addr, i.target))
        .collect();
    // The handler itself is generated in the app module too (`app::GPIOA`).
    let own = sym
        .function_of(start)
        .map(|f| f.rsplit("::").next().unwrap_or(f).to_owned());
    let v1_software = v1_software_tasks(sym);
    // (task, plain function) in the order met.
    let mut found: Vec<(String, bool)> = Vec::new();
    let mut note = |task: &str, plain: bool| {
        if own.as_deref() == Some(task) {
            return false;
        }
        if !found.iter().any(|(t, p)| t == task && *p == plain) {
            found.push((task.to_owned(), plain));
        }
        true
    };
    for (addr, target) in insns {
        // Innermost first: the outermost app function is the last one.
        let outer = sym
            .resolve(addr)
            .frames
            .iter()
            .rev()
            .find_map(|f| app_task(&f.function).filter(|(t, _)| own.as_deref() != Some(*t)))
            .map(|(t, p)| (t.to_owned(), p));
        match outer {
            Some((task, plain)) => {
                note(&task, plain);
            }
            // A call from the handler's own code: its target, if an app function, is a task.
            None => {
                if let Some(t) = target
                    && !(lo..hi).contains(&(t as u64))
                    && let Some(f) = sym.function_of(t as u64)
                    && let Some((task, plain)) = app_task(f)
                {
                    let task = task.to_owned();
                    note(&task, plain);
                }
            }
        }
    }
    // A hardware task is a plain function of the app module (`app::control`); a software task
    // is an async function, seen only through its future's body (`app::sensor::{{closure}}`),
    // or in RTIC v1 a plain function with a free queue. A hardware task's `lock` closures are
    // its own closures, not software tasks.
    let plain: Vec<String> = found
        .iter()
        .filter(|(t, p)| *p && !v1_software.contains(t))
        .map(|(t, _)| t.clone())
        .collect();
    let mut software: Vec<String> = Vec::new();
    for (t, p) in &found {
        let sw = (!p && !plain.contains(t)) || (*p && v1_software.contains(t));
        if sw && !software.contains(t) {
            software.push(t.clone());
        }
    }
    Tasks {
        hardware: plain,
        software,
    }
}
