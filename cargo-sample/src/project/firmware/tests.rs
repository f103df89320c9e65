use super::*;

#[test]
fn link_errors_with_a_known_cause_get_their_fix() {
    let lld = "error: linking with `rust-lld` failed: exit status: 1\n  = note: rust-lld: \
               error: undefined symbol: __stext\n          >>> referenced by dump.rs";
    let hint = link_hint(lld).unwrap();
    assert!(
        hint.contains("__stext = .;") && hint.contains("PROVIDE(__etext"),
        "{hint}"
    );
    let gnu = "undefined reference to `__etext'";
    assert!(link_hint(gnu).is_some_and(|h| h.contains("linker script")));
    assert!(
        link_hint("rust-lld: error: duplicate symbol: SysTick")
            .is_some_and(|h| h.contains(DUPLICATE_SYSTICK))
    );
    assert_eq!(link_hint("error[E0425]: cannot find value `x`"), None);
}
