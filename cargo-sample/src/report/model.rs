//! The report's data: what a run told, the tables, the findings. Built by the parent module,
//! judged by `diagnose`, printed by `text` and the export `formats`.

use std::collections::HashMap;

use sampler_rt::wire;
use serde::Serialize;

use super::{annotate, tree};

/// Version of the JSON report's layout.
pub const JSON_VERSION: u32 = 1;

/// Name used for samples outside every function symbol.
pub const OUTSIDE: &str = "[outside the image's functions]";

/// The facts of a run that the report's header shows.
#[derive(Debug, Clone, Serialize)]
pub struct Facts {
    pub firmware: String,
    pub machine: String,
    /// `instructions` in QEMU (it counts instructions, not cycles), `cycles` on hardware.
    pub unit: String,
    /// Samples are taken at a PMU event counter's overflow: each lands just after an
    /// instruction that caused the event (on hardware, with some skid), by design.
    #[serde(default)]
    pub on_events: bool,
    /// ARMv8-A: interrupts the sampler's vectors took that were not its own (the firmware's,
    /// ended unserved).
    #[serde(default)]
    pub foreign_interrupts: u32,
    pub timer: String,
    pub timer_hz: u64,
    /// Mean timer ticks between samples.
    pub period_ticks: f64,
    /// Mean period in `unit`.
    pub period_units: f64,
    /// Random span per period in ticks (0 = constant period).
    pub jitter_ticks: u32,
    pub priority: u8,
    /// Samples the firmware took.
    pub taken: u32,
    /// Samples lost (could not be stored).
    pub lost: u32,
    /// Samples overwritten in the ring (the newest were kept).
    pub overwritten: u32,
    pub requested: u32,
    /// How sampling ended.
    pub stop: String,
    /// Where the samples came from: the firmware's dump, a memory snapshot, a live read, a
    /// probe or a port.
    pub source: crate::runs::Source,
    /// Estimated duration of the sampled run in `unit`.
    pub duration_units: f64,
}

impl Facts {
    /// The facts of samples that did not come from sampler-rt (a text dump, an SWO capture):
    /// no timer period is known, so no duration either.
    pub fn of_capture(
        firmware: String,
        machine: String,
        timer: &str,
        taken: u32,
        kept: u32,
        stop: &str,
        source: crate::runs::Source,
    ) -> Facts {
        Facts {
            firmware,
            machine,
            unit: "samples".into(),
            on_events: false,
            foreign_interrupts: 0,
            timer: timer.into(),
            timer_hz: 0,
            period_ticks: 0.0,
            period_units: 0.0,
            jitter_ticks: 0,
            priority: 0,
            taken,
            lost: 0,
            overwritten: taken.saturating_sub(kept),
            requested: taken,
            stop: stop.into(),
            source,
            duration_units: 0.0,
        }
    }
}

/// The facts of an exact (`--exact`) run.
#[derive(Debug, Clone, Serialize)]
pub struct ExactFacts {
    pub firmware: String,
    pub machine: String,
    /// How the instructions were counted (the plugin, or QEMU's exec log).
    pub counted_by: String,
    /// How the run ended.
    pub stop: String,
    /// `--instructions`: the budget the run had.
    pub instruction_budget: Option<u64>,
}

/// What a report's header tells, by kind of run.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum RunFacts {
    Sampled(Facts),
    Exact(ExactFacts),
}

/// One row of a table.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Row {
    pub name: String,
    /// Exception rows of an RTIC application: the task the row is, by its name (a software
    /// task split out of the dispatcher it shares).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Samples (sampled reports) or executed instructions (exact reports) in this row.
    #[serde(skip)]
    pub count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<u64>,
    pub percent: f64,
    /// 95 % interval of the share, in percent (sampled reports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci95: Option<[f64; 2]>,
    /// The linker-level function a line or inline frame belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// With `--truth`: the exact share of executed instructions, in percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_percent: Option<f64>,
    /// With `--truth`: sampled minus exact, in percentage points.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_points: Option<f64>,
    /// With `--truth`: the error in standard deviations of the binomial law at the exact share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_sigma: Option<f64>,
    /// Exact reports with the call graph: instructions in this function and everything it
    /// called (each call stack counted once, recursion or not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inclusive_instructions: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inclusive_percent: Option<f64>,
    /// Sampled reports with stacks (`--stacks`): samples whose stack holds this function.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inclusive_samples: Option<u64>,
    /// 95 % interval of the inclusive share, in percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inclusive_ci95: Option<[f64; 2]>,
    /// With `--stacks --truth`: the exact inclusive share, from the exact call graph.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_inclusive_percent: Option<f64>,
    /// Sampled stacks of which some stopped short of their root: `inclusive_percent` is then
    /// a lower bound, and the share is at most this (the stacks cut short may all hold it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inclusive_at_most_percent: Option<f64>,
    /// Exact reports with the call graph: calls into the function (an exception's entries for
    /// its handler); in the exception table, the exception's entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calls: Option<u64>,
    /// `--cycles`: estimated cycles of this row (its share is a share of cycles then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycles: Option<u64>,
    /// `--cycles` with the call graph: estimated cycles in it and everything it called.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inclusive_cycles: Option<u64>,
    /// `--cycles`: estimated cycles per executed instruction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpi: Option<f64>,
    /// `--cycles --clock HZ`: the row's cycles as time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub microseconds: Option<f64>,
    /// `--cycles --clock HZ` with the call graph: its inclusive cycles as time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inclusive_microseconds: Option<f64>,
    /// Sampled with `--truth --cycles`: the row's estimated share of the cycles, its samples
    /// weighted by each address's cycles per instruction in the exact run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycles_percent: Option<f64>,
    /// Sampled with `--truth --cycles`: the exact run's estimated share of the cycles the
    /// sampler could see.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_cycles_percent: Option<f64>,
}

/// One edge of the call graph, seen from a function (`--callers FN`, `--callees FN`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EdgeRow {
    /// The caller (or callee).
    pub name: String,
    /// Instructions of the function's time on this edge (callers), or of the callee's time
    /// under the function (callees): exact reports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<u64>,
    /// The same in samples: sampled reports with stacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    /// Of all instructions counted (or samples taken).
    pub percent: f64,
    /// 95 % interval of the share, in percent (sampled reports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci95: Option<[f64; 2]>,
    /// With `--truth`: the exact share of the edge, in percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_percent: Option<f64>,
    /// Calls along the edge (an exception entry counts as one): exact reports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calls: Option<u64>,
    /// Sampled stacks of which some stopped short of their root: the share is a lower bound
    /// (what the stacks cut short held is in the `[stack cut short …]` rows).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub lower_bound: bool,
}

/// How the stacks of a sampled run unwound (`--stacks`).
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Unwinding {
    /// Words of stack kept with each sample.
    pub window_words: u32,
    /// Samples unwound.
    pub samples: u64,
    /// Stacks that reached the reset handler (or where the call-frame information ends).
    pub complete: u64,
    /// Stacks that reached the root of an interrupt handler whose interrupted code ran on the
    /// process stack.
    pub handler_root: u64,
    /// Stacks cut short by the window.
    pub truncated: u64,
    /// Stacks unwinding could not follow, by reason.
    pub failed: Vec<(String, u64)>,
    /// Tail calls put back from the `bl` before a return address.
    pub tail_calls: u64,
    /// Exception frames unwound through.
    pub exception_frames: u64,
    /// Frames of code without call-frame information, unwound by reading its prologue.
    pub prologue_frames: u64,
    /// Exception frames (the sampler's own and nested ones) that held the FPU's state: 26
    /// words, or 27 with the alignment word, instead of 8.
    pub fp_extended_frames: u64,
}

/// `--callers FN` / `--callees FN`: the edges of one function.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Edges {
    pub function: String,
    pub rows: Vec<EdgeRow>,
}

/// A whole report, as printed and as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub format_version: u32,
    /// `sampled`, or `exact` (every instruction counted, `--exact`).
    pub mode: crate::runs::Mode,
    /// Samples analysed (sampled reports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    /// Instructions counted (exact reports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<u64>,
    pub unit: String,
    #[serde(flatten)]
    pub facts: RunFacts,
    /// By linker-level function (the real, outermost symbol containing the PC).
    pub functions: Vec<Row>,
    /// By innermost inlined frame (the source function whose code was running).
    pub inlined: Vec<Row>,
    /// By `file:line` of the innermost frame.
    pub lines: Vec<Row>,
    /// By tag (the task, handler or object each sample was tagged with), when samples carry tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<Row>,
    /// By tag and function (`tag / function`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tag_functions: Vec<Row>,
    /// Functions with what was inlined into them, recursively (from DWARF).
    pub tree: Vec<tree::Node>,
    /// The hottest functions' instructions with their counts (`--annotate`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub annotate: Vec<annotate::Function>,
    pub distinct_pcs: usize,
    /// With `--truth`: the largest |sampled - exact| over the function rows, in points.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_error_points: Option<f64>,
    /// With `--truth`: exact instructions counted outside sampler-rt, in the time the sampler
    /// could see.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_instructions: Option<u64>,
    /// With `--truth`: the exact instructions left out of the comparison, which no sample could
    /// see (before the sampler started; handlers it cannot preempt, when no sample could be told
    /// held off by them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unseen: Option<super::unseen::Unseen>,
    /// Inline chains with their counts (for folded stacks and flamegraphs).
    #[serde(skip)]
    pub stacks: Vec<Stack>,
    /// Every sampled (or executed) address with its count and frames (for pprof).
    #[serde(skip)]
    pub per_pc: Vec<PcCount>,
    /// Samples per address and tag, when samples carry tags: `(pc, tag name, count)`.
    #[serde(skip)]
    pub tagged: Vec<(u32, String, u64)>,
    /// Where the profile would mislead, and what is worth knowing (kind, severity, message).
    pub diagnostics: Vec<Diagnostic>,
    /// The messages of the diagnostics of severity `warning`.
    pub warnings: Vec<String>,
    /// Lap-timed regions, when the firmware timed any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub laps: Option<crate::analysis::laps::LapsReport>,
    /// Embassy tasks, when the firmware kept their statistics (sampler-rt's `embassy`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks: Option<crate::analysis::tasks::TasksReport>,
    /// `--callers FN`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callers: Option<Edges>,
    /// `--callees FN`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callees: Option<Edges>,
    /// Real call stacks (outermost first) with their counts, when the run followed calls;
    /// folded stacks, flamegraphs and callgrind use them instead of the inline chains.
    #[serde(skip)]
    pub call_stacks: Vec<Stack>,
    /// Sampled runs with `--stacks`: the real call stacks with what was inlined at every
    /// level (for folded stacks, flamegraphs and pprof; `call_stacks` keeps functions only).
    #[serde(skip)]
    pub inline_stacks: Vec<Stack>,
    /// The samples in the order taken (sampled rings), for formats with a time axis.
    #[serde(skip)]
    pub timeline: Option<Timeline>,
    /// Calls per (caller, callee), with the call stacks.
    #[serde(skip)]
    pub call_counts: Vec<((String, String), u64)>,
    /// How the stacks of a sampled run with `--stacks` unwound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unwinding: Option<Unwinding>,
    /// SWO captures with exception trace: each exception's entries and times.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exceptions: Vec<ExceptionRow>,
    /// `--cycles`: estimated cycles of the whole run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycles: Option<u64>,
    /// `--cycles`: the timing model and what it does not capture.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing: Option<TimingFacts>,
    /// Exact runs on Cortex-M: how deep the main stack went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<StackUse>,
}

/// The deepest the main stack went in an exact run: the lowest address any instruction stored
/// to between the top of the stack (the initial stack pointer) and the end of the image's
/// RAM sections below it.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct StackUse {
    /// Bytes from the top of the stack to the lowest address stored to (0: no store).
    pub bytes: u32,
    /// The top of the main stack (the initial stack pointer).
    pub top: u32,
    /// The lowest address the stack could reach without running into the image's data.
    pub limit: u32,
}

/// How `--cycles` estimated, for the header and JSON.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TimingFacts {
    /// `cortex-m4 timing, flash at 0 wait states`.
    pub model: String,
    pub core: String,
    pub wait_states: u32,
    /// Cycles per instruction over the run.
    pub cpi: f64,
    /// Conditional branches executed and taken (taken ones refill the pipeline).
    pub conditional_branches: u64,
    pub taken_branches: u64,
    /// Exception entries charged (entry and return run no instruction).
    pub exceptions: u64,
    /// Of those, entries tail-chained or arriving late (charged a tail-chain); absent when
    /// the run did not record it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chained_exceptions: Option<u64>,
    /// What the estimate does not capture.
    pub caveats: Vec<String>,
    /// `--clock HZ`: the core clock the cycles are turned into time at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_hz: Option<u32>,
    /// `--clock HZ`: the run's estimated cycles as seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

/// One exception of an SWO capture's exception trace.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ExceptionRow {
    pub number: u16,
    /// The handler's name from the vector table (`SysTick`, `UART0`), or `exception N`.
    pub name: String,
    pub entries: u64,
    /// Entries timed from entry to exit (local timestamps on both ends).
    pub timed: u64,
    /// In ticks of the ITM's timestamp clock, preemption by other exceptions included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_ticks: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_ticks: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ticks: Option<u64>,
}

/// The name of the samples an SWO capture took while the core slept.
pub const SLEEPING: &str = "[sleeping]";

/// The address that stands for them (no code can be there: it is in the range of
/// EXC_RETURN values, just below the one standing for samples outside every bin).
pub const SLEEP_ADDRESS: u32 = 0xFFFF_FFE0;

/// Samples in the order taken: each a stack (outermost first) and a thread.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// Distinct stacks, outermost frame first (inlined frames included).
    pub stacks: Vec<Vec<String>>,
    /// Per sample, in order: its stack's index.
    pub samples: Vec<u32>,
    /// Thread names (tags); one thread when samples carry no tag.
    pub threads: Vec<String>,
    /// Per sample: its thread's index (empty: all on thread 0).
    pub thread_of: Vec<u32>,
    /// The first sample's number since the sampler started (earlier ones were overwritten).
    pub first_seq: u32,
    /// Laps and log lines placed among the samples.
    pub markers: Vec<TimelineMarker>,
    /// Event counts over time (PMU regions counted while sampling).
    pub counters: Vec<CounterTrack>,
}

/// One event's counts over time: what each lap of a region counted, over the lap.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterTrack {
    pub name: String,
    pub description: String,
    /// `(at, count)`: the count added at `at` (in sampling periods, as markers are placed).
    pub points: Vec<(f64, f64)>,
}

/// What a timeline marker stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerKind {
    /// A lap of a timed region: it has a duration.
    Lap,
    /// A line the firmware logged: an instant.
    Log,
    /// A poll of an Embassy task: it has a duration, on its task's thread.
    Poll,
}

/// A lap or a log line on the samples' time axis.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineMarker {
    pub kind: MarkerKind,
    /// The region, or the log line's level.
    pub name: String,
    /// Where it starts, in sampling periods since the sampler started (sample number `k` is at
    /// `k`).
    pub at: f64,
    /// A lap's length in sampling periods.
    pub periods: f64,
    /// A lap's length in the report's unit (its own cost subtracted); 0 for log lines.
    pub units: f64,
    /// Samples taken during the lap.
    pub samples: u32,
    /// The log line's text, or the lap's length in words.
    pub text: String,
    /// The thread it belongs on (a poll: its task's), if any.
    pub thread: Option<u32>,
}

/// One inline chain (outermost first) and its count.
#[derive(Debug, Clone, PartialEq)]
pub struct Stack {
    pub chain: Vec<String>,
    pub count: u64,
}

/// One address, its count and its frames, innermost first: `(function, file, line)`.
#[derive(Debug, Clone)]
pub struct PcCount {
    pub pc: u32,
    pub count: u64,
    pub frames: Vec<(String, Option<String>, Option<u32>)>,
}

impl Report {
    pub fn facts_firmware(&self) -> String {
        match &self.facts {
            RunFacts::Sampled(f) => f.firmware.clone(),
            RunFacts::Exact(f) => f.firmware.clone(),
        }
    }

    pub fn facts_machine(&self) -> String {
        match &self.facts {
            RunFacts::Sampled(f) => f.machine.clone(),
            RunFacts::Exact(f) => f.machine.clone(),
        }
    }

    /// Mean sampling period in the report's unit (1 for an exact profile: every instruction).
    pub fn period_units(&self) -> f64 {
        match &self.facts {
            RunFacts::Sampled(f) => f.period_units,
            RunFacts::Exact(_) => 1.0,
        }
    }
}

/// Stop reason in words.
pub fn stop_reason(stop: u8) -> &'static str {
    match stop {
        wire::STOP_LIMIT => "sample limit reached",
        wire::STOP_FIRMWARE => "the firmware ended the run",
        wire::STOP_SNAPSHOT => "run cut short; samples read from the target's memory",
        wire::STOP_RUNNING => "still sampling",
        wire::STOP_TIMER_TAKEN => {
            "the sampler did not start: SysTick belongs to the application (its vector is not \
             the sampler's)"
        }
        _ => "unknown",
    }
}

/// What a finding is about (`kind` in the JSON report).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Finding {
    /// No sample at all: nothing to report.
    NoSamples,
    /// Samples outside every function of the image.
    OutsideImage,
    /// The ring overwrote older samples (the newest were kept).
    Overwritten,
    /// Samples the firmware could not store, or the link dropped.
    Lost,
    /// ARMv8-A: interrupts the sampler took that were the firmware's.
    ForeignInterrupts,
    /// The samples move in step with a periodic program and see only some of it.
    Lockstep,
    /// Successive samples are correlated with the program's phases.
    Correlated,
    /// Sampled at a constant period (no jitter) where lockstep is possible.
    ConstantPeriod,
    /// Samples pile up after interrupts were masked: they belong to the masked region.
    MaskedSkid,
    /// Samples found the core asleep (WFI/WFE): idle time, not work.
    Asleep,
    /// Samples pile up after something that held the sampling interrupt off.
    HeldOff,
    /// Handlers as urgent as the sampler: their time is counted in the code they interrupted.
    Unpreemptable,
    /// The sampled shares differ from the exact counts by more than noise.
    DisagreesWithExact,
    /// Too few samples for the shares shown.
    FewSamples,
    /// Shares too close to tell apart at this number of samples.
    Indistinct,
    /// Histogram bins shared by several functions.
    AmbiguousBins,
    /// Histogram bins that reached their counters' maximum.
    SaturatedBins,
    /// The firmware stopped in a fault handler.
    Fault,
    /// Sampled stacks that stopped short of their root: inclusive shares are lower bounds.
    CutStacks,
    /// The samples span more time than the whole run counted exactly: the timer's clock is not
    /// the one assumed, and every period and duration derived from it is off.
    ClockMismatch,
    /// An Embassy task's longest poll took longer than `--max-poll`: every other task of its
    /// executor waited that long (a blocking call in async code).
    LongPoll,
    /// Exact runs: returns that went where no followed call returns (the graph may have
    /// crossed from one stack of calls to another).
    StrayReturns,
}

/// How much a finding matters.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The profile misleads here.
    Warning,
    /// Worth knowing.
    Note,
}

/// One finding.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Diagnostic {
    pub kind: Finding,
    pub severity: Severity,
    pub message: String,
    /// Share of the samples concerned, in percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percent: Option<f64>,
    /// Addresses concerned.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<u32>,
    /// Functions whose rows this finding explains (a masked region's owner and callers).
    #[serde(skip)]
    pub functions: Vec<String>,
}

impl Diagnostic {
    pub fn warning(kind: Finding, message: String) -> Diagnostic {
        Diagnostic {
            kind,
            severity: Severity::Warning,
            message,
            percent: None,
            addresses: Vec::new(),
            functions: Vec::new(),
        }
    }

    pub fn note(kind: Finding, message: String) -> Diagnostic {
        Diagnostic {
            severity: Severity::Note,
            ..Diagnostic::warning(kind, message)
        }
    }

    pub fn at(mut self, percent: f64, addresses: Vec<u32>) -> Diagnostic {
        self.percent = Some(percent);
        self.addresses = addresses;
        self
    }
}

/// What the diagnostics look at.
pub struct Input<'a> {
    /// The samples in the order they were taken (empty when the order is not known).
    pub pcs: &'a [u32],
    /// Samples in all.
    pub total: u64,
    /// The samples are address ranges (histogram bins), not single addresses.
    pub binned: bool,
    pub per_pc: &'a HashMap<u32, u64>,
    pub facts: &'a Facts,
    pub functions: &'a [Row],
    /// The image's vector table: `(exception number, handler address)`.
    pub vectors: &'a [(u32, u32)],
    /// With `--truth`: the instructions the firmware executed (sampler-rt's excluded).
    pub exact_total: Option<u64>,
    /// The image's handlers as urgent as the sampler or more, when known.
    pub urgent: Option<&'a [String]>,
}
