//! What sampler-rt's Embassy hooks cost on the target, exact in QEMU: the instructions each
//! hook runs a call (its own code and the append it shares), and apart from them what folding
//! their events into the statistics costs an event (done when an executor idles, outside the
//! polls), from the exact counts of a `--truth` run of `examples/embassy-metrics` on
//! Cortex-M3.

use crate::*;

/// One hook's cost (or the fold's, a folded event).
#[derive(Debug, Serialize)]
pub struct HookCost {
    pub hook: String,
    pub calls: u64,
    /// Instructions a call: the hook's own, and the shared append's it ends in (`task_new`
    /// and `task_end` append without reading the clock).
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

/// The functions that fold events into the statistics (the idle hook's call of it included).
fn folds(name: &str) -> bool {
    const DUMP: [&str; 5] = [
        "write_record",
        "write_trace",
        "record_len",
        "trace_len",
        "freeze",
    ];
    name == "sampler_rt_task_fold"
        || name == "sampler_rt_task_idle_folds"
        || name == "sampler_rt_task_fold_when_free"
        || (name.starts_with("sampler_rt::tasks::")
            && !DUMP.iter().any(|d| name.ends_with(d))
            && !name.ends_with("choose"))
}

/// The hooks' costs in a run of the Embassy example in `examples`, then the fold's (an event)
/// and the rare path's (a call).
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
    let append = find("sampler_rt_task_event")?;
    let at = |pc: u64| {
        counts
            .iter()
            .find(|c| c.0 as u64 == pc)
            .map(|c| c.1)
            .unwrap_or(0)
    };
    let appends = at(append.1).max(1);
    let per_append = executed(&counts, append.1, append.2) as f64 / appends as f64;
    // `task_new` and `task_end` append without a time, through an append of their own.
    let note = find("sampler_rt_task_note")?;
    let notes = at(note.1);
    let per_note = executed(&counts, note.1, note.2) as f64 / notes.max(1) as f64;
    let mut out = Vec::new();
    for (name, reads) in HOOKS {
        let f = find(name)?;
        let calls = at(f.1);
        // The hook's rare paths (choosing the clock, claiming a slot, a tag kept across a
        // nested poll, the fold) are functions of their own, counted below: only the hot
        // code is the hook's cost.
        let own = executed(&counts, f.1, f.2);
        out.push(HookCost {
            hook: name.trim_start_matches("_embassy_trace_").to_owned(),
            calls,
            instructions_per_call: if calls == 0 {
                0.0
            } else {
                own as f64 / calls as f64 + if reads { per_append } else { per_note }
            },
        });
    }
    let folded: u64 = functions
        .iter()
        .filter(|f| folds(&f.0))
        .map(|f| executed(&counts, f.1, f.2))
        .sum();
    out.push(HookCost {
        hook: "fold (an event)".to_owned(),
        calls: appends + notes,
        instructions_per_call: folded as f64 / (appends + notes) as f64,
    });
    let rare: Vec<_> = functions
        .iter()
        .filter(|f| {
            [
                "sampler_rt_task_nest_tag",
                "sampler_rt_task_unnest_tag",
                "sampler_rt_task_tag_push",
                "sampler_rt_task_tag_pop",
            ]
            .contains(&f.0.as_str())
        })
        .collect();
    let nested_calls: u64 = rare
        .iter()
        .filter(|f| f.0.ends_with("nest_tag"))
        .map(|f| at(f.1))
        .sum();
    let nested: u64 = rare.iter().map(|f| executed(&counts, f.1, f.2)).sum();
    out.push(HookCost {
        hook: "tag kept (nested)".to_owned(),
        calls: nested_calls,
        instructions_per_call: nested as f64 / nested_calls.max(1) as f64,
    });
    Ok(out)
}

pub(crate) fn print_hooks(hooks: &[HookCost]) {
    println!(
        "Embassy hooks (Cortex-M3, exact in QEMU; goal: 20 instructions a hook; the fold runs \
         when an executor idles, outside the polls; a nested poll's begin and end take the \
         tag path besides)"
    );
    for h in hooks {
        println!(
            "{:<18} {:>8.1} instructions/call {:>8} calls",
            h.hook, h.instructions_per_call, h.calls
        );
    }
}
