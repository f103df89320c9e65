use super::ops::{Class, decode};
use super::*;

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
