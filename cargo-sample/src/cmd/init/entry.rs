//! Where a firmware starts, read with a Rust parser, and the `start()` call put there by editing
//! the text at that spot only (formatting and comments stay as they are).
//!
//! The shapes real crates have:
//! - cortex-m-rt: `#[entry]` (or `#[cortex_m_rt::entry]`) on a function of any name;
//! - RTIC v2: `#[init]` inside `#[rtic::app(...)] mod app`, which runs with interrupts masked, so
//!   the sampler's first interrupt comes when RTIC enables them;
//! - Embassy: `#[embassy_executor::main] async fn main(spawner: Spawner)`;
//! - otherwise a top-level `fn main`;
//! - or the function `--entry` names (an `extern "C"` entry that the image's assembly calls).

use syn::visit::Visit;

/// The kind of entry point found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    CortexMRt,
    RticInit,
    Embassy,
    PlainMain,
    /// The function named on the command line.
    Named,
}

impl Shape {
    pub fn describe(self) -> &'static str {
        match self {
            Shape::CortexMRt => "the `#[entry]` function",
            Shape::RticInit => "RTIC's `#[init]` (interrupts are enabled after it)",
            Shape::Embassy => "the `#[embassy_executor::main]` function",
            Shape::PlainMain => "`fn main`",
            Shape::Named => "the function named with `--entry`",
        }
    }
}

/// The place to insert the call: after the opening brace of a function's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub shape: Shape,
    pub function: String,
    /// 1-based line of the function's name.
    pub line: usize,
    /// Byte offset just after the body's `{`.
    pub after_brace: usize,
    /// Indentation of the body's statements.
    pub indent: String,
}

/// What reading a source file found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The file already calls sampler-rt's start (at this 1-based line).
    AlreadyStarts(usize),
    One(Entry),
    /// Several candidates of the same kind: the user must choose.
    Ambiguous(Vec<Entry>),
    None,
}

fn last_segment(path: &syn::Path) -> String {
    path.segments
        .last()
        .map(|s| s.ident.to_string())
        .unwrap_or_default()
}

fn segments(path: &syn::Path) -> Vec<String> {
    path.segments.iter().map(|s| s.ident.to_string()).collect()
}

fn path_text(path: &syn::Path) -> String {
    segments(path).join("::")
}

fn has_attr(attrs: &[syn::Attribute], pred: impl Fn(&syn::Path) -> bool) -> bool {
    attrs.iter().any(|a| pred(a.path()))
}

/// `#[cfg(test)]` (and `#[cfg(not(target_os = "none"))]`-like host-only items are not ruled
/// out: firmware has none that carry an entry attribute).
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().trim() == "test")
    })
}

struct Finder<'s> {
    src: &'s str,
    line_starts: Vec<usize>,
    entries: Vec<Entry>,
    starts_at: Option<usize>,
    /// Inside an RTIC app module.
    in_rtic_app: bool,
    /// `--entry`: the function to take by name.
    named: Option<&'s str>,
    /// Functions with a foreign ABI and an unmangled name (what assembly can call), with
    /// their lines: the likely entry when no other is found.
    foreign: Vec<(String, usize)>,
}

impl Finder<'_> {
    fn offset(&self, lc: proc_macro2::LineColumn) -> usize {
        let line_start = self.line_starts[lc.line - 1];
        let line = &self.src[line_start..];
        line.char_indices()
            .nth(lc.column)
            .map(|(i, _)| line_start + i)
            .unwrap_or(self.src.len())
    }

    fn entry(&self, shape: Shape, sig: &syn::Signature, block: &syn::Block) -> Entry {
        let open = block.brace_token.span.open().start();
        let after_brace = self.offset(open) + 1;
        let first_line = block
            .stmts
            .first()
            .map(|s| syn::spanned::Spanned::span(s).start().line)
            .filter(|&l| l > open.line);
        let indent = match first_line {
            Some(l) => {
                let line = &self.src[self.line_starts[l - 1]..];
                line.chars()
                    .take_while(|c| *c == ' ' || *c == '\t')
                    .collect()
            }
            None => {
                let lc = sig.fn_token.span.start();
                let line = &self.src[self.line_starts[lc.line - 1]..];
                let base: String = line
                    .chars()
                    .take_while(|c| *c == ' ' || *c == '\t')
                    .collect();
                format!("{base}    ")
            }
        };
        Entry {
            shape,
            function: sig.ident.to_string(),
            line: sig.ident.span().start().line,
            after_brace,
            indent,
        }
    }
}

impl<'ast> Visit<'ast> for Finder<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if is_test_only(&m.attrs) {
            return;
        }
        let rtic = has_attr(&m.attrs, |p| {
            let t = path_text(p);
            t == "rtic::app" || t == "app" || t.ends_with("::app")
        });
        let was = self.in_rtic_app;
        self.in_rtic_app |= rtic;
        syn::visit::visit_item_mod(self, m);
        self.in_rtic_app = was;
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if is_test_only(&f.attrs) {
            return;
        }
        let unmangled = has_attr(&f.attrs, |p| p.is_ident("no_mangle"))
            || f.attrs.iter().any(|a| {
                matches!(&a.meta, syn::Meta::List(l) if l.path.is_ident("unsafe")
                    && l.tokens.to_string().contains("no_mangle"))
            });
        if f.sig.abi.is_some() && unmangled {
            self.foreign
                .push((f.sig.ident.to_string(), f.sig.ident.span().start().line));
        }
        let shape = if self.named.is_some_and(|n| f.sig.ident == n) {
            Some(Shape::Named)
        } else if self.named.is_some() {
            None
        } else if self.in_rtic_app && has_attr(&f.attrs, |p| p.is_ident("init")) {
            Some(Shape::RticInit)
        } else if has_attr(&f.attrs, |p| {
            let t = path_text(p);
            t == "entry" || t == "cortex_m_rt::entry" || t == "rt::entry"
        }) {
            Some(Shape::CortexMRt)
        } else if has_attr(&f.attrs, |p| {
            let t = path_text(p);
            last_segment(p) == "main" && (t.starts_with("embassy") || t.contains("executor"))
        }) {
            Some(Shape::Embassy)
        } else if !self.in_rtic_app && f.sig.ident == "main" {
            Some(Shape::PlainMain)
        } else {
            None
        };
        if let Some(shape) = shape {
            let e = self.entry(shape, &f.sig, &f.block);
            self.entries.push(e);
        }
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
        let segs = segments(&p.path);
        if segs.first().is_some_and(|s| s == "sampler_rt")
            && segs
                .last()
                .is_some_and(|s| s == "start" || s == "start_keeping_vectors")
            && self.starts_at.is_none()
        {
            self.starts_at = Some(p.path.segments[0].ident.span().start().line);
        }
        syn::visit::visit_expr_path(self, p);
    }
}

/// Find the entry point of `src`. `Err` carries the parser's message.
pub fn find(src: &str) -> Result<Found, String> {
    find_named(src, None)
}

/// [`find`], or with `named` the function of that name only.
pub fn find_named(src: &str, named: Option<&str>) -> Result<Found, String> {
    let f = scan(src, named).map_err(|e| {
        let lc = e.span().start();
        format!("line {}: {e}", lc.line)
    })?;
    if let Some(line) = f.starts_at {
        return Ok(Found::AlreadyStarts(line));
    }
    // The most specific shape wins: an RTIC init or an attributed entry over a plain `main`.
    for shape in [
        Shape::Named,
        Shape::RticInit,
        Shape::CortexMRt,
        Shape::Embassy,
        Shape::PlainMain,
    ] {
        let mut of: Vec<Entry> = f
            .entries
            .iter()
            .filter(|e| e.shape == shape)
            .cloned()
            .collect();
        match of.len() {
            0 => continue,
            1 => return Ok(Found::One(of.remove(0))),
            _ => return Ok(Found::Ambiguous(of)),
        }
    }
    Ok(Found::None)
}

/// Functions of `src` with a foreign ABI and an unmangled name (`#[no_mangle] extern "C" fn`),
/// with their 1-based lines: what an image's own assembly calls as its entry.
pub fn foreign_entries(src: &str) -> Vec<(String, usize)> {
    scan(src, None).map(|f| f.foreign).unwrap_or_default()
}

/// Parse `src` and read it with a [`Finder`] (`named`: `--entry`).
fn scan<'s>(src: &'s str, named: Option<&'s str>) -> syn::Result<Finder<'s>> {
    let file = syn::parse_file(src)?;
    let mut line_starts = vec![0];
    line_starts.extend(src.match_indices('\n').map(|(i, _)| i + 1));
    let mut f = Finder {
        src,
        line_starts,
        entries: Vec::new(),
        starts_at: None,
        in_rtic_app: false,
        named,
        foreign: Vec::new(),
    };
    f.visit_file(&file);
    Ok(f)
}

/// The lines inserted, at `indent`.
pub fn call_lines(feature: &str, indent: &str) -> String {
    format!("{indent}#[cfg(feature = \"{feature}\")]\n{indent}sampler_rt::start();\n")
}

/// `src` with the start call inserted at `entry`, checked to parse and to call start inside
/// the same function.
pub fn insert(src: &str, entry: &Entry, feature: &str) -> Result<String, String> {
    let at = entry.after_brace;
    let rest = &src[at..];
    // The brace ends its line: the call goes on the next lines. Otherwise (a one-line body)
    // the rest of the line moves after the call.
    let (head, tail) = match rest.find('\n') {
        Some(n) if rest[..n].trim().is_empty() => (&src[..at + n + 1], &src[at + n + 1..]),
        _ => (&src[..at], rest),
    };
    let mut out = String::with_capacity(src.len() + 80);
    out.push_str(head);
    if !head.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&call_lines(feature, &entry.indent));
    if !head.ends_with('\n') {
        // What followed the brace on its line continues on a line of its own.
        let base: String = entry.indent.chars().skip(4).collect();
        let t = tail.trim_start_matches([' ', '\t']);
        if t.starts_with('}') {
            out.push_str(&base);
        } else {
            out.push_str(&entry.indent);
        }
        out.push_str(t);
    } else {
        out.push_str(tail);
    }
    match find(&out) {
        Ok(Found::AlreadyStarts(_)) => Ok(out),
        Ok(_) => Err("the edited file does not call `sampler_rt::start()`".into()),
        Err(e) => Err(format!("the edited file does not parse ({e})")),
    }
}

/// Statements that end the program through semihosting (`debug::exit(..)`, as
/// cortex-m-quickstart's and RTIC's examples do), each the first thing on its line: 1-based
/// line and indentation. Those already preceded by a sampler-rt call are left out.
struct Exits<'s> {
    lines: Vec<&'s str>,
    found: Vec<(usize, String)>,
}

impl<'ast> Visit<'ast> for Exits<'_> {
    fn visit_stmt(&mut self, st: &'ast syn::Stmt) {
        let call = match st {
            syn::Stmt::Expr(syn::Expr::Call(c), _) => Some(c),
            _ => None,
        };
        if let Some(c) = call
            && let syn::Expr::Path(p) = &*c.func
        {
            let segs = segments(&p.path);
            let n = segs.len();
            if n >= 2 && segs[n - 2] == "debug" && segs[n - 1] == "exit" {
                let lc = syn::spanned::Spanned::span(st).start();
                let line = self.lines.get(lc.line - 1).copied().unwrap_or("");
                let indent: String = line.chars().take(lc.column).collect();
                let before = self.lines[..lc.line - 1]
                    .iter()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .copied()
                    .unwrap_or("");
                if indent.chars().all(|c| c == ' ' || c == '\t') && !before.contains("sampler_rt::")
                {
                    self.found.push((lc.line, indent));
                }
            }
        }
        syn::visit::visit_stmt(self, st);
    }
}

/// `src` with `sampler_rt::flush()` (behind the feature) before every statement that ends the
/// program through semihosting: such an end takes the samples still in the ring with it.
/// Returns the text and how many calls were added; `src` unchanged when it does not parse.
pub fn flush_before_exits(src: &str, feature: &str) -> (String, usize) {
    let Ok(file) = syn::parse_file(src) else {
        return (src.to_owned(), 0);
    };
    let mut e = Exits {
        lines: src.split('\n').collect(),
        found: Vec::new(),
    };
    e.visit_file(&file);
    if e.found.is_empty() {
        return (src.to_owned(), 0);
    }
    let mut out = String::with_capacity(src.len() + 64 * e.found.len());
    let mut next = e.found.iter().peekable();
    for (i, line) in e.lines.iter().enumerate() {
        if let Some((_, indent)) = next.next_if(|(l, _)| *l == i + 1) {
            out.push_str(&format!(
                "{indent}#[cfg(feature = \"{feature}\")]\n{indent}sampler_rt::flush();\n"
            ));
        }
        out.push_str(line);
        if i + 1 < e.lines.len() {
            out.push('\n');
        }
    }
    let added = e.found.len();
    match syn::parse_file(&out) {
        Ok(_) => (out, added),
        Err(_) => (src.to_owned(), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(src: &str) -> Entry {
        match find(src).unwrap() {
            Found::One(e) => e,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_entry_of_any_name_after_a_doc_comment_that_mentions_main() {
        let src = "//! Start with `fn main() {}` in a doc test:\n//! ```\n//! fn main() {}\n//! ```\n#![no_std]\n#![no_main]\nuse cortex_m_rt::entry;\n\n/// Not `fn main(` at all.\n#[entry]\nfn start() -> ! {\n    let x = 1;\n    loop {}\n}\n";
        let e = one(src);
        assert_eq!(e.shape, Shape::CortexMRt);
        assert_eq!(e.function, "start");
        assert_eq!(e.line, 11);
        let out = insert(src, &e, "sample").unwrap();
        assert!(out.contains("fn start() -> ! {\n    #[cfg(feature = \"sample\")]\n    sampler_rt::start();\n    let x = 1;"), "{out}");
        assert_eq!(find(&out).unwrap(), Found::AlreadyStarts(13));
    }

    #[test]
    fn a_one_line_body_stays_valid() {
        let src = "#[cortex_m_rt::entry]\nfn main() -> ! { loop {} }\n";
        let e = one(src);
        let out = insert(src, &e, "sample").unwrap();
        assert_eq!(
            out,
            "#[cortex_m_rt::entry]\nfn main() -> ! {\n    #[cfg(feature = \"sample\")]\n    sampler_rt::start();\n    loop {} }\n"
        );
    }

    #[test]
    fn rtic_init_inside_the_app_module() {
        let src = "#![no_std]\n#![no_main]\n#[rtic::app(device = lm3s6965, dispatchers = [SSI0])]\nmod app {\n    #[shared]\n    struct Shared {}\n    #[local]\n    struct Local {}\n\n    #[init]\n    fn init(_: init::Context) -> (Shared, Local) {\n        (Shared {}, Local {})\n    }\n\n    #[idle]\n    fn idle(_: idle::Context) -> ! {\n        loop {}\n    }\n}\n";
        let e = one(src);
        assert_eq!(e.shape, Shape::RticInit);
        assert_eq!(e.indent, "        ");
        let out = insert(src, &e, "sample").unwrap();
        assert!(out.contains("fn init(_: init::Context) -> (Shared, Local) {\n        #[cfg(feature = \"sample\")]\n        sampler_rt::start();\n        (Shared {}, Local {})"), "{out}");
    }

    #[test]
    fn embassy_main() {
        let src = "#[embassy_executor::main]\nasync fn main(spawner: Spawner) {\n\tspawner.spawn(t()).unwrap();\n}\n";
        let e = one(src);
        assert_eq!(e.shape, Shape::Embassy);
        assert_eq!(e.indent, "\t");
    }

    #[test]
    fn undecidable_and_done_files() {
        let two = "#[entry]\nfn a() -> ! { loop {} }\n#[entry]\nfn b() -> ! { loop {} }\n";
        assert!(matches!(find(two).unwrap(), Found::Ambiguous(v) if v.len() == 2));
        assert_eq!(find("fn helper() {}\n").unwrap(), Found::None);
        assert!(find("fn broken( {").is_err());
        let done = "#[entry]\nfn main() -> ! {\n    #[cfg(feature = \"sample\")]\n    sampler_rt::start();\n    loop {}\n}\n";
        assert_eq!(find(done).unwrap(), Found::AlreadyStarts(4));
        // A test module's `main` is not the firmware's.
        let t = "#[cfg(test)]\nmod tests {\n    fn main() {}\n}\n";
        assert_eq!(find(t).unwrap(), Found::None);
    }

    #[test]
    fn semihosting_exits_get_a_flush_before_them_once() {
        let src = "#[entry]\nfn main() -> ! {\n    work();\n    hprintln!(\"done\");\n    debug::exit(debug::EXIT_SUCCESS); // leave QEMU\n    loop {}\n}\n\n#[panic_handler]\nfn panic(_: &PanicInfo) -> ! {\n\tcortex_m_semihosting::debug::exit(debug::EXIT_FAILURE);\n\tloop {}\n}\n\nfn f(x: u32) { if x > 3 { debug::exit(debug::EXIT_FAILURE); } }\n";
        let (out, n) = flush_before_exits(src, "sample");
        assert_eq!(n, 2, "{out}");
        assert!(out.contains("    hprintln!(\"done\");\n    #[cfg(feature = \"sample\")]\n    sampler_rt::flush();\n    debug::exit(debug::EXIT_SUCCESS); // leave QEMU\n"), "{out}");
        assert!(out.contains("\t#[cfg(feature = \"sample\")]\n\tsampler_rt::flush();\n\tcortex_m_semihosting::debug::exit"), "{out}");
        // A call that shares its line with other code is left alone; a second run adds nothing.
        assert!(out.contains("fn f(x: u32) { if x > 3 { debug::exit(debug::EXIT_FAILURE); } }\n"));
        assert_eq!(flush_before_exits(&out, "sample"), (out.clone(), 0));
        // Nothing to do, or a file that does not parse: unchanged.
        assert_eq!(flush_before_exits("fn main() {}\n", "sample").1, 0);
        assert_eq!(flush_before_exits("fn broken( {", "sample").1, 0);
    }

    #[test]
    fn an_extern_c_entry_is_named_and_taken_by_name() {
        let src = "core::arch::global_asm!(\"b kmain\");\n\n#[unsafe(no_mangle)]\npub extern \"C\" fn kmain() -> ! {\n    loop {}\n}\n\n#[no_mangle]\nextern \"C\" fn irq() {}\n\nextern \"C\" fn hidden() {}\n";
        assert_eq!(find(src).unwrap(), Found::None);
        assert_eq!(
            foreign_entries(src),
            vec![("kmain".to_owned(), 4), ("irq".to_owned(), 9)]
        );
        let Found::One(e) = find_named(src, Some("kmain")).unwrap() else {
            panic!("kmain not found by name");
        };
        assert_eq!((e.shape, e.line), (Shape::Named, 4));
        let out = insert(src, &e, "sample").unwrap();
        assert!(out.contains("fn kmain() -> ! {\n    #[cfg(feature = \"sample\")]\n    sampler_rt::start();\n    loop {}"), "{out}");
        // A name wins over the shapes init knows, and a missing one finds nothing.
        let both = "#[entry]\nfn main() -> ! { loop {} }\nfn boot() { }\n";
        let Found::One(e) = find_named(both, Some("boot")).unwrap() else {
            panic!()
        };
        assert_eq!(e.function, "boot");
        assert_eq!(find_named(both, Some("nowhere")).unwrap(), Found::None);
    }

    #[test]
    fn an_empty_body_gets_the_functions_indent_plus_four() {
        let src = "mod m {\n    #[entry]\n    fn main() -> ! {\n    }\n}\n";
        let e = one(src);
        assert_eq!(e.indent, "        ");
        let out = insert(src, &e, "s").unwrap();
        assert!(out.contains("    fn main() -> ! {\n        #[cfg(feature = \"s\")]\n        sampler_rt::start();\n    }"), "{out}");
    }
}
