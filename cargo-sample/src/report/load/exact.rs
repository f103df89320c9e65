//! A saved `--exact` run: the plugin's counts (and call graph) against the ELF.

use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::image::disasm;
use crate::image::elf;
use crate::image::symbolize::Symbolizer;
use crate::report::{self, ExactFacts};
use crate::runs::{self, RunMeta};
use crate::term;

/// The report of a saved `--exact` run.
pub fn load_exact_report(
    dir: &Path,
    meta: &RunMeta,
    opts: report::Options,
) -> Result<report::Report> {
    let (elf_path, elf_bytes) = runs::elf_of(dir)?;
    let counts_path = dir.join(crate::dump::exact::FILE);
    let bytes = std::fs::read(&counts_path).with_context(|| {
        format!(
            "reading {} (the run left no counts: see {})",
            counts_path.display(),
            dir.join(runs::OUTPUT).display()
        )
    })?;
    let counts = crate::dump::exact::parse(&bytes)
        .with_context(|| format!("decoding {}", counts_path.display()))?;
    let fw = elf::inspect(&elf_bytes)?;
    if !fw.has_symbols {
        term::warn("the ELF has no function symbols (stripped?): addresses cannot be named");
    } else if !fw.has_dwarf {
        term::note("the ELF has no DWARF: no source lines or inline frames");
    }
    let mut sym = Symbolizer::new(&elf_path, &elf_bytes, meta.workspace_root.as_deref())?;
    let facts = ExactFacts {
        firmware: meta.target_name.clone(),
        machine: format!("{} (QEMU)", meta.machine),
        counted_by: meta
            .counted_by
            .clone()
            .unwrap_or_else(|| "cargo-sample's QEMU plugin".into()),
        stop: match meta.state {
            runs::RunState::BudgetReached => format!(
                "stopped after the instruction budget (`--instructions {}`)",
                term::count(meta.instruction_budget.unwrap_or(0))
            ),
            runs::RunState::Finished => "the firmware ended the run".into(),
            runs::RunState::TimedOut => "cut short by `--timeout`".into(),
            runs::RunState::Interrupted => "cut short by Ctrl-C".into(),
            other => other.to_string(),
        },
        instruction_budget: meta.instruction_budget,
    };
    let mut code = disasm::Code::new(&elf_bytes).ok();
    let (callers, callees) = (opts.callers.clone(), opts.callees.clone());
    let mut report = report::build_exact(&mut sym, code.as_mut(), facts, &counts, opts);
    let graph_path = dir.join(crate::dump::callgraph::FILE);
    match std::fs::read(&graph_path) {
        Ok(bytes) => {
            let tree = crate::dump::callgraph::parse(&bytes)
                .with_context(|| format!("decoding {}", graph_path.display()))?;
            report::calls::apply(
                &mut report,
                &tree,
                &sym,
                callers.as_deref(),
                callees.as_deref(),
            )?;
        }
        Err(_) if callers.is_some() || callees.is_some() => bail!(
            "this run has no call graph (it was counted through QEMU's exec log, on ARMv8-A, or \
             by an older cargo-sample): `--callers`/`--callees` need a run of `--exact` with the \
             plugin on Cortex-M"
        ),
        Err(_) => {}
    }
    Ok(report)
}
