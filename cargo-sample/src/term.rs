//! Cargo-style status lines on stderr. stdout carries only the report.

use anstream::ColorChoice;

/// When to colour the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColorWhen {
    /// Colour a stream that is a terminal (and `NO_COLOR` is unset).
    Auto,
    /// Always colour standard output and error (never a file written with `-o`).
    Always,
    Never,
}

/// Decide once how colour is chosen: `--color`, then `CARGO_TERM_COLOR`, then per stream
/// (`NO_COLOR`, `CLICOLOR_FORCE`, whether the stream is a terminal). Each stream decides for
/// itself: a report piped to a file is plain while the status lines on a terminal are coloured.
pub fn init_color(choice: Option<ColorWhen>) {
    let from_env = || match std::env::var("CARGO_TERM_COLOR").ok().as_deref() {
        Some("always") => Some(ColorWhen::Always),
        Some("never") => Some(ColorWhen::Never),
        _ => None,
    };
    let c = match choice.or_else(from_env) {
        Some(ColorWhen::Always) => ColorChoice::Always,
        Some(ColorWhen::Never) => ColorChoice::Never,
        Some(ColorWhen::Auto) | None => ColorChoice::Auto,
    };
    c.write_global();
}

/// Whether standard error gets colour.
pub fn color() -> bool {
    anstream::AutoStream::choice(&std::io::stderr()) != ColorChoice::Never
}

/// Paint `s` with an SGR code. The codes are taken out again on the way to a stream that
/// should not have them (see [`init_color`]) and from files.
pub fn paint(code: &str, s: &str) -> String {
    if ColorChoice::global() == ColorChoice::Never {
        return s.to_owned();
    }
    format!("\x1b[{code}m{s}\x1b[0m")
}

/// `s` without escape codes (for files).
pub fn plain(s: &str) -> String {
    anstream::adapter::strip_str(s).to_string()
}

/// Print a right-aligned green verb and a message, like cargo's "   Compiling".
pub fn status(verb: &str, msg: impl std::fmt::Display) {
    anstream::eprintln!("{} {msg}", paint("1;32", &format!("{verb:>12}")));
}

/// Print a warning.
pub fn warn(msg: impl std::fmt::Display) {
    anstream::eprintln!("{}: {msg}", paint("1;33", "warning"));
}

/// Print a note.
pub fn note(msg: impl std::fmt::Display) {
    anstream::eprintln!("{}: {msg}", paint("1;36", "note"));
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

/// A line of the firmware's output on standard error, above a progress bar when one is drawn
/// (a hidden bar would swallow it).
pub fn line_above(bar: &indicatif::ProgressBar, line: &str) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// A spinner on standard error with a message and the time elapsed (drawn only on a
/// terminal).
pub fn spinner(msg: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new_spinner().with_style(
        indicatif::ProgressStyle::with_template("{spinner:.green} {msg} {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.set_message(msg.to_owned());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
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
