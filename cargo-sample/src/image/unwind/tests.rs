use super::*;

#[test]
fn bl_targets_decode_both_directions() {
    // `bl` +0x100 at 0x1000 (return address 0x1004): F000 F880.
    let mut u = Unwinder::new(&[], &[], None);
    u.code = vec![(0x1000, vec![0x00, 0xF0, 0x80, 0xF8])];
    assert_eq!(u.bl_target(0x1004), Some(0x1104));
    // `bl` -0x8 at 0x1000: F7FF FFFC (to 0x0FFC).
    u.code = vec![(0x1000, vec![0xFF, 0xF7, 0xFC, 0xFF])];
    assert_eq!(u.bl_target(0x1004), Some(0x0FFC));
    // Not a bl.
    u.code = vec![(0x1000, vec![0x00, 0xBF, 0x00, 0xBF])];
    assert_eq!(u.bl_target(0x1004), None);
    assert_eq!(u.bl_target(0x2), None);
}

/// Windows of garbage, cycles and runaway stacks over a real image: every stack ends,
/// within the depth bound, with a reason.
#[test]
fn hostile_windows_end_within_bounds() {
    let elf = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/hot-loops.elf"
    ))
    .unwrap();
    let functions: Vec<CodeRange> = {
        use object::{Object, ObjectSymbol};
        let f = object::File::parse(&*elf).unwrap();
        f.symbols()
            .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
            .map(|s| CodeRange {
                start: s.address() & !1,
                end: (s.address() & !1) + s.size(),
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    let mut u = Unwinder::new(&elf, &functions, Some(0xC1));
    assert!(u.missing.is_none());
    let mut x = 0x1234_5678u32;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    let sp = 0x2000_0000;
    for round in 0..2000 {
        let code = (0x154 + (next() % 0x540)) & !1;
        let window: Vec<u32> = (0..64)
            .map(|i| match round % 3 {
                // Return addresses into code, frame words pointing back into the window.
                0 => 0x155 + (next() % 0x540),
                1 => sp + 4 * (i & !3),
                _ => next(),
            })
            .collect();
        let r = u.unwind(&Context {
            pc: code,
            lr: next() | 1,
            sp,
            r7: sp + 4 * (next() % 64),
            window: &window,
            records: &[(sp + 0x200, 0x155), (sp + 0x100, 0x201)],
            frames_inline: round % 2 == 0,
        });
        assert!(r.frames.len() <= MAX_DEPTH + 2, "{}", r.frames.len());
        if let End::Failed(why) = &r.end {
            assert!(!why.is_empty());
        }
    }
}

#[test]
fn a_prologue_stands_in_for_missing_call_frame_information() {
    // push {r4, lr}; sub sp, #16; bl ... (compiler-builtins' __aeabi_uldivmod's shape).
    let range = CodeRange {
        start: 0x1000,
        end: 0x1014,
    };
    let mut u = Unwinder::new(&[], &[range], None);
    u.functions = vec![(0x1000, 0x1014)];
    u.code = vec![(
        0x1000,
        vec![
            0x10, 0xB5, 0x84, 0xB0, 0x00, 0xF0, 0x00, 0xF8, 0x04, 0xB0, 0x10, 0xBD,
        ],
    )];
    let row = u.prologue_row(0x1006).unwrap();
    assert_eq!(row.cfa, Some((13, 24)));
    assert_eq!(row.ra, Loc::At(-4));
    // push {r4-r7, lr}; add r7, sp, #12: the CFA on the frame pointer.
    u.code = vec![(0x1000, vec![0xF0, 0xB5, 0x03, 0xAF, 0x00, 0xBF])];
    let row = u.prologue_row(0x1004).unwrap();
    assert_eq!(row.cfa, Some((7, 8)));
    assert_eq!((row.ra, row.r7), (Loc::At(-4), Loc::At(-8)));
    // At the epilogue's `pop {r4, pc}`, after `add sp, #16`.
    u.code = vec![(
        0x1000,
        vec![
            0x10, 0xB5, 0x84, 0xB0, 0x00, 0xF0, 0x00, 0xF8, 0x04, 0xB0, 0x10, 0xBD,
        ],
    )];
    let row = u.prologue_row(0x100A).unwrap();
    assert_eq!((row.cfa, row.ra), (Some((13, 8)), Loc::At(-4)));
    // Before the push: nothing saved yet, the return address is still in LR.
    let row = u.prologue_row(0x1000).unwrap();
    assert_eq!((row.cfa, row.ra), (Some((13, 0)), Loc::Same));
}

#[test]
fn a64_calls_are_decoded_for_tail_calls() {
    let mut u = Unwinder::new(&[], &[], None);
    u.a64 = true;
    // `bl +0x100` at 0x40001000 (94000040), and `bl -8` (97FFFFFE); a `nop` is no call.
    u.code = vec![(0x4000_1000, vec![0x40, 0x00, 0x00, 0x94])];
    assert_eq!(u.bl_target(0x4000_1004), Some(0x4000_1100));
    u.code = vec![(0x4000_1000, vec![0xFE, 0xFF, 0xFF, 0x97])];
    assert_eq!(u.bl_target(0x4000_1004), Some(0x4000_0FF8));
    u.code = vec![(0x4000_1000, vec![0x1F, 0x20, 0x03, 0xD5])];
    assert_eq!(u.bl_target(0x4000_1004), None);
    // The CFI's x29, x30 and SP play r7's, LR's and SP's parts.
    assert_eq!(
        (
            thumb_number(true, 29),
            thumb_number(true, 30),
            thumb_number(true, 31)
        ),
        (7, 14, 13)
    );
    assert_eq!(thumb_number(true, 7), 0xFFFF);
    assert_eq!(thumb_number(false, 7), 7);
}

#[test]
fn an_epilogue_under_way_is_read_from_its_instructions() {
    // rustc's `mac` on a Cortex-M4F: the loop's `bne`, then `add sp, #4; pop.w {r7, lr};
    // b 1f; vldr s2, [pc, #8]; 1: vmov.f32 s0, s2; bx lr` (the call-frame information
    // still says "LR at CFA - 4" after the pop).
    let mut u = Unwinder::new(&[], &[], None);
    u.functions = vec![(0x6a0, 0x6bc)];
    u.code = vec![(
        0x6a8,
        vec![
            0xEE, 0xD1, 0x01, 0xB0, 0xBD, 0xE8, 0x80, 0x40, 0x01, 0xE0, 0x9F, 0xED, 0x02, 0x1A,
            0xB0, 0xEE, 0x41, 0x0A, 0x70, 0x47,
        ],
    )];
    let row = |pc| u.epilogue_row(pc).map(|r| (r.cfa, r.ra, r.r7));
    assert_eq!(row(0x6a8), None, "a conditional branch is not an epilogue");
    assert_eq!(row(0x6aa), Some((Some((13, 12)), Loc::At(-4), Loc::At(-8))));
    assert_eq!(row(0x6ac), Some((Some((13, 8)), Loc::At(-4), Loc::At(-8))));
    // After the pop: the return address is in LR, nothing is left on the stack.
    assert_eq!(row(0x6b6), Some((Some((13, 0)), Loc::Same, Loc::Same)));
    assert_eq!(row(0x6b2), Some((Some((13, 0)), Loc::Same, Loc::Same)));
    assert_eq!(row(0x6ba), Some((Some((13, 0)), Loc::Same, Loc::Same)));
    // `pop {r7}; b <another function>`: a tail call returns where LR says.
    u.functions = vec![(0x2000, 0x2008)];
    u.code = vec![(0x2000, vec![0x80, 0xBC, 0x05, 0xE0, 0x00, 0xBF, 0x00, 0xBF])];
    assert_eq!(
        u.epilogue_row(0x2000).map(|r| (r.cfa, r.ra, r.r7)),
        Some((Some((13, 4)), Loc::Same, Loc::At(-4)))
    );
    // Straight-line code that reaches the function's end without returning is not read.
    u.code = vec![(0x2000, vec![0x80, 0xBC, 0x00, 0xBF, 0x00, 0xBF, 0x00, 0xBF])];
    assert_eq!(u.epilogue_row(0x2000), None);
}

#[test]
fn garbage_is_a_failure_with_a_reason_not_a_panic() {
    let mut u = Unwinder::new(b"not an elf", &[], None);
    let w = [0xFFFF_FFFFu32; 8];
    let r = u.unwind(&Context {
        pc: 0x100,
        lr: 0xFFFF_FFF9,
        sp: 0x2000_0000,
        r7: 0,
        window: &w,
        records: &[],
        frames_inline: true,
    });
    assert!(matches!(r.end, End::Failed(ref why) if why.contains("not an ELF")));
    assert_eq!(r.frames.len(), 1);
}

/// A sample that kept no stack at all (its stack pointer at or above the top the sampler was
/// given) fails with that reason, not as a window cut short.
#[test]
fn an_empty_window_is_told_for_what_it_is() {
    use object::{Object, ObjectSymbol};
    let elf = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/hot-loops.elf"
    ))
    .unwrap();
    let f = object::File::parse(&*elf).unwrap();
    let sized: Vec<(u64, u64, String)> = f
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
        .map(|s| {
            (
                s.address() & !1,
                (s.address() & !1) + s.size(),
                s.name().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let ranges = |skip: &str| -> Vec<CodeRange> {
        sized
            .iter()
            .filter(|s| s.2 != skip)
            .map(|s| CodeRange {
                start: s.0,
                end: s.1,
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    // `run` keeps its return address on the stack (it calls the hot loops).
    let run = sized
        .iter()
        .find(|s| s.2.contains("hot_loops3run"))
        .unwrap();
    let mut u = Unwinder::new(&elf, &ranges(""), Some(0xC1));
    let pc = (run.0 + (run.1 - run.0) / 2) as u32 & !1;
    let context = |window: &'static [u32]| Context {
        pc,
        lr: 0,
        sp: 0x2000_0000,
        r7: 0,
        window,
        records: &[],
        frames_inline: false,
    };
    let r = u.unwind(&context(&[]));
    assert!(
        matches!(&r.end, End::Failed(why) if why.starts_with("no stack was kept")),
        "{:?}",
        r.end
    );
    assert_eq!(u.unwind(&context(&[0; 1])).end, End::Truncated);
}
