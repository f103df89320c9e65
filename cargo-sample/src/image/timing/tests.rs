use super::ops::{Class, decode};
use super::*;

/// A core's timing with flash at no wait states.
fn at_zero_wait(core: Core) -> Model {
    Model {
        core,
        wait_states: 0,
        prefetch: true,
        ram_code: Vec::new(),
    }
}

#[test]
fn reads_capstone_spellings() {
    let d = |m: &str, o: &str| decode(m, o).unwrap_or_else(|| panic!("{m} {o}"));
    assert_eq!(d("adds", "r0, r1, #1").class, Class::Alu);
    assert_eq!(d("addne", "r0, r1").class, Class::Alu);
    assert_eq!(d("lsls", "r0, r0, #2").class, Class::Alu);
    assert_eq!(d("bics", "r0, r1").class, Class::Alu);
    assert_eq!(d("mls", "r0, r1, r2, r3").class, Class::MulAcc);
    assert_eq!(d("teq", "r0, r1").class, Class::Alu);
    let b = d("bls", "#0x100");
    assert!(b.class == Class::Branch && b.conditional && b.writes_pc);
    let b = d("b.w", "#0x100");
    assert!(b.class == Class::Branch && !b.conditional);
    assert_eq!(d("bl", "#0x100").class, Class::Call);
    assert!(d("cbz", "r0, #0x20").conditional);
    let p = d("pop.w", "{r4, r5, r6, r7, r8, pc}");
    assert_eq!((p.class, p.regs, p.writes_pc), (Class::LoadMulti, 6, true));
    let p = d("push", "{r4, lr}");
    assert_eq!(
        (p.class, p.regs, p.writes_pc),
        (Class::StoreMulti, 2, false)
    );
    assert_eq!(d("vpush", "{d8, d9, d10}").regs, 6);
    assert_eq!(d("vldmia", "r0!, {s0-s7}").regs, 8);
    assert_eq!(d("ldrbne", "r0, [r1]").class, Class::Load);
    assert!(d("ldr", "r0, [r1, r2, lsl #2]").register_offset);
    assert!(!d("ldr.w", "r0, [r1, #4]").register_offset);
    assert!(d("ldr.w", "r7, [r1], #4").writeback);
    assert!(d("str", "r0, [r1, #-4]!").writeback);
    assert!(!d("ldr", "r0, [r1, #4]").writeback);
    assert!(
        !d("ldm.w", "r0!, {r1, r2}").writeback,
        "only single transfers"
    );
    assert!(d("ldr", "pc, [sp], #4").writes_pc);
    assert_eq!(d("ldrd", "r0, r1, [r2]").class, Class::LoadPair);
    assert_eq!(d("vmla.f32", "s0, s1, s2").class, Class::FpMulAcc);
    assert_eq!(d("vdiv.f32", "s0, s1, s2").class, Class::FpDivSqrt);
    assert_eq!(d("vcvt.f32.s32", "s0, s0").class, Class::FpAlu);
    assert_eq!(d("ittet", "eq").class, Class::It);
    assert_eq!(d("udiv", "r0, r1, r2").class, Class::Div);
    assert_eq!(d("smlabb", "r0, r1, r2, r3").class, Class::Alu);
    assert_eq!(d("umlal", "r0, r1, r2, r3").class, Class::MulLongAcc);
    assert!(decode("frobnicate", "r0").is_none());
}

#[test]
fn cores_parse_and_nest() {
    assert_eq!(Core::parse("cortex-m0+"), Some(Core::M0Plus));
    assert_eq!(Core::parse("M4"), Some(Core::M4));
    assert_eq!(Core::parse("cortex-m7"), Some(Core::M7));
    assert!(Core::M0Plus.runs_on("cortex-m4"));
    assert!(Core::M3.runs_on("cortex-m4"));
    assert!(!Core::M4.runs_on("cortex-m3"));
    for c in Core::ALL {
        assert_eq!(Core::parse(c.name()), Some(c));
    }
}

/// `hot_a` of the committed fixture: `push {r7, lr}; mov r7, sp; cbz r0, out; loop: subs r0,
/// #1; nop; bne loop; out: pop {r7, pc}`, called once with `r0 = n`.
fn hot_a(n: u64, core: Core) -> Estimate {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hot-loops.elf");
    let code = Code::new(&std::fs::read(path).unwrap()).unwrap();
    let mut counts = HashMap::new();
    for (pc, c) in [(0xfee, 1), (0xff0, 1), (0xff2, 1), (0xffa, 1)] {
        counts.insert(pc, c);
    }
    if n > 0 {
        for pc in [0xff4, 0xff6, 0xff8] {
            counts.insert(pc, n);
        }
    }
    let model = at_zero_wait(core);
    estimate(&code, &counts, &[], None, &model)
}

#[test]
fn a_loop_timed_by_hand() {
    // Cortex-M4, n = 10: push 1+2, mov 1, cbz not taken 1, subs 10, nop 10, bne 10 plus 9
    // taken refills of 1, pop {r7, pc} 1+2 and a load-of-PC refill of 3.
    let e = hot_a(10, Core::M4);
    assert_eq!(e.instructions, 34);
    assert_eq!(e.conditional, (11, 9), "cbz never taken, bne taken 9 of 10");
    assert_eq!(e.per_pc[&0xff8], 19);
    assert_eq!(e.per_pc[&0xffa], 6);
    assert_eq!(e.cycles, 3 + 1 + 1 + 10 + 10 + 19 + 6);
    // n = 0: cbz taken once (1 + refill 1), the loop never runs.
    let e = hot_a(0, Core::M4);
    assert_eq!(e.conditional, (1, 1));
    assert_eq!(e.cycles, 3 + 1 + 2 + 6);
    // Cortex-M0+: taken branch 2, pop {.., pc} 3 + N.
    let e = hot_a(10, Core::M0Plus);
    assert_eq!(e.cycles, 3 + 1 + 1 + 10 + 10 + 19 + 5);
    // Twice as many cycles per refill on no core: the M7 approximation charges 1.
    assert!(hot_a(10, Core::M7).cycles <= e.cycles);
    // The block from the loop's head: subs, nop, bne at their mean cycles.
    let e = hot_a(10, Core::M4);
    assert_eq!(e.block_cycles(0xff4, 30), 10 + 10 + 19);
}

#[test]
fn wait_states_cost_refills_or_every_fetch() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hot-loops.elf");
    let code = Code::new(&std::fs::read(path).unwrap()).unwrap();
    let counts: HashMap<u32, u64> = [(0xff4, 10), (0xff6, 10), (0xff8, 10), (0xffa, 1)]
        .into_iter()
        .collect();
    let at = |ws, prefetch| {
        estimate(
            &code,
            &counts,
            &[],
            None,
            &Model {
                core: Core::M4,
                wait_states: ws,
                prefetch,
                ram_code: Vec::new(),
            },
        )
        .cycles
    };
    let zero = at(0, true);
    // With prefetch: 2 more on each of the 10 refills (9 taken bne, the pop).
    assert_eq!(at(2, true), zero + 2 * 10);
    // Without: 2 per 32-bit word fetched, 31 halfword instructions.
    assert_eq!(at(2, false), zero + 31);
}

/// Neighbouring loads and stores, each run once (Arm's table with the rules measured on an
/// STM32F103 and an STM32F407 by jnk0le's pipeline tests).
#[test]
fn loads_and_stores_in_sequence() {
    #[rustfmt::skip]
    let bytes: [u8; 20] = [
        0x08, 0x68,             // 0x00 ldr r0, [r1]
        0x1a, 0x68,             // 0x02 ldr r2, [r3]       after a load: 1
        0x22, 0x60,             // 0x04 str r2, [r4]       after a load 1, before a load +1
        0x35, 0x68,             // 0x06 ldr r5, [r6]       after a store: 2
        0x51, 0xf8, 0x04, 0x7b, // 0x08 ldr.w r7, [r1], #4 writes r1 back: +1
        0x51, 0xf8, 0x04, 0x0b, // 0x0c ldr.w r0, [r1], #4 the same base again: not pipelined
        0x0a, 0x68,             // 0x10 ldr r2, [r1]       a written-back base: +1, not pipelined
        0x4a, 0x60,             // 0x12 str r2, [r1, #4]   after a load: 1
    ];
    let code = Code::thumb(0x1000, &bytes);
    let counts: HashMap<u32, u64> = [0, 2, 4, 6, 8, 0xc, 0x10, 0x12]
        .into_iter()
        .map(|o| (0x1000 + o, 1))
        .collect();
    let run = |core| estimate(&code, &counts, &[], None, &at_zero_wait(core));
    let m4 = run(Core::M4);
    let at = |o: u32| m4.per_pc[&(0x1000 + o)];
    assert_eq!(
        [
            at(0),
            at(2),
            at(4),
            at(6),
            at(8),
            at(0xc),
            at(0x10),
            at(0x12)
        ],
        [2, 1, 2, 2, 2, 3, 3, 1]
    );
    // The M3 never pipelines a load that writes back: 2 + 1.
    let m3 = run(Core::M3);
    assert_eq!(m3.per_pc[&0x1008], 3);
    assert_eq!(m3.cycles, m4.cycles + 1);
    // The M0 pipelines nothing: two cycles each.
    assert_eq!(run(Core::M0).cycles, 16);
}

/// The Cortex-M33's result latencies (measured on an RP2350 by jnk0le's pipeline tests): a
/// loaded register and a shifted operand's result are a cycle late for the next instruction,
/// except as a store's data; an extend's rotation is not a late result.
#[test]
fn cortex_m33_result_latencies() {
    #[rustfmt::skip]
    let bytes: [u8; 22] = [
        0x08, 0x68,             // 0x00 ldr r0, [r1]
        0x42, 0x1c,             // 0x02 adds r2, r0, #1          uses the load: 1 + 1
        0x4b, 0x68,             // 0x04 ldr r3, [r1, #4]
        0x8b, 0x60,             // 0x06 str r3, [r1, #8]         the load as data: 1
        0x85, 0xea, 0x36, 0x24, // 0x08 eor.w r4, r5, r6, ror #8 late result
        0x27, 0x44,             // 0x0c add r7, r4               uses it: 1 + 1
        0x5f, 0xfa, 0x95, 0xf4, // 0x0e uxtb.w r4, r5, ror #8
        0x51, 0xf8, 0x24, 0x40, // 0x12 ldr.w r4, [r1, r4, lsl #2] 1
    ];
    let code = Code::thumb(0x2000, &bytes);
    let pcs = [0, 2, 4, 6, 8, 0xc, 0xe, 0x12];
    let counts: HashMap<u32, u64> = pcs.iter().map(|o| (0x2000 + o, 1)).collect();
    let e = estimate(&code, &counts, &[], None, &at_zero_wait(Core::M33));
    let got: Vec<u64> = pcs.iter().map(|o| e.per_pc[&(0x2000 + o)]).collect();
    assert_eq!(got, [1, 2, 1, 1, 1, 2, 1, 1]);
    // What the latencies read: sources without the destination, a store's data apart.
    let d = |m: &str, o: &str| decode(m, o).unwrap();
    assert_eq!(d("adds", "r2, r0, #1").reads, 1 << 0);
    assert_eq!(d("add", "r7, r4").reads, (1 << 7) | (1 << 4));
    let st = d("str", "r3, [r1, #8]");
    assert_eq!((st.reads, st.store_data), ((1 << 3) | (1 << 1), Some(3)));
    assert!(d("eor.w", "r4, r5, r6, ror #8").late);
    assert!(!d("uxtb.w", "r4, r5, ror #8").late);
    assert!(d("and", "r0, r1, #0x1fc0").late, "a rotated immediate");
    assert!(!d("and", "r0, r1, #0xff00ff").late, "a replicated byte");
    assert_eq!(d("push", "{r4-r7, lr}").reads, 0xf0 | (1 << 14));
}

/// The Cortex-M7 approximation issues independent neighbours together.
#[test]
fn cortex_m7_pairs_neighbours() {
    #[rustfmt::skip]
    let bytes: [u8; 18] = [
        0x01, 0xeb, 0x02, 0x00, // 0x00 add.w r0, r1, r2
        0x04, 0xeb, 0x05, 0x03, // 0x04 add.w r3, r4, r5  independent: with the one before
        0x00, 0xeb, 0x03, 0x06, // 0x08 add.w r6, r0, r3  the one before led no pair, but needs r3
        0x0f, 0x68,             // 0x0c ldr r7, [r1]      with the add
        0x22, 0x68,             // 0x0e ldr r2, [r4]      two loads: alone
        0x2f, 0x60,             // 0x10 str r7, [r5]      a store with the load before
    ];
    let code = Code::thumb(0x3000, &bytes);
    let pcs = [0, 4, 8, 0xc, 0xe, 0x10];
    let counts: HashMap<u32, u64> = pcs.iter().map(|o| (0x3000 + o, 10)).collect();
    let e = estimate(&code, &counts, &[], None, &at_zero_wait(Core::M7));
    let got: Vec<u64> = pcs.iter().map(|o| e.per_pc[&(0x3000 + o)]).collect();
    assert_eq!(got, [10, 0, 10, 0, 10, 0]);
    assert_eq!(e.cycles, 30, "six instructions, three cycles a pass");
}

/// A 32-bit load that straddles a word of code does not pipeline on the M3 and M4 (measured
/// by jnk0le's pipeline tests); an aligned one does.
#[test]
fn unaligned_wide_loads_do_not_pipeline() {
    #[rustfmt::skip]
    let bytes: [u8; 12] = [
        0x08, 0x68,             // 0x0 ldr r0, [r1]
        0xd3, 0xf8, 0x08, 0x20, // 0x2 ldr.w r2, [r3, #8]   after a load, unaligned: 2
        0x2c, 0x68,             // 0x6 ldr r4, [r5]         after a load: 1
        0xd3, 0xf8, 0x0c, 0x60, // 0x8 ldr.w r6, [r3, #12]  after a load, aligned: 1
    ];
    let code = Code::thumb(0x4000, &bytes);
    let pcs = [0, 2, 6, 8];
    let counts: HashMap<u32, u64> = pcs.iter().map(|o| (0x4000 + o, 1)).collect();
    let run = |core| {
        let e = estimate(&code, &counts, &[], None, &at_zero_wait(core));
        pcs.iter()
            .map(|o| e.per_pc[&(0x4000 + o)])
            .collect::<Vec<u64>>()
    };
    assert_eq!(run(Core::M4), [2, 2, 1, 1]);
    assert_eq!(run(Core::M3), [2, 2, 1, 1]);
}

/// Mapping symbols outside code sections are not addresses: GCC puts `$d` in `.debug_frame`,
/// and the committed CoreMark build has two whose values fall inside `core_bench_list`. Read
/// as code addresses they turned the rest of the function into data words.
#[test]
fn debug_sections_mapping_symbols_are_not_code_addresses() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/silicon/coremark-m0plus.elf");
    let code = Code::new(&std::fs::read(path).unwrap()).unwrap();
    let at = |a: u32| code.one(a).unwrap();
    for a in [0x558, 0x578] {
        assert_ne!(at(a).kind, Kind::Data, "{:#x}: {}", a, at(a).text);
    }
}

/// Code the startup copies to RAM (run address other than load address) is found from the
/// ELF's program headers, and waits no flash wait states even below 0x2000_0000.
#[test]
fn code_copied_to_ram_waits_no_flash() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/ramfunc/ramfunc.elf");
    let elf = std::fs::read(path).unwrap();
    let ram = crate::image::elf::copied_code(&elf);
    let at = |name: &str| crate::image::elf::symbol_address(&elf, name).unwrap() as u32 & !1;
    let (flash_fn, ram_fn) = (at("in_flash"), at("in_ram"));
    assert!(ram_fn < 0x2000_0000, "{ram_fn:#x}: in the code region");
    let inside = |pc: u32| ram.iter().any(|&(a, b)| (a..b).contains(&pc));
    assert!(inside(ram_fn) && !inside(flash_fn), "{ram:?}");
    let model = Model {
        core: Core::M3,
        wait_states: 2,
        prefetch: false,
        ram_code: ram,
    };
    assert!(model.in_flash(flash_fn) && !model.in_flash(ram_fn));
    assert!(model.describe().contains("bytes of code run from RAM"));
}

/// A handler entered ten times, four of them tail-chained or late: those four cost a
/// tail-chain (6) instead of a return and an entry (10 + 12 on a Cortex-M4); without the
/// record every entry is charged in full, and the estimate says so.
#[test]
fn chained_entries_cost_a_tail_chain() {
    let code = Code::thumb(0x100, &[0x70, 0x47]); // bx lr
    let counts: HashMap<u32, u64> = [(0x100, 10)].into_iter().collect();
    let model = at_zero_wait(Core::M4);
    let spared: HashMap<u32, u64> = [(0x100, 4)].into_iter().collect();
    let full = estimate(&code, &counts, &[0x101], None, &model);
    let chained = estimate(&code, &counts, &[0x101], Some(&spared), &model);
    assert_eq!(full.exceptions, 10);
    assert_eq!(full.chained, None);
    assert_eq!(chained.chained, Some(4));
    assert_eq!(full.cycles - chained.cycles, 4 * (12 + 10 - 6));
    assert!(
        full.caveats(&model)
            .iter()
            .any(|c| c.contains("tail-chained"))
    );
    assert!(
        !chained
            .caveats(&model)
            .iter()
            .any(|c| c.contains("tail-chained"))
    );
    // No more spared than entered.
    let too_many: HashMap<u32, u64> = [(0x100, 40)].into_iter().collect();
    let capped = estimate(&code, &counts, &[0x101], Some(&too_many), &model);
    assert_eq!(full.cycles - capped.cycles, 10 * 16);
}
