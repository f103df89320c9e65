//! Live capture: the host reads the sampler's ring out of the target's memory while the firmware
//! runs, through whatever can read it (a debug probe on a board, QEMU's monitor in emulation),
//! so a run can last as long as one likes in a ring of any size. This is how RTT works (a ring
//! in RAM that the host reads through the debug port), without a control block of its own: the
//! host finds the sampler's state by its ELF symbol, so an application's `defmt-rtt` or
//! `rtt-target` channels are left alone.
//!
//! Samples are numbered (the state says how many were taken); the host keeps the next number
//! it expects. When it falls behind by more than the ring holds, the samples overwritten in
//! between are counted as lost, and so are samples it read while the sampler was overwriting
//! them (it reads the count again after the ring and keeps only what could not have changed).
//! Every sample is either delivered or counted: `taken = delivered + lost`.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use sampler_rt::wire::{self, StateView};

use crate::dump::le::read_u32;
use crate::dump::{Dump, Fingerprint};

/// Memory of a running target.
pub trait Memory {
    /// Read `buf.len()` bytes at `addr`.
    fn read(&mut self, addr: u32, buf: &mut [u8]) -> Result<()>;
    /// Write `bytes` at `addr`. Targets that cannot write return an error; the capture then
    /// works all the same, only a firmware that ends waits its bounded time for the host.
    fn write(&mut self, addr: u32, bytes: &[u8]) -> Result<()>;
}

/// How often a host between two reads shows a firmware waiting at its end that it is there
/// (the firmware waits about 2^24 turns of its loop after the last sign: a second or more on
/// a board, and in QEMU).
pub const BEAT: Duration = Duration::from_millis(50);

/// The most bytes of the ring read at once: four of a debug port's 1 KiB auto-increment
/// blocks.
const PIECE_BYTES: usize = 4096;

/// Where the capture stands.
#[derive(Debug, Clone, Default)]
pub struct Live {
    state_addr: u32,
    ring: u32,
    capacity: u32,
    /// Bytes per ring entry: 4, or 8 with tags.
    entry: u32,
    /// The number of the next sample to read (numbers wrap at 2^32 like the target's count).
    next: u32,
    /// The number of the first sample delivered.
    pub first_seq: u32,
    pub pcs: Vec<u32>,
    pub tags: Vec<u32>,
    /// With stacks (`--stacks`): each sample's, parallel to `pcs`.
    pub stacks: Vec<crate::dump::StackSample>,
    /// Samples the host could not read in time.
    pub lost: u64,
    /// The state as last read.
    pub state: StateView,
    pub state_bytes: Vec<u8>,
    /// The firmware's tag names (`sampler_rt::name_tag`), read at the end.
    pub names: Vec<(u32, String)>,
    /// The firmware's Embassy task statistics, read at the end.
    pub tasks: Option<crate::dump::tasks::Tasks>,
    /// `MODE_HIST`: the counters' bytes, read at the end (and for progress saves); the state
    /// alone is polled meanwhile.
    pub bins: Option<Vec<u8>>,
    /// The host's beat, changed at every read (see [`Live::beat`]).
    beat: u8,
}

/// Where the firmware keeps its tag names: the table's address, and whether its pointers are
/// 64-bit (ARMv8-A); and its Embassy task table's address and size, if it keeps one.
#[derive(Debug, Clone, Copy)]
pub struct NamesAt {
    pub addr: u32,
    pub wide: bool,
    pub tasks: Option<(u32, u32)>,
    /// sampler-rt's Embassy event ring (`SAMPLER_RT_TASK_EVENTS`): the events it still holds
    /// are not in the table yet.
    pub task_events: Option<(u32, u32)>,
}

/// The firmware's tag names, read out of its memory (the table, then each name).
pub fn read_names(t: &mut dyn Memory, at: NamesAt) -> Result<Vec<(u32, String)>> {
    let (start, size) = wire::names_layout(at.wide);
    let mut b = vec![0u8; start + size * wire::NAMES_MAX];
    t.read(at.addr, &mut b)?;
    let mut names = Vec::new();
    for (tag, len, ptr) in wire::names_entries(&b, at.wide) {
        let (Ok(addr), true) = (u32::try_from(ptr), len <= 256) else {
            continue; // not a name this host can read (or a damaged entry)
        };
        let mut s = vec![0u8; len as usize];
        t.read(addr, &mut s)?;
        names.push((tag, String::from_utf8_lossy(&s).into_owned()));
    }
    Ok(names)
}

/// The state block was read and says the sampler has not started yet (as opposed to a read
/// that failed: the link, or the target, is gone).
#[derive(Debug)]
pub struct NotStarted(pub u32);

impl std::fmt::Display for NotStarted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the sampler has not started (no state at {:#x})", self.0)
    }
}

impl std::error::Error for NotStarted {}

/// Read the state block until two reads in a row agree (a block read is not atomic, and the
/// core runs while it is read). The count is three words: the sampler's interrupt moves
/// `remaining` alone on each sample, but at the end of a chunk it moves `before`, `chunk` and
/// `remaining` one after the other, and a read between them finds a count up to a chunk
/// ahead of the samples written. Two reads with the same `before` and `chunk`, the second's
/// count not behind the first's, saw no such step: the first of them is kept.
fn read_state(t: &mut dyn Memory, addr: u32) -> Result<(StateView, Vec<u8>)> {
    let mut prev: Option<(StateView, Vec<u8>)> = None;
    for _ in 0..8 {
        let mut b = vec![0u8; wire::STATE_LEN];
        t.read(addr, &mut b)?;
        let Some(s) = StateView::decode(&b) else {
            return Err(NotStarted(addr).into());
        };
        if let Some((p, _)) = &prev {
            let d = s.taken().wrapping_sub(p.taken());
            if d <= s.capacity.max(1) && (s.before, s.chunk) == (p.before, p.chunk) {
                return Ok(prev.unwrap());
            }
        }
        prev = Some((s, b));
    }
    bail!("the sampler's state never read the same twice: is it the sampler's?")
}

impl Live {
    /// Start reading the sampler whose state is at `state_addr`, from the samples it has now.
    pub fn attach(t: &mut dyn Memory, state_addr: u32) -> Result<Live> {
        let (s, b) = read_state(t, state_addr)?;
        if s.mode == wire::MODE_HIST {
            return Ok(Live {
                state_addr,
                next: s.taken(),
                state: s,
                state_bytes: b,
                bins: Some(Vec::new()),
                ..Live::default()
            });
        }
        if s.mode != wire::MODE_RING {
            bail!("the sampler is neither sampling into a ring nor counting bins");
        }
        let entry = s.entry_bytes();
        // Begin with what the ring still holds; older samples are gone.
        let gone = s.taken().saturating_sub(s.capacity);
        let next = gone;
        Ok(Live {
            state_addr,
            ring: s.ring,
            capacity: s.capacity,
            entry,
            next,
            first_seq: next,
            pcs: Vec::new(),
            tags: Vec::new(),
            stacks: Vec::new(),
            lost: gone as u64,
            state: s,
            state_bytes: b,
            names: Vec::new(),
            tasks: None,
            bins: None,
            beat: 0,
        })
    }

    /// Read the samples taken since the last poll; returns how many arrived. Bins stay in the
    /// target until [`Live::read_bins`]: this only follows the count.
    pub fn poll(&mut self, t: &mut dyn Memory) -> Result<usize> {
        let (s, b) = read_state(t, self.state_addr)?;
        let taken = s.taken();
        // A count that goes back (or a phase that does) is a sampler started again: the target
        // was reset. Samples from before and after cannot be told apart in the ring.
        if taken.wrapping_sub(self.next) > u32::MAX / 2 || s.phase < self.state.phase {
            bail!(
                "the target was reset mid-run: the sampler's count went back from {} to {taken}",
                self.next
            );
        }
        self.state = s;
        self.state_bytes = b;
        if self.bins.is_some() {
            let new = taken.wrapping_sub(self.next);
            self.next = taken;
            return Ok(new as usize);
        }
        let waiting = taken.wrapping_sub(self.next);
        if waiting == 0 {
            return Ok(0);
        }

        let cap = self.capacity;
        // Older samples than the ring holds are gone.
        let skip = waiting.saturating_sub(cap);
        self.lost += skip as u64;
        let from = self.next.wrapping_add(skip);
        self.next = from;
        let e = self.entry as usize;
        let stacked = (self.state.tag_kind >> 8) & 0xFF != 0;
        // In pieces, each kept as soon as it is read: a read that fails (a probe's WAIT or
        // FAULT) loses no progress, and the next poll goes on from there.
        let per_piece = (PIECE_BYTES / e).max(1) as u32;
        let mut delivered = 0usize;
        while self.next != taken {
            let q = self.next;
            let n = taken.wrapping_sub(q).min(per_piece);
            let bytes = self.read_entries(t, q, n)?;
            // Entries the sampler may have overwritten while they were read: those a ring or
            // more behind its count afterwards. The count moves only once an entry is whole,
            // so the entry of the sample being written as the count was read (one ring behind
            // it) may be half old, half new: it counts as spoiled too, unless the sampler
            // had stopped.
            let (after, _) = read_state(t, self.state_addr)?;
            let writing = u32::from(after.phase < wire::PHASE_STOPPED);
            let spoiled = after
                .taken()
                .wrapping_sub(q)
                .wrapping_add(writing)
                .saturating_sub(cap)
                .min(n);
            self.lost += spoiled as u64;
            if self.pcs.is_empty() && spoiled < n {
                // The dump numbers its samples from the first one kept.
                self.first_seq = q.wrapping_add(spoiled);
            }
            for k in spoiled as usize..n as usize {
                let w = |o: usize| read_u32(&bytes, o).unwrap_or(0);
                if stacked {
                    if let Some((pc, xpsr, st)) = bytes
                        .get(k * e..(k + 1) * e)
                        .and_then(crate::dump::stack_slot)
                    {
                        self.pcs.push(pc);
                        self.tags.push(xpsr);
                        self.stacks.push(st);
                    }
                    continue;
                }
                self.pcs.push(w(k * e));
                if e == 8 {
                    self.tags.push(w(k * e + 4));
                }
            }
            delivered += (n - spoiled) as usize;
            self.next = q.wrapping_add(n);
        }
        Ok(delivered)
    }

    /// Whether the sampler has stopped (after the poll that saw it stop, nothing more comes).
    pub fn stopped(&self) -> bool {
        self.state.phase == wire::PHASE_STOPPED
    }

    /// A sign of life for a firmware waiting at its end: it waits as long as this byte keeps
    /// changing, so a host slowed down (a loaded machine, a probe's retries) still gets the
    /// last samples. Links that cannot write (QEMU's monitor) leave the firmware its bounded
    /// wait; a write that fails is tried again at the next read.
    pub fn beat(&mut self, t: &mut dyn Memory) {
        self.beat = self.beat.wrapping_add(1);
        let at = if self.state.arch == 8 {
            wire::state_offsets::A64_HOST_BEAT
        } else {
            wire::state_offsets::HOST_BEAT
        };
        let _ = t.write(self.state_addr + at as u32, &[self.beat]);
    }

    /// Tell a firmware waiting at its end that the host has read everything (it waits for a
    /// bounded time otherwise).
    pub fn release(&self, t: &mut dyn Memory) -> Result<()> {
        t.write(
            self.state_addr + wire::state_offsets::SINK as u32,
            &[wire::SINK_NONE],
        )
    }

    /// Samples taken, as of the last poll.
    pub fn taken(&self) -> u64 {
        self.pcs.len() as u64 + self.lost + self.bins.as_ref().map_or(0, |_| self.next as u64)
    }

    /// `MODE_HIST`: read the counters as they are now.
    pub fn read_bins(&mut self, t: &mut dyn Memory) -> Result<()> {
        if self.bins.is_none() {
            return Ok(());
        }
        let (addr, len) = crate::capture::snapshot::ring_region(&self.state_bytes)
            .ok_or_else(|| anyhow::anyhow!("the sampler's state names no bins"))?;
        let mut b = vec![0u8; len as usize];
        t.read(addr as u32, &mut b)?;
        self.bins = Some(b);
        Ok(())
    }

    /// What the end of a capture reads: the bins (`MODE_HIST`) and the firmware's tag names
    /// (given before or while sampling). Names that cannot be read leave the tags unnamed.
    pub fn finish(&mut self, t: &mut dyn Memory, names: Option<NamesAt>) -> Result<()> {
        if let Some(at) = names {
            self.names = read_names(t, at).unwrap_or_default();
            if let Some((addr, len)) = at.tasks {
                let mut b = vec![0u8; len as usize];
                self.tasks = t
                    .read(addr, &mut b)
                    .ok()
                    .and_then(|()| crate::dump::tasks::from_memory(&b));
                // Its last four words: the counter's address, the events appended and
                // folded, and those lost.
                if let (Some(tasks), Some((addr, len))) = (self.tasks.as_mut(), at.task_events)
                    && len >= 16
                {
                    let mut w = [0u8; 16];
                    if t.read(addr + len - 16, &mut w).is_ok() {
                        let word = |i: usize| read_u32(&w, 4 * i).unwrap_or(0);
                        tasks.unfolded_events = word(1).wrapping_sub(word(2));
                        tasks.lost_events = word(3);
                    }
                }
            }
        }
        self.read_bins(t)
    }

    /// The samples so far as a dump: `lost` says how many were taken but never read.
    pub fn to_dump(&self, code: Fingerprint, stop: u8) -> Dump {
        // Every sample before `next` was delivered or counted as lost.
        let lost = self.lost.min(u32::MAX as u64) as u32;
        if let Some(bins) = &self.bins {
            let d = crate::capture::snapshot::to_dump(&self.state_bytes, bins, code, None);
            if let Some(mut d) = d {
                d.info.stop = stop;
                return d;
            }
        }
        let info = crate::capture::snapshot::info_of(&self.state, stop, self.next, lost, code);
        let mut d = Dump::of_samples(info, self.first_seq, self.pcs.clone(), self.tags.clone());
        d.names = self.names.clone();
        d.tasks = self.tasks.clone();
        if self.stacks.len() == d.pcs.len() {
            d.stacks = self.stacks.clone();
        }
        d.held_off = crate::capture::snapshot::held_off_of(&self.state);
        d
    }

    /// The bytes of `count` entries from sample `from` on (in one or two reads around the
    /// ring's end).
    fn read_entries(&self, t: &mut dyn Memory, from: u32, count: u32) -> Result<Vec<u8>> {
        let cap = self.capacity;
        let e = self.entry;
        let mut out = vec![0u8; (count * e) as usize];
        let start = from % cap;
        let first = count.min(cap - start);
        t.read(self.ring + start * e, &mut out[..(first * e) as usize])?;
        if first < count {
            t.read(self.ring, &mut out[(first * e) as usize..])?;
        }
        Ok(out)
    }
}

/// The application's own RTT up channels (`rtt-target`, `defmt-rtt`), read through the same
/// [`Memory`] beside the sampler's ring so that its output is kept (each channel's bytes in
/// `rtt-N.bin` of the run directory). Used where no probe-rs session does it (QEMU's monitor).
/// The host keeps its own read offsets and writes them back when the target lets it.
#[derive(Debug)]
pub struct AppRtt {
    addr: u32,
    dir: std::path::PathBuf,
    /// Per up channel: the host's read offset, once known.
    read: Vec<Option<u32>>,
    /// The image's defmt decoder, for channel 0 (`defmt-rtt`'s), when the image uses defmt.
    defmt: Option<crate::dump::defmt::DefmtLog>,
    /// Decoded log lines not yet taken by the caller (to print them as they arrive).
    lines: Vec<String>,
}

/// An up channel descriptor: name, buffer, size, write offset, read offset, flags.
const RTT_DESC: u32 = 24;

impl AppRtt {
    /// The control block at `addr`; channels go to `dir` (the run's directory), and when the
    /// image saved there uses defmt, channel 0's frames are decoded into `defmt.log` beside.
    pub fn new(addr: u32, dir: &std::path::Path) -> AppRtt {
        let defmt = std::fs::read(dir.join(crate::runs::ELF))
            .ok()
            .and_then(|elf| crate::dump::defmt::DefmtLog::of_elf(&elf).ok().flatten());
        AppRtt {
            addr,
            dir: dir.to_path_buf(),
            read: Vec::new(),
            defmt,
            lines: Vec::new(),
        }
    }

    /// The defmt log lines decoded since the last call.
    pub fn take_lines(&mut self) -> Vec<String> {
        std::mem::take(&mut self.lines)
    }

    /// Copy what the channels hold beyond the last read to their files. Returns the bytes.
    pub fn forward(&mut self, t: &mut dyn Memory) -> Result<usize> {
        let mut head = [0u8; 24];
        t.read(self.addr, &mut head)?;
        if !head.starts_with(b"SEGGER RTT") {
            return Ok(0); // not set up yet
        }
        let word = |b: &[u8], o: usize| read_u32(b, o).unwrap_or(0);
        let ups = word(&head, 16).min(16) as usize;
        self.read.resize(ups, None);
        let mut total = 0;
        for k in 0..ups {
            let at = self.addr + 24 + k as u32 * RTT_DESC;
            let mut d = [0u8; RTT_DESC as usize];
            t.read(at, &mut d)?;
            let (buf, size, wr, rd_target) = (word(&d, 4), word(&d, 8), word(&d, 12), word(&d, 16));
            if buf == 0 || size == 0 || wr >= size || rd_target >= size {
                continue;
            }
            let rd = *self.read[k].get_or_insert(rd_target);
            if rd == wr {
                continue;
            }
            let mut bytes = Vec::new();
            let mut piece = |from: u32, to: u32| -> Result<()> {
                let mut b = vec![0u8; (to - from) as usize];
                t.read(buf + from, &mut b)?;
                bytes.extend_from_slice(&b);
                Ok(())
            };
            if wr > rd {
                piece(rd, wr)?;
            } else {
                piece(rd, size)?;
                piece(0, wr)?;
            }
            self.read[k] = Some(wr);
            // Free the space for the application, where the target can be written.
            let _ = t.write(at + 16, &wr.to_le_bytes());
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.dir.join(format!("rtt-{k}.bin")))?;
            f.write_all(&bytes)?;
            total += bytes.len();
            if k == 0
                && let Some(log) = self.defmt.as_mut()
            {
                let lines = log.feed(&bytes);
                if !lines.is_empty() {
                    let mut f = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(self.dir.join(crate::runs::DEFMT_LOG))?;
                    for l in &lines {
                        writeln!(f, "{l}")?;
                    }
                    self.lines.extend(lines);
                }
            }
        }
        Ok(total)
    }
}

/// Read-only memory as a [`Memory`], for tests of the readers.
/// Where a reading of a running sampler stands after one turn.
#[derive(Debug)]
pub enum Step {
    /// The sampler has not started (the state is not readable or not set up yet): why.
    Waiting(anyhow::Error),
    /// Sampling; what was new is read.
    Running,
    /// The sampler stopped and everything it took is read.
    Stopped,
}

/// One host-side reading of a running sampler, whatever the link (QEMU's monitor, a debug
/// probe): attach once the sampler runs, read what is new each turn, pass the application's
/// RTT output on, and finish when the sampler stops or the host ends the run.
#[derive(Debug)]
pub struct Reader {
    state_addr: u32,
    names: Option<NamesAt>,
    live: Option<Live>,
    app_rtt: Option<AppRtt>,
}

impl Reader {
    pub fn new(state_addr: u32, names: Option<NamesAt>, app_rtt: Option<AppRtt>) -> Reader {
        Reader {
            state_addr,
            names,
            live: None,
            app_rtt,
        }
    }

    /// One turn: attach if not yet, read what is new, and on the sampler's stop read the rest
    /// and hand its sink back to the firmware.
    pub fn step(&mut self, t: &mut dyn Memory) -> Result<Step> {
        let l = match &mut self.live {
            Some(l) => l,
            None => match Live::attach(t, self.state_addr) {
                Ok(l) => self.live.insert(l),
                Err(e) if e.is::<NotStarted>() => return Ok(Step::Waiting(e)),
                // The link failed: the caller decides whether to try again.
                Err(e) => return Err(e),
            },
        };
        l.poll(t)?;
        if !l.stopped() {
            l.beat(t);
        }
        if let Some(r) = &mut self.app_rtt {
            // The application's output is a courtesy: a read that fails is tried next turn.
            let _ = r.forward(t);
        }
        if l.stopped() {
            l.finish(t, self.names)?;
            let _ = l.release(t);
            return Ok(Step::Stopped);
        }
        Ok(Step::Running)
    }

    /// The application's defmt log lines decoded since the last call.
    pub fn take_log_lines(&mut self) -> Vec<String> {
        self.app_rtt
            .as_mut()
            .map(AppRtt::take_lines)
            .unwrap_or_default()
    }

    /// Wait `d` before the next read, with a sign of life to a firmware waiting at its end at
    /// least every [`BEAT`]: a poll interval longer than the firmware's bounded wait then
    /// loses nothing either.
    pub fn pause(&mut self, t: &mut dyn Memory, d: Duration) {
        let until = Instant::now() + d;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            std::thread::sleep(left.min(BEAT));
            if let Some(l) = self.live.as_mut().filter(|l| !l.stopped())
                && Instant::now() < until
            {
                l.beat(t);
            }
        }
    }

    /// The host ends the run (a duration, a timeout, Ctrl-C): read the bins and names so far.
    pub fn finish(&mut self, t: &mut dyn Memory) -> Result<()> {
        match &mut self.live {
            Some(l) if !l.stopped() => l.finish(t, self.names),
            _ => Ok(()),
        }
    }

    /// What was read, once the sampler was found.
    pub fn live(&self) -> Option<&Live> {
        self.live.as_ref()
    }

    pub fn live_mut(&mut self) -> Option<&mut Live> {
        self.live.as_mut()
    }

    pub fn into_live(self) -> Option<Live> {
        self.live
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use anyhow::{Context, Result, bail};

    /// Memory at `base`, as the firmware left it.
    pub(crate) struct Ram {
        pub base: u32,
        pub bytes: Vec<u8>,
    }

    impl super::Memory for Ram {
        fn read(&mut self, addr: u32, buf: &mut [u8]) -> Result<()> {
            let at = addr.checked_sub(self.base).context("below the RAM")? as usize;
            let src = self
                .bytes
                .get(at..at + buf.len())
                .context("beyond the RAM")?;
            buf.copy_from_slice(src);
            Ok(())
        }
        fn write(&mut self, _: u32, _: &[u8]) -> Result<()> {
            bail!("read-only")
        }
    }
}

#[cfg(test)]
mod tests;
