//! `cargo sample diff`: two saved runs compared per function.

use std::path::Path;

use anyhow::Result;

use super::saved::find_run;
use crate::report::load::load_report;
use crate::report::{self};
use crate::runs::{self};

/// `cargo sample diff`.
pub fn diff(args: &crate::cli::DiffArgs) -> Result<()> {
    let a = find_run(args.runs_dir.as_deref(), &args.before)?;
    let b = find_run(args.runs_dir.as_deref(), &args.after)?;
    let ra = load_report(&a, report::Options::default())?;
    let rb = load_report(&b, report::Options::default())?;
    let code_a = runs::elf_of(&a)?.1;
    let code_b = runs::elf_of(&b)?.1;
    let name = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let d = report::diff::compare(&ra, &rb, (&name(&a), &name(&b)), code_a != code_b);
    match args.format {
        crate::cli::DiffFormat::Json => {
            anstream::println!("{}", serde_json::to_string_pretty(&d)?)
        }
        crate::cli::DiffFormat::Text => anstream::print!("{}", report::diff::text(&d, args.top)),
        crate::cli::DiffFormat::Svg => {
            use std::io::Write;
            let svg = report::formats::differential_svg(&ra, &rb, (&name(&a), &name(&b)))?;
            std::io::stdout().write_all(&svg)?;
        }
    }
    Ok(())
}
