//! Cargo-style status lines on stderr. stdout carries only the report.

use std::io::IsTerminal;
use std::sync::OnceLock;

static COLOR: OnceLock<bool> = OnceLock::new();

/// Decide once whether stderr/stdout get colour: `--color`, then `CARGO_TERM_COLOR`, then
/// `NO_COLOR`, then whether the stream is a terminal.
pub fn init_color(choice: Option<&str>) {
    let env = std::env::var("CARGO_TERM_COLOR").ok();
    let choice = choice.map(str::to_owned).or(env);
    let on = match choice.as_deref() {
        Some("always") => true,
        Some("never") => false,
        _ => std::env::var_os("NO_COLOR").is_none() && std::io::stderr().is_terminal(),
    };
    let _ = COLOR.set(on);
}

/// Whether colour is on.
pub fn color() -> bool {
    *COLOR.get().unwrap_or(&false)
}

/// Paint `s` with an SGR code when colour is on.
pub fn paint(code: &str, s: &str) -> String {
    if color() {
        format!("\x1b[{code}m{s}\x1b[0m")
    } else {
        s.to_owned()
    }
}

/// Print a right-aligned green verb and a message, like cargo's "   Compiling".
pub fn status(verb: &str, msg: impl std::fmt::Display) {
    eprintln!("{} {msg}", paint("1;32", &format!("{verb:>12}")));
}

/// Print a warning.
pub fn warn(msg: impl std::fmt::Display) {
    eprintln!("{}: {msg}", paint("1;33", "warning"));
}

/// Print a note.
pub fn note(msg: impl std::fmt::Display) {
    eprintln!("{}: {msg}", paint("1;36", "note"));
}

/// A count in the units people type: `300M`, `1.5G`, `20k`, `999`.
pub fn count(n: u64) -> String {
    for (div, suffix) in [(1_000_000_000u64, "G"), (1_000_000, "M"), (1_000, "k")] {
        if n >= div {
            let v = format!("{:.3}", n as f64 / div as f64);
            return format!("{}{suffix}", v.trim_end_matches('0').trim_end_matches('.'));
        }
    }
    n.to_string()
}

/// `1 interrupt`, `2 interrupts`.
pub fn plural(n: u64, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_read_like_the_options() {
        assert_eq!(super::count(300_000_000), "300M");
        assert_eq!(super::count(1_500_000_000), "1.5G");
        assert_eq!(super::count(2_127_461), "2.127M");
        assert_eq!(super::count(999), "999");
        assert_eq!(super::plural(1, "interrupt"), "1 interrupt");
        assert_eq!(super::plural(3, "interrupt"), "3 interrupts");
    }
}
