use super::*;

/// A sampler in memory: a state block and a ring of `cap` entries, taking samples 0, 1, 2,
/// ... (the sample's number is its PC, so losses and order show).
struct Fake {
    state: Vec<u8>,
    ring: Vec<u8>,
    cap: u32,
    taken: u32,
    /// Samples the sampler takes during each ring read (a slow probe).
    during_read: u32,
    /// Whether a read of the ring finds the sampler in the middle of writing its next entry
    /// (the count not yet moved): that slot holds a value that is no sample.
    writing: bool,
    /// The state read (counted from 1) that finds the sampler between the steps of its
    /// chunk's end (`before` moved on, `chunk` not yet cleared), 0 none.
    torn_state_read: u32,
    state_reads: u32,
    /// Every this many 1 KiB blocks read, one fails (a probe's FAULT), 0 never.
    fail_every: u32,
    blocks: u32,
}

const STATE: u32 = 0x2000_0000;
const RING: u32 = 0x2000_1000;

impl Fake {
    fn new(cap: u32) -> Fake {
        let mut f = Fake {
            state: vec![0; wire::STATE_LEN],
            ring: vec![0; cap as usize * 4],
            cap,
            taken: 0,
            during_read: 0,
            writing: false,
            torn_state_read: 0,
            state_reads: 0,
            fail_every: 0,
            blocks: 0,
        };
        f.sync();
        f
    }

    fn take(&mut self, n: u32) {
        for _ in 0..n {
            let slot = (self.taken % self.cap) as usize * 4;
            self.ring[slot..slot + 4].copy_from_slice(&self.taken.to_le_bytes());
            self.taken += 1;
        }
        self.sync();
    }

    fn sync(&mut self) {
        let put = |b: &mut Vec<u8>, o: usize, v: u32| b[o..o + 4].copy_from_slice(&v.to_le_bytes());
        // before = taken, chunk = 0, remaining = 0: taken() = before.
        put(&mut self.state, 4, 0);
        put(&mut self.state, 32, 0);
        put(&mut self.state, 36, self.taken);
        put(&mut self.state, 44, self.cap);
        put(&mut self.state, 48, RING);
        self.state[52] = wire::MODE_RING;
        self.state[59] = 7;
        put(&mut self.state, 60, wire::STATE_MAGIC);
    }
}

impl Memory for Fake {
    fn read(&mut self, addr: u32, buf: &mut [u8]) -> Result<()> {
        for _ in 0..buf.len().div_ceil(1024) {
            self.blocks += 1;
            if self.fail_every > 0 && self.blocks.is_multiple_of(self.fail_every) {
                bail!("injected FAULT");
            }
        }
        if addr == STATE {
            buf.copy_from_slice(&self.state[..buf.len()]);
            self.state_reads += 1;
            if self.state_reads == self.torn_state_read {
                // before = taken with the old chunk (a whole ring) still there.
                buf[32..36].copy_from_slice(&self.cap.to_le_bytes());
            }
        } else {
            let o = (addr - RING) as usize;
            if self.writing {
                let slot = (self.taken % self.cap) as usize * 4;
                self.ring[slot..slot + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            }
            buf.copy_from_slice(&self.ring[o..o + buf.len()]);
            let n = self.during_read;
            self.take(n);
        }
        Ok(())
    }

    fn write(&mut self, addr: u32, bytes: &[u8]) -> Result<()> {
        let o = (addr - STATE) as usize;
        self.state[o..o + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }
}

fn check(l: &Live, f: &Fake) {
    // Every sample is delivered or counted, and delivered ones are in order without gaps
    // except where losses were counted.
    assert_eq!(l.pcs.len() as u64 + l.lost, f.taken as u64);
    assert!(l.pcs.windows(2).all(|w| w[0] < w[1]), "{:?}", &l.pcs);
}

#[test]
fn a_host_that_keeps_up_gets_every_sample() {
    let mut f = Fake::new(64);
    let mut l = Live::attach(&mut f, STATE).unwrap();
    // 63 at most between reads: with a whole ring (64) behind, the oldest entry may be the
    // one the sampler is writing over, and is counted lost.
    for step in [10, 0, 63, 63, 1, 50] {
        f.take(step);
        l.poll(&mut f).unwrap();
    }
    check(&l, &f);
    assert_eq!(l.lost, 0);
    assert_eq!(l.pcs, (0..f.taken).collect::<Vec<_>>());
}

#[test]
fn a_host_that_falls_behind_counts_what_it_missed() {
    let mut f = Fake::new(64);
    let mut l = Live::attach(&mut f, STATE).unwrap();
    f.take(200);
    l.poll(&mut f).unwrap();
    assert_eq!(l.lost, 137);
    assert_eq!(l.pcs.first(), Some(&137));
    check(&l, &f);
}

#[test]
fn samples_overwritten_while_being_read_are_counted_not_kept() {
    let mut f = Fake::new(64);
    let mut l = Live::attach(&mut f, STATE).unwrap();
    f.take(60);
    f.during_read = 30; // the sampler laps the oldest 26 of the 60 while the host reads
    l.poll(&mut f).unwrap();
    f.during_read = 0;
    l.poll(&mut f).unwrap();
    check(&l, &f);
    // Only samples that could not have changed were kept; their values are right.
    assert!(
        l.pcs
            .iter()
            .enumerate()
            .all(|(i, &pc)| i == 0 || pc > l.pcs[i - 1])
    );
    assert!(l.lost >= 26);
}

#[test]
fn an_entry_being_written_as_it_is_read_is_counted_not_kept() {
    // The host is a whole ring behind; as it reads, the sampler is writing the next sample
    // over the oldest one the host is about to take, and has not moved its count yet.
    let mut f = Fake::new(64);
    let mut l = Live::attach(&mut f, STATE).unwrap();
    f.take(64);
    f.writing = true;
    l.poll(&mut f).unwrap();
    f.writing = false;
    f.take(1);
    l.poll(&mut f).unwrap();
    check(&l, &f);
    assert!(!l.pcs.contains(&u32::MAX), "a half-written entry was kept");
    assert_eq!((l.lost, l.pcs[0]), (1, 1));
}

#[test]
fn a_count_read_in_the_middle_of_a_chunks_end_is_read_again() {
    // Whichever of the state reads lands between the words the sampler's chunk end moves,
    // the host neither takes slots not yet written for samples nor thinks the target was
    // reset when the count looks to go back.
    for torn in 1..=6 {
        let mut f = Fake::new(64);
        let mut l = Live::attach(&mut f, STATE).unwrap();
        f.take(40);
        l.poll(&mut f).unwrap();
        f.take(10);
        f.torn_state_read = f.state_reads + torn;
        l.poll(&mut f).unwrap();
        f.take(30);
        l.poll(&mut f).unwrap();
        check(&l, &f);
        assert_eq!((l.lost, l.pcs.len()), (0, 80), "torn read {torn}");
    }
}

#[test]
fn attaching_late_starts_with_what_the_ring_holds() {
    let mut f = Fake::new(64);
    f.take(1000);
    let mut l = Live::attach(&mut f, STATE).unwrap();
    l.poll(&mut f).unwrap();
    f.take(5);
    l.poll(&mut f).unwrap();
    assert_eq!(l.pcs.len(), 68);
    assert_eq!(*l.pcs.first().unwrap(), 1000 - 63);
    // The dump counts from the first sample read; the ones before were never in reach.
    let d = l.to_dump(Fingerprint::default(), wire::STOP_SNAPSHOT);
    assert_eq!(d.first_seq, 1000 - 63);
    assert_eq!(d.info.taken, f.taken);
    assert_eq!(d.info.lost, 1000 - 63);
}

#[test]
fn a_stopped_sampler_is_released_by_clearing_its_sink() {
    let mut f = Fake::new(16);
    f.state[wire::state_offsets::SINK] = wire::SINK_HOST;
    f.state[58] = wire::PHASE_STOPPED;
    let mut l = Live::attach(&mut f, STATE).unwrap();
    l.poll(&mut f).unwrap();
    assert!(l.stopped());
    l.release(&mut f).unwrap();
    assert_eq!(f.state[wire::state_offsets::SINK], wire::SINK_NONE);
}

#[test]
fn a_reading_host_beats_until_the_sampler_stops_and_the_beat_is_not_a_tag() {
    let mut f = Fake::new(16);
    f.state[wire::state_offsets::SINK] = wire::SINK_HOST;
    let beat = wire::state_offsets::HOST_BEAT;
    let mut r = Reader::new(STATE, None, None);
    let mut seen = vec![f.state[beat]];
    for _ in 0..3 {
        f.take(5);
        assert!(matches!(r.step(&mut f).unwrap(), Step::Running));
        seen.push(f.state[beat]);
        // Between reads too, at least every `BEAT`.
        r.pause(&mut f, BEAT * 3);
        seen.push(f.state[beat]);
    }
    assert!(seen.windows(2).all(|w| w[0] != w[1]), "{seen:?}");
    // A beat byte that is set leaves the ring's entries plain PCs.
    assert_eq!(r.live().unwrap().state.entry_bytes(), 4);
    assert_eq!(r.live().unwrap().pcs.len(), 15);
    f.state[58] = wire::PHASE_STOPPED;
    let before = f.state[beat];
    assert!(matches!(r.step(&mut f).unwrap(), Step::Stopped));
    r.pause(&mut f, BEAT * 2);
    assert_eq!(
        (f.state[beat], f.state[wire::state_offsets::SINK]),
        (before, wire::SINK_NONE)
    );
}

#[test]
fn a_failed_read_before_the_sampler_is_found_is_an_error_not_a_wait() {
    let mut r = Reader::new(0x3000_0000, None, None);
    let mut ram = testing::Ram {
        base: STATE,
        bytes: vec![0; 256],
    };
    // Readable and empty: not started yet.
    let mut at_state = Reader::new(STATE, None, None);
    assert!(matches!(at_state.step(&mut ram).unwrap(), Step::Waiting(_)));
    // Unreadable: the link (or the target) failed.
    assert!(r.step(&mut ram).is_err());
}

#[test]
fn reads_that_fail_now_and_then_lose_no_progress() {
    // 3000 samples behind (12 KB): a probe that faults every 9th block never gets the
    // backlog in one read, but piece by piece every sample arrives.
    let mut f = Fake::new(4096);
    let mut l = Live::attach(&mut f, STATE).unwrap();
    f.take(3000);
    f.fail_every = 9;
    let mut failures = 0;
    for _ in 0..50 {
        if l.poll(&mut f).is_err() {
            failures += 1;
        }
        if l.pcs.len() == 3000 {
            break;
        }
    }
    assert!(failures > 0);
    check(&l, &f);
    assert_eq!((l.pcs.len(), l.lost), (3000, 0));
}

#[test]
fn losses_reach_the_dump() {
    let mut f = Fake::new(8);
    let mut l = Live::attach(&mut f, STATE).unwrap();
    f.take(20);
    l.poll(&mut f).unwrap();
    let d = l.to_dump(Fingerprint::default(), wire::STOP_LIMIT);
    assert_eq!((d.info.taken, d.info.lost, d.pcs.len()), (20, 13, 7));
    // The bytes decode to the same thing.
    let again = crate::dump::decode(&crate::dump::encode(&crate::dump::Dump::of_samples(
        d.info,
        d.first_seq,
        d.pcs.clone(),
        Vec::new(),
    )))
    .unwrap();
    assert_eq!(again.info.lost, 13);
}

use super::testing::Ram;

#[test]
fn tag_names_are_read_out_of_memory_for_both_pointer_sizes() {
    for wide in [false, true] {
        let base = 0x4000_0000u32;
        let (at, size) = wire::names_layout(wide);
        let table_len = at + size * wire::NAMES_MAX;
        let mut bytes = vec![0u8; table_len + 64];
        let mut put = |o: usize, v: &[u8]| bytes[o..o + v.len()].copy_from_slice(v);
        put(0, &2u32.to_le_bytes());
        let strings = table_len as u32;
        for (i, (tag, name, off)) in [(7u32, "motor", 0u32), (9, "radio", 8)].iter().enumerate() {
            let e = at + i * size;
            put(e, &tag.to_le_bytes());
            put(e + 4, &(name.len() as u32).to_le_bytes());
            let ptr = (base + strings + off) as u64;
            if wide {
                put(e + 8, &ptr.to_le_bytes());
            } else {
                put(e + 8, &(ptr as u32).to_le_bytes());
            }
            put((strings + off) as usize, name.as_bytes());
        }
        let mut ram = Ram { base, bytes };
        let names = read_names(
            &mut ram,
            NamesAt {
                addr: base,
                wide,
                tasks: None,
                task_events: None,
            },
        )
        .unwrap();
        assert_eq!(
            names,
            [(7, "motor".to_owned()), (9, "radio".to_owned())],
            "wide {wide}"
        );
    }
}

#[test]
fn a_task_table_read_before_the_firmware_folded_its_events_says_how_many_wait() {
    use sampler_rt::wire::tasks_table as w;
    let mut f = Fake::new(64);
    let mut l = Live::attach(&mut f, STATE).unwrap();
    // In one stretch of memory: the names (none), the task table (the clock chosen, one
    // task), and the event ring of four events with its head, tail and losses after it.
    let base = 0x2000_8000u32;
    let (tasks_at, events_at) = (0x100usize, 0x1000usize);
    let tasks_len = w::SLOTS + w::SLOT_SIZE;
    let events_len = 4 * 16 + 16;
    let mut bytes = vec![0u8; events_at + events_len];
    let mut put = |o: usize, v: u32| bytes[o..o + 4].copy_from_slice(&v.to_le_bytes());
    put(tasks_at + w::CHOSEN, 1);
    put(tasks_at + w::COUNTER, u32::from(wire::LAP_COUNTER_NONE));
    put(tasks_at + w::SLOTS + w::ID, 0x2000_0400);
    put(tasks_at + w::SLOTS + w::POLLS, 5);
    let state = events_at + 4 * 16;
    put(state + 4, 10);
    put(state + 8, 4);
    put(state + 12, 2);
    let mut ram = Ram { base, bytes };
    let at = NamesAt {
        addr: base,
        wide: false,
        tasks: Some((base + tasks_at as u32, tasks_len as u32)),
        task_events: Some((base + events_at as u32, events_len as u32)),
    };
    l.finish(&mut ram, Some(at)).unwrap();
    let t = l.tasks.as_ref().expect("the table");
    assert_eq!(t.tasks[0].polls, 5);
    assert_eq!((t.unfolded_events, t.lost_events), (6, 2));
}
