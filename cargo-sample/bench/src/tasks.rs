//! What sampler-rt's Embassy hooks cost on the target, exact in QEMU: the instructions each
//! hook runs a call (its own code and the clock it reads), from the exact counts of a
//! `--truth` run of `examples/embassy-metrics` on Cortex-M3.

use crate::*;

/// One hook's cost.
#[derive(Debug, Serialize)]
pub struct HookCost {
    pub hook: String,
    pub calls: u64,
    /// Instructions a call: the hook's own, and the clock's it calls (once a call, except in
    /// `task_new` and `task_end`, which read no clock).
    pub instructions_per_call: f64,
}

const HOOKS: [(&str, bool); 7] = [
    ("_embassy_trace_task_exec_begin", true),
    ("_embassy_trace_task_exec_end", true),
    ("_embassy_trace_task_ready_begin", true),
    ("_embassy_trace_executor_idle", true),
    ("_embassy_trace_poll_start", true),
    ("_embassy_trace_task_new", false),
    ("_embassy_trace_task_end", false),
];

/// The hooks' costs in a run of the Embassy example in `examples`.
pub(crate) fn hook_costs(examples: &Path) -> Result<Vec<HookCost>> {
    let manifest = examples.join("embassy-metrics/Cargo.toml");
    let cli = release_args(&manifest, &["--truth"])?;
    let dir = sample::capture(&cli.run)?;
    let (counts, functions) = exact_functions(&dir)?;
    let find = |name: &str| {
        functions
            .iter()
            .find(|f| f.0 == name)
            .with_context(|| format!("{name} is not in the image"))
    };
    let clock = find("sampler_rt_task_clock")?;
    let at = |pc: u64| {
        counts
            .iter()
            .find(|c| c.0 as u64 == pc)
            .map(|c| c.1)
            .unwrap_or(0)
    };
    let clock_calls = at(clock.1).max(1);
    let per_clock = executed(&counts, clock.1, clock.2) as f64 / clock_calls as f64;
    let mut out = Vec::new();
    for (name, reads) in HOOKS {
        let f = find(name)?;
        let calls = at(f.1);
        // The hook's cold paths (choosing the clock, claiming a slot) are in functions of
        // their own, counted by their calls: only the hot code is the hook's cost.
        let own = executed(&counts, f.1, f.2);
        out.push(HookCost {
            hook: name.trim_start_matches("_embassy_trace_").to_owned(),
            calls,
            instructions_per_call: if calls == 0 {
                0.0
            } else {
                own as f64 / calls as f64 + if reads { per_clock } else { 0.0 }
            },
        });
    }
    Ok(out)
}

pub(crate) fn print_hooks(hooks: &[HookCost]) {
    println!("Embassy hooks (Cortex-M3, exact in QEMU; goal: 20 instructions a hook)");
    for h in hooks {
        println!(
            "{:<18} {:>8.1} instructions/call {:>8} calls",
            h.hook, h.instructions_per_call, h.calls
        );
    }
}
