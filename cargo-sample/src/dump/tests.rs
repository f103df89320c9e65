use super::encode::VecWriter;
use super::*;
use sampler_rt::wire::DumpWriter;

/// A dump streamed as the runtimes stream it: INFO (and its CHECK), records of `per`
/// samples each followed by a CHECK, a NAMES record, END. Returns it and each record of
/// samples' byte range.
fn streamed(chunks: u32, per: u32) -> (Vec<u8>, Vec<std::ops::Range<usize>>) {
    let mut w = VecWriter {
        out: Vec::new(),
        crc: 0,
    };
    w.begin();
    w.info(&Info {
        taken: chunks * per,
        ..Info::default()
    });
    let mut ranges = Vec::new();
    for c in 0..chunks {
        let start = w.out.len();
        w.record(wire::REC_PCS, 8 + 4 * per);
        w.put32(c * per);
        w.put32(per);
        for k in 0..per {
            w.put32(0x1000 + 2 * (c * per + k));
        }
        ranges.push(start..w.out.len());
        w.check();
    }
    w.record(wire::REC_NAMES, 20);
    for v in [1, 7, 5] {
        w.put32(v);
    }
    w.put(b"motor\0\0\0");
    w.end();
    (w.out, ranges)
}

#[test]
fn a_damaged_dump_keeps_the_records_its_checkpoints_vouch_for() {
    let (clean, ranges) = streamed(3, 100);
    let d = decode(&clean).unwrap();
    assert_eq!(d.pcs.len(), 300);
    assert_eq!(d.names, [(7, "motor".to_owned())]);
    // A flip inside the second record: its 100 samples go, the rest stay, in order.
    let mut bytes = clean.clone();
    bytes[ranges[1].start + 200] ^= 0x40;
    let (d, err) = decode_partial(&bytes);
    let Some(DumpError::Damaged {
        ranges: bad,
        samples,
    }) = err
    else {
        panic!("{err:?}")
    };
    assert_eq!(samples, 100);
    assert_eq!(bad.len(), 1);
    assert!(bad[0].start <= ranges[1].start && ranges[1].end <= bad[0].end);
    assert!(ranges[0].end <= bad[0].start && bad[0].end <= ranges[2].start);
    let want: Vec<u32> = (0..100).chain(200..300).map(|k| 0x1000 + 2 * k).collect();
    assert_eq!(d.pcs, want);
    assert_eq!(d.names, [(7, "motor".to_owned())]);
    assert!(decode(&bytes).is_err(), "strict decoding refuses it");
    // A damaged checkpoint value: the stretch after it checks out from the CRC computed
    // up to it, so only the checkpoint is named and every sample stays.
    let mut bytes = clean.clone();
    bytes[ranges[1].end + 9] ^= 1;
    let (d, err) = decode_partial(&bytes);
    let Some(DumpError::Damaged {
        ranges: bad,
        samples: 0,
    }) = err
    else {
        panic!("{err:?}")
    };
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0], ranges[1].end..ranges[1].end + 12);
    assert_eq!(d.pcs.len(), 300);
    // After the last checkpoint: the names go, every sample stays.
    let mut bytes = clean.clone();
    let at = bytes.len() - 14;
    bytes[at] ^= 2;
    let (d, err) = decode_partial(&bytes);
    assert!(
        matches!(err, Some(DumpError::Damaged { samples: 0, .. })),
        "{err:?}"
    );
    assert_eq!((d.pcs.len(), d.names.len()), (300, 0));
    // In the INFO record: nothing can be trusted.
    let mut bytes = clean;
    bytes[wire::FILE_HEADER_LEN + 8 + 20] ^= 1;
    let (d, err) = decode_partial(&bytes);
    assert!(matches!(err, Some(DumpError::Checksum { .. })), "{err:?}");
    assert!(d.pcs.is_empty());
}

#[test]
fn tagged_samples_and_names_round_trip() {
    let info = Info {
        tag_kind: wire::TAG_XPSR,
        taken: 3,
        ..Info::default()
    };
    let mut bytes = encode(&Dump::of_samples(
        info,
        5,
        vec![0x100, 0x102, 0x104],
        vec![0, 47, 0],
    ));
    let d = decode(&bytes).unwrap();
    assert_eq!(d.pcs, [0x100, 0x102, 0x104]);
    assert_eq!(d.tags, [0, 47, 0]);
    assert_eq!(d.first_seq, 5);
    assert_eq!(d.info.tag_kind, wire::TAG_XPSR);
    // A NAMES record before END.
    let end = bytes.len() - 12;
    bytes.truncate(end);
    let mut names = Vec::new();
    names.extend_from_slice(&1u32.to_le_bytes());
    names.extend_from_slice(&47u32.to_le_bytes());
    names.extend_from_slice(&5u32.to_le_bytes());
    names.extend_from_slice(b"motor\0\0\0");
    bytes.extend_from_slice(&wire::record_header(wire::REC_NAMES, names.len() as u32));
    bytes.extend_from_slice(&names);
    let crc = wire::crc32(&bytes);
    bytes.extend_from_slice(&wire::record_header(wire::REC_END, 4));
    bytes.extend_from_slice(&crc.to_le_bytes());
    let d = decode(&bytes).unwrap();
    assert_eq!(d.names, [(47, "motor".to_owned())]);
    // A dump the host makes from a ring it read keeps the names, under the CRC.
    let mut d = decode(&encode(&Dump::of_samples(
        info,
        5,
        vec![0x100, 0x102],
        vec![1, 2],
    )))
    .unwrap();
    d.names = vec![(1, "filter".into()), (2, "a name of 10".into())];
    let again = decode(&encode(&d)).unwrap();
    assert_eq!(again.names, d.names);
    assert_eq!((again.pcs, again.tags), (d.pcs, d.tags));
}

#[test]
fn stack_samples_round_trip_and_damage_is_named() {
    let info = Info {
        mode: wire::MODE_RING,
        tag_kind: wire::TAG_XPSR,
        taken: 2,
        ..Info::default()
    };
    let mut d = Dump::of_samples(info, 7, vec![0x100, 0x202], vec![0x0100_0000, 0x0100_002E]);
    d.stacks = vec![
        StackSample {
            lr: 0x105,
            sp: 0x2000_FF00,
            r7: 0x2000_FF10,
            exc_return: 0xF9,
            window: vec![1, 2, 3],
            records: vec![(0x2000_FF40, 0x1235), (0x2000_FF80, 0x1301)],
            frames_inline: true,
        },
        StackSample {
            lr: 0xFFFF_FFF9,
            sp: 0x2000_FE00,
            r7: 0,
            exc_return: 0xE9,
            window: Vec::new(),
            records: Vec::new(),
            frames_inline: false,
        },
    ];
    let bytes = encode(&d);
    let back = decode(&bytes).unwrap();
    assert_eq!(back.pcs, d.pcs);
    assert_eq!(back.tags, d.tags);
    assert_eq!(back.stacks, d.stacks);
    assert_eq!(back.first_seq, 7);
    // Cut anywhere: whole entries kept, never a panic, never more than were sent.
    for cut in 0..bytes.len() {
        let (part, _) = decode_partial(&bytes[..cut]);
        assert!(part.stacks.len() <= 2 && part.stacks.len() == part.pcs.len());
    }
    // An entry that claims more words than the record holds is named.
    let mut bad = bytes.clone();
    // INFO, its CHECK, then STACKS.
    let at = wire::FILE_HEADER_LEN + 2 * wire::RECORD_HEADER_LEN + wire::INFO_LEN + 4;
    assert_eq!(u16::from_le_bytes([bad[at], bad[at + 1]]), wire::REC_STACKS);
    bad[at + wire::RECORD_HEADER_LEN + 12 + 22] = 40;
    assert!(matches!(
        decode_partial(&bad).1,
        Some(DumpError::Malformed(m)) if m.contains("does not hold")
    ));
}

#[test]
fn held_off_marks_and_the_check_round_trip_in_rings_and_stacks() {
    let info = Info {
        mode: wire::MODE_RING,
        taken: 3,
        ..Info::default()
    };
    let check = HeldOff {
        late_ticks: 17,
        count: 1,
        how: wire::LATE_CHECKED,
    };
    // A ring of PCs: the mark is bit 0 of the stored PC.
    let mut d = Dump::of_samples(info, 0, vec![0x100, 0x203, 0x300], Vec::new());
    d.held_off = Some(check);
    let back = decode(&encode(&d)).unwrap();
    assert_eq!(back.pcs, vec![0x100, 0x203, 0x300]);
    assert_eq!(back.held_off, Some(check));
    assert!(back.held_off.unwrap().checked());
    // Stack entries: the mark is a bit of the entry's tail, the PC stored even; read back
    // as bit 0 again.
    let info = Info {
        tag_kind: wire::TAG_XPSR,
        ..info
    };
    let mut d = Dump::of_samples(info, 0, vec![0x101, 0x200], vec![0x0100_0000; 2]);
    d.stacks = vec![StackSample::default(); 2];
    d.held_off = Some(check);
    let bytes = encode(&d);
    let back = decode(&bytes).unwrap();
    assert_eq!(back.pcs, vec![0x101, 0x200]);
    assert_eq!(back.held_off, Some(check));
    let at = wire::FILE_HEADER_LEN + 2 * wire::RECORD_HEADER_LEN + wire::INFO_LEN + 4;
    assert_eq!(
        u16::from_le_bytes([bytes[at], bytes[at + 1]]),
        wire::REC_STACKS
    );
    let first = at + wire::RECORD_HEADER_LEN + 12;
    assert_eq!(le32(&bytes, first), 0x100, "the stored PC is even");
    assert_ne!(le32(&bytes, first + 20) & wire::STACK_HELD_OFF, 0);
    // A run without the check has none.
    let plain = Dump::of_samples(Info::default(), 0, vec![0x100], Vec::new());
    assert_eq!(decode(&encode(&plain)).unwrap().held_off, None);
}

#[test]
fn priorities_round_trip_and_a_short_record_keeps_what_it_has() {
    let mut d = Dump::of_samples(Info::default(), 0, vec![0x100], Vec::new());
    d.priorities = vec![(15, 0x00, true), (14, 0xE0, true), (35, 0x40, true)];
    let again = decode(&encode(&d)).unwrap();
    assert_eq!(again.priorities, d.priorities);
    // A count larger than the payload: the entries that are there.
    let mut bytes = encode(&Dump::of_samples(
        Info::default(),
        0,
        vec![0x100],
        Vec::new(),
    ));
    let end = bytes.len() - 12;
    bytes.truncate(end);
    let mut payload = 9u32.to_le_bytes().to_vec();
    payload.extend_from_slice(&wire::priority_entry(16, 0x20, true).to_le_bytes());
    bytes.extend_from_slice(&wire::record_header(wire::REC_PRIORITIES, 8));
    bytes.extend_from_slice(&payload);
    let crc = wire::crc32(&bytes);
    bytes.extend_from_slice(&wire::record_header(wire::REC_END, 4));
    bytes.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(decode(&bytes).unwrap().priorities, [(16, 0x20, true)]);
}

#[test]
fn histograms_round_trip_and_damage_is_named() {
    let info = Info {
        mode: wire::MODE_HIST,
        taken: 7,
        ..Info::default()
    };
    let h = Hist {
        base: 0x400,
        shift: 4,
        outside: 2,
        bins: vec![1, 0, 3, 0xFFFF, 1],
    };
    let bytes = encode(&Dump {
        info,
        hist: Some(h.clone()),
        ..Dump::default()
    });
    let d = decode(&bytes).unwrap();
    assert_eq!(d.hist.as_ref(), Some(&h));
    assert_eq!(h.total(), 2 + 1 + 3 + 0xFFFF + 1);
    assert_eq!(h.saturated(), 1);
    // Every truncation is reported, none panics.
    for cut in 0..bytes.len() {
        assert!(decode_partial(&bytes[..cut]).1.is_some(), "cut at {cut}");
    }
}

/// A dump the way a streaming firmware writes it: a first INFO, one PCS record per chunk
/// of `chunk` samples, the final INFO, END.
fn encode_streamed(info: &Info, pcs: &[u32], chunk: usize, gap_after_first: u32) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&wire::file_header());
    let first = Info {
        taken: 0,
        stop: wire::STOP_RUNNING,
        ..*info
    };
    out.extend_from_slice(&wire::record_header(wire::REC_INFO, wire::INFO_LEN as u32));
    out.extend_from_slice(&first.encode());
    let mut seq = 0u32;
    for (n, c) in pcs.chunks(chunk).enumerate() {
        out.extend_from_slice(&wire::record_header(wire::REC_PCS, 8 + 4 * c.len() as u32));
        out.extend_from_slice(&seq.to_le_bytes());
        out.extend_from_slice(&(c.len() as u32).to_le_bytes());
        c.iter()
            .for_each(|pc| out.extend_from_slice(&pc.to_le_bytes()));
        seq += c.len() as u32 + if n == 0 { gap_after_first } else { 0 };
    }
    out.extend_from_slice(&wire::record_header(wire::REC_INFO, wire::INFO_LEN as u32));
    out.extend_from_slice(&info.encode());
    let crc = wire::crc32(&out);
    out.extend_from_slice(&wire::record_header(wire::REC_END, 4));
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

#[test]
fn streamed_chunks_join_and_the_last_info_wins() {
    let (info, pcs) = sample();
    let bytes = encode_streamed(&info, &pcs, 32, 0);
    let d = decode(&bytes).unwrap();
    assert_eq!(d.pcs, pcs);
    assert_eq!(d.first_seq, 0);
    assert_eq!(d.info.taken, 100);
    assert_eq!(d.info.stop, wire::STOP_LIMIT);
    // Cut inside the third chunk: the first two chunks and the whole samples after them
    // survive, with the provisional INFO.
    let cut = wire::FILE_HEADER_LEN + 8 + wire::INFO_LEN + 2 * (8 + 8 + 128) + 8 + 8 + 40;
    let (d, err) = decode_partial(&bytes[..cut]);
    assert!(matches!(err, Some(DumpError::Truncated { .. })));
    assert_eq!(d.pcs, pcs[..74]);
    assert_eq!(d.info.stop, wire::STOP_RUNNING);
}

#[test]
fn a_gap_between_streamed_chunks_is_malformed() {
    let (info, pcs) = sample();
    let (d, err) = decode_partial(&encode_streamed(&info, &pcs, 32, 5));
    assert!(matches!(err, Some(DumpError::Malformed(ref m)) if m.contains("sample 37")));
    assert_eq!(d.pcs.len(), 32);
}

fn sample() -> (Info, Vec<u32>) {
    let info = Info {
        mode: wire::MODE_RING,
        stop: wire::STOP_LIMIT,
        arch: 7,
        reload: 249,
        jitter_mask: 127,
        limit: 100,
        capacity: 128,
        taken: 100,
        code_start: 0xc0,
        code_end: 0x1000,
        code_crc: 0xdead_beef,
        ..Info::default()
    };
    let pcs = (0..100).map(|i| 0x100 + 2 * i).collect();
    (info, pcs)
}

#[test]
fn round_trip() {
    let (info, pcs) = sample();
    let d = decode(&encode(&Dump::of_samples(info, 7, pcs.clone(), Vec::new()))).unwrap();
    assert_eq!(d.info, info);
    assert_eq!(d.pcs, pcs);
    assert_eq!(d.first_seq, 7);
    assert!(d.complete);
}

#[test]
fn every_truncation_is_reported_and_keeps_whole_samples() {
    let (info, pcs) = sample();
    let bytes = encode(&Dump::of_samples(info, 0, pcs.clone(), Vec::new()));
    for cut in 0..bytes.len() {
        let (d, err) = decode_partial(&bytes[..cut]);
        let err = err.unwrap_or_else(|| panic!("cut at {cut} decoded as complete"));
        assert!(
            matches!(
                err,
                DumpError::Truncated { .. } | DumpError::Empty | DumpError::NotADump
            ),
            "cut at {cut}: {err}"
        );
        assert!(d.pcs.len() <= pcs.len());
        assert_eq!(
            d.pcs[..],
            pcs[..d.pcs.len()],
            "cut at {cut} changed samples"
        );
    }
}

#[test]
fn every_bit_flip_is_caught() {
    let (info, pcs) = sample();
    let bytes = encode(&Dump::of_samples(info, 0, pcs.clone(), Vec::new()));
    for i in 0..bytes.len() {
        for bit in [0, 3, 7] {
            let mut b = bytes.clone();
            b[i] ^= 1 << bit;
            let r = decode(&b);
            assert!(r.is_err(), "flip of bit {bit} in byte {i} went unnoticed");
        }
    }
}

#[test]
fn unknown_records_are_skipped() {
    let (info, pcs) = sample();
    let mut out = Vec::new();
    out.extend_from_slice(&wire::file_header());
    out.extend_from_slice(&wire::record_header(0x7777, 3));
    out.extend_from_slice(&[1, 2, 3, 0]);
    let full = encode(&Dump::of_samples(info, 0, pcs.clone(), Vec::new()));
    out.extend_from_slice(&full[wire::FILE_HEADER_LEN..full.len() - 12]);
    let crc = wire::crc32(&out);
    out.extend_from_slice(&wire::record_header(wire::REC_END, 4));
    out.extend_from_slice(&crc.to_le_bytes());
    let d = decode(&out).unwrap();
    assert_eq!(d.unknown_records, vec![0x7777]);
    assert_eq!(d.pcs.len(), 100);
}

#[test]
fn other_version_and_garbage_are_named() {
    let (info, pcs) = sample();
    let mut b = encode(&Dump::of_samples(info, 0, pcs.clone(), Vec::new()));
    b[4] = 9;
    assert_eq!(decode(&b).unwrap_err(), DumpError::Version(9));
    assert_eq!(
        decode(b"hello world, no dump").unwrap_err(),
        DumpError::NotADump
    );
    assert_eq!(decode(&[]).unwrap_err(), DumpError::Empty);
}
