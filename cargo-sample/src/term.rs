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
