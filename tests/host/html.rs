//! The HTML report in a real browser: Debian's Chromium, driven through ChromeDriver's
//! WebDriver protocol (plain HTTP and JSON, spoken here). The page must render the run's
//! tables as the JSON report has them, log no console error, zoom on a click and highlight
//! what a search matches with the share the report gives. Screenshots are kept in
//! `target/html-report/`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

use crate::support::*;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// ChromeDriver with one headless Chromium session.
struct Browser {
    driver: Child,
    port: u16,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// `None` when the suite is told to skip the browser; a missing browser otherwise fails
    /// with the command that installs it.
    fn start() -> Option<Browser> {
        if std::env::var_os("CARGO_SAMPLE_SKIP_BROWSER").is_some() {
            return None;
        }
        assert!(
            Path::new(CHROMIUM).is_file() && Path::new(CHROMEDRIVER).is_file(),
            "Chromium and ChromeDriver are missing: run `tests/setup.sh --with-chromium` (or set \
             CARGO_SAMPLE_SKIP_BROWSER=1)"
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting chromedriver");
        let profile = tempfile::tempdir().unwrap();
        let mut b = Browser {
            driver,
            port,
            session: String::new(),
            _profile: profile,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while b.call("GET", "/status", None).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not answer");
            std::thread::sleep(Duration::from_millis(100));
        }
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1300,1000",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([format!("--user-data-dir={}", b._profile.path().display())])
        .collect::<Vec<_>>();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let v = b
            .call("POST", "/session", Some(caps))
            .expect("a browser session");
        b.session = v["sessionId"].as_str().unwrap().to_owned();
        Some(b)
    }

    /// One WebDriver command; its `value`.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .map_err(|e| e.to_string())?;
        let mut r = BufReader::new(s);
        let mut status = String::new();
        r.read_line(&mut status).map_err(|e| e.to_string())?;
        let mut length = None;
        loop {
            let mut h = String::new();
            r.read_line(&mut h).map_err(|e| e.to_string())?;
            if h.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse::<usize>().ok();
            }
        }
        let mut text = Vec::new();
        match length {
            Some(n) => {
                text.resize(n, 0);
                r.read_exact(&mut text).map_err(|e| e.to_string())?;
            }
            None => {
                r.read_to_end(&mut text).map_err(|e| e.to_string())?;
            }
        }
        let v: Value = serde_json::from_slice(&text).map_err(|e| e.to_string())?;
        if !status.contains(" 200 ") {
            return Err(format!("{method} {path}: {status} {v}"));
        }
        Ok(v["value"].clone())
    }

    fn cmd(&self, method: &str, what: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}{what}", self.session);
        self.call(method, &path, body)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn open(&self, page: &Path) {
        let url = format!("file://{}", page.canonicalize().unwrap().display());
        self.cmd("POST", "/url", Some(json!({ "url": url })));
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.js("return document.body && document.body.dataset.ready || null") != "1" {
            assert!(
                Instant::now() < deadline,
                "the page never finished drawing; console: {:?}",
                self.console()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Open a document that is not the report's page (an SVG): loaded, its scripts run.
    fn open_document(&self, doc: &Path) {
        let url = format!("file://{}", doc.canonicalize().unwrap().display());
        self.cmd("POST", "/url", Some(json!({ "url": url })));
        self.wait_for("document.readyState === 'complete'");
    }

    fn js(&self, script: &str) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({ "script": script, "args": [] })),
        )
    }

    /// Wait until `condition` (a JavaScript expression) holds: events such as a `<details>`
    /// element's `toggle` are delivered after the click that caused them.
    fn wait_for(&self, condition: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.js(&format!("return !!({condition})")) != true {
            assert!(Instant::now() < deadline, "never true: {condition}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn element(&self, css: &str) -> String {
        let v = self.cmd(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        );
        v.as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {css}"))
            .to_owned()
    }

    fn click(&self, css: &str) {
        let e = self.element(css);
        self.cmd("POST", &format!("/element/{e}/click"), Some(json!({})));
    }

    fn type_into(&self, css: &str, text: &str) {
        let e = self.element(css);
        self.cmd(
            "POST",
            &format!("/element/{e}/value"),
            Some(json!({ "text": text })),
        );
    }

    /// The browser's console since the last call: `(level, message)`.
    fn console(&self) -> Vec<(String, String)> {
        self.cmd("POST", "/se/log", Some(json!({"type": "browser"})))
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|e| {
                (
                    e["level"].as_str().unwrap_or("").to_owned(),
                    e["message"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    }

    fn screenshot(&self, name: &str) -> PathBuf {
        self.save_png(self.cmd("GET", "/screenshot", None), name)
    }

    /// A screenshot of one element (the SVG's root: the graph without the window around it).
    fn screenshot_of(&self, css: &str, name: &str) -> PathBuf {
        let e = self.element(css);
        self.save_png(
            self.cmd("GET", &format!("/element/{e}/screenshot"), None),
            name,
        )
    }

    fn save_png(&self, png: Value, name: &str) -> PathBuf {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap())
            .unwrap();
        assert!(bytes.starts_with(b"\x89PNG"));
        let dir = crate::support::artifacts_dir().join("html-report");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.call("DELETE", &format!("/session/{}", self.session), None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// `cargo sample report RUN ARGS`, asserted to succeed; its stderr.
fn report(run: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-sample"))
        .args(["sample", "report", run.to_str().unwrap()])
        .args(args)
        .current_dir(scenarios())
        .env("NO_COLOR", "1")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    err
}

fn percent_text(p: f64) -> String {
    format!("{p:.2} %")
}

#[test]
fn the_html_report_renders_zooms_and_searches_in_chromium() {
    let Some(b) = Browser::start() else { return };
    let (r, dir) = profile_in(
        "call-graph",
        &["--stacks", "-n", "3000", "--truth", "--callers", "leaf"],
    );
    let page = dir.join("test-report.html");
    report(
        &dir,
        &[
            "--format",
            "html",
            "--callers",
            "leaf",
            "-o",
            page.to_str().unwrap(),
        ],
        &[],
    );
    b.open(&page);
    b.screenshot("call-graph.png");

    // The function table: every row the JSON report has, each with its share and exact share.
    let rows = b.js(
        "return [...document.querySelectorAll('#t-functions tbody tr')].map(tr => \
         [...tr.children].map(td => td.firstChild ? td.firstChild.textContent.trim() : ''))",
    );
    let rows = rows.as_array().unwrap();
    let json_rows = r["functions"].as_array().unwrap();
    assert_eq!(rows.len(), json_rows.len().min(100));
    for row in json_rows.iter().take(100) {
        let name = row["name"].as_str().unwrap();
        let shown = rows
            .iter()
            .find(|cells| cells.as_array().unwrap().last().unwrap() == name)
            .unwrap_or_else(|| panic!("no row for {name}"));
        let cells = shown.as_array().unwrap();
        assert_eq!(cells[0], percent_text(row["percent"].as_f64().unwrap()));
        assert_eq!(
            cells[1],
            with_commas(row["samples"].as_u64().unwrap()).as_str()
        );
        let exact = percent_text(row["exact_percent"].as_f64().unwrap());
        assert!(cells.iter().any(|c| c == &exact), "{name}: {cells:?}");
    }
    // The callers of leaf, as the report has them.
    let callers = b.js(
        "return [...document.querySelectorAll('#t-callers tbody tr td.name')].map(td => td.textContent)",
    );
    let mut shown: Vec<String> = callers
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let mut expected: Vec<String> = r["callers"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    shown.sort();
    expected.sort();
    assert_eq!(shown, expected);

    // A click on a frame zooms into it: it spans the graph, and what is not under it is gone.
    b.click("#flame .frame[data-name='left']");
    let zoomed = b.js(
        "const f = document.querySelector(\"#flame .frame[data-name='left']\"); \
         return [f.getBoundingClientRect().width, document.getElementById('flame').clientWidth, \
         document.querySelectorAll(\"#flame .frame[data-name='right']\").length, \
         document.querySelectorAll(\"#flame .frame[data-name='leaf']\").length, \
         document.getElementById('flame-status').textContent]",
    );
    let w = zoomed[0].as_f64().unwrap();
    let full = zoomed[1].as_f64().unwrap();
    assert!((w - full).abs() < 2.0, "{zoomed}");
    assert_eq!(zoomed[2], 0, "{zoomed}");
    assert!(zoomed[3].as_u64().unwrap() >= 1, "{zoomed}");
    assert!(zoomed[4].as_str().unwrap().starts_with("left"), "{zoomed}");
    b.screenshot("call-graph-zoomed.png");
    b.click("#flame-reset");

    // A search highlights every frame of leaf, and the share it gives is leaf's inclusive
    // share from the report (each stack counted once).
    b.type_into("#flame-search", "leaf");
    let found = b.js(
        "return [document.querySelectorAll('#flame .frame.match').length, \
         [...document.querySelectorAll('#flame .frame.match')].every(f => f.dataset.name.toLowerCase().includes('leaf')), \
         Number(document.getElementById('flame-matched').dataset.percent)]",
    );
    let leaf = r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "leaf")
        .unwrap();
    assert!(found[0].as_u64().unwrap() >= 3, "{found}");
    assert_eq!(found[1], true);
    let inclusive = leaf["inclusive_percent"].as_f64().unwrap();
    assert!(
        (found[2].as_f64().unwrap() - inclusive).abs() < 1e-6,
        "search matched {found} against leaf's inclusive {inclusive}"
    );
    b.screenshot("call-graph-search.png");
    // Recursion: `recurse` under `recurse` is one stack, counted once, as the inclusive share.
    let input = b.element("#flame-search");
    b.cmd("POST", &format!("/element/{input}/clear"), Some(json!({})));
    b.type_into("#flame-search", "recurse");
    let nested = b.js(
        "return [document.querySelectorAll(\"#flame .frame.match[data-name='recurse']\").length, \
         Number(document.getElementById('flame-matched').dataset.percent)]",
    );
    let recurse = r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "recurse")
        .unwrap()["inclusive_percent"]
        .as_f64()
        .unwrap();
    assert!(nested[0].as_u64().unwrap() >= 3, "{nested}");
    assert!(
        (nested[1].as_f64().unwrap() - recurse).abs() < 1e-6,
        "search matched {nested} against recurse's inclusive {recurse}"
    );

    // A click on a column sorts by it; a second click reverses.
    b.click("#t-functions th[data-key='samples']");
    b.click("#t-functions th[data-key='samples']");
    let first = b.js("return document.querySelector('#t-functions tbody tr td.name').textContent");
    let least = json_rows
        .iter()
        .map(|f| f["samples"].as_u64().unwrap())
        .min()
        .unwrap();
    let first_row = json_rows.iter().find(|f| f["name"] == first).unwrap();
    assert_eq!(first_row["samples"].as_u64().unwrap(), least);

    let errors: Vec<_> = b
        .console()
        .into_iter()
        .filter(|(level, _)| level == "SEVERE" || level == "WARNING")
        .collect();
    assert!(errors.is_empty(), "console: {errors:?}");
}

#[test]
fn an_exact_report_annotates_the_hottest_functions_with_their_source() {
    let Some(b) = Browser::start() else { return };
    let (_, dir) = profile_in("call-graph", &["--exact", "--instructions", "5M"]);
    let page = dir.join("test-exact.html");
    report(
        &dir,
        &["--format", "html", "-o", page.to_str().unwrap()],
        &[],
    );
    // The same annotation, as JSON, from the text report's own option.
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-sample"))
        .args([
            "sample",
            "report",
            dir.to_str().unwrap(),
            "--format",
            "json",
        ])
        .args(["--annotate", "5"])
        .current_dir(scenarios())
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    b.open(&page);
    // Only the hottest function's code is drawn at first; a click on another's title opens it.
    let drawn = b.js("return document.querySelectorAll('.fn-asm table').length");
    assert_eq!(drawn, 1);
    let titles = b.js("return document.querySelectorAll('.fn-asm summary').length");
    for k in 2..=titles.as_u64().unwrap() {
        b.click(&format!(".fn-asm:nth-of-type({k}) summary"));
    }
    b.wait_for("[...document.querySelectorAll('.fn-asm')].every(d => d.querySelector('table'))");
    let shown = b.js("return [...document.querySelectorAll('.fn-asm')].map(d => \
         [d.querySelector('h3').textContent, d.querySelectorAll('tbody tr:not(.src)').length, \
         [...d.querySelectorAll('tr.src td')].map(td => td.textContent)])");
    let shown = shown.as_array().unwrap();
    let annotated = r["annotate"].as_array().unwrap();
    assert_eq!(shown.len(), annotated.len());
    assert!(!annotated.is_empty());
    for (page_fn, json_fn) in shown.iter().zip(annotated) {
        assert!(
            page_fn[0]
                .as_str()
                .unwrap()
                .starts_with(json_fn["name"].as_str().unwrap())
        );
        let insns = json_fn["instructions"].as_array().unwrap();
        assert_eq!(page_fn[1].as_u64().unwrap() as usize, insns.len());
        let lines: Vec<&str> = insns.iter().filter_map(|i| i["line"].as_str()).collect();
        let page_lines: Vec<&str> = page_fn[2]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        assert_eq!(page_lines, lines);
    }
    assert!(
        b.js("return document.getElementById('t-functions').querySelector('th[data-key=\"instructions\"]') !== null")
            == true
    );
    b.screenshot("call-graph-exact.png");
    let errors: Vec<_> = b
        .console()
        .into_iter()
        .filter(|(level, _)| level == "SEVERE")
        .collect();
    assert!(errors.is_empty(), "console: {errors:?}");
}

#[test]
fn lap_regions_are_a_table_of_their_own() {
    let Some(b) = Browser::start() else { return };
    let (r, dir) = profile_in("laps", &["-n", "2000"]);
    let page = dir.join("test-laps.html");
    report(
        &dir,
        &["--format", "html", "-o", page.to_str().unwrap()],
        &[],
    );
    b.open(&page);
    let shown = b.js(
        "return [...document.querySelectorAll('#t-laps tbody tr')].map(tr => \
         [tr.children[0].textContent, tr.children[1].textContent])",
    );
    let mut shown: Vec<(String, String)> = shown
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v[0].as_str().unwrap().to_owned(),
                v[1].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut expected: Vec<(String, String)> = r["laps"]["regions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let name = g["name"].as_str().unwrap().to_owned();
            let name = if g["kind"] == "iteration" {
                format!("{name} (iteration)")
            } else {
                name
            };
            (name, with_commas(g["calls"].as_u64().unwrap()))
        })
        .collect();
    shown.sort();
    expected.sort();
    assert!(!expected.is_empty());
    assert_eq!(shown, expected);
    b.screenshot("laps.png");

    // With `--cycles`, each `measure` region's mean in estimated cycles, as in the JSON.
    let (r, dir) = profile_in("laps", &["--laps", "--cycles"]);
    let page = dir.join("test-laps-cycles.html");
    report(
        &dir,
        &["--cycles", "--format", "html", "-o", page.to_str().unwrap()],
        &[],
    );
    b.open(&page);
    let column = b.js(
        "const h = [...document.querySelectorAll('#t-laps thead th')].map(t => t.textContent); \
         const k = h.findIndex(t => t.startsWith('mean cycles')); \
         return [...document.querySelectorAll('#t-laps tbody tr')].map(tr => \
         [tr.children[0].textContent, tr.children[k].textContent])",
    );
    let shown: std::collections::BTreeMap<String, String> = column
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v[0].as_str().unwrap().to_owned(),
                v[1].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for g in r["laps"]["regions"].as_array().unwrap() {
        let name = g["name"].as_str().unwrap();
        let name = if g["kind"] == "iteration" {
            format!("{name} (iteration)")
        } else {
            name.to_owned()
        };
        let want = match g["cycles"]["mean"].as_f64() {
            Some(c) => format!("{c:.1}"),
            None => "-".to_owned(),
        };
        assert_eq!(shown.get(&name), Some(&want), "{name}: {shown:?}");
    }
    assert!(shown.values().any(|v| v != "-"));
}

#[test]
fn embassy_tasks_are_a_table_with_a_histogram_per_task() {
    let Some(b) = Browser::start() else { return };
    let (r, dir) = profile_example("embassy-metrics", &["--release", "--truth"]);
    let page = dir.join("test-tasks.html");
    report(
        &dir,
        &["--format", "html", "-o", page.to_str().unwrap()],
        &[],
    );
    b.open(&page);
    let shown = b.js(
        "const h = [...document.querySelectorAll('#t-tasks thead th')].map(t => t.textContent); \
         const k = h.findIndex(t => t.startsWith('poll lengths')); \
         return [...document.querySelectorAll('#t-tasks tbody tr')].map(tr => [ \
           tr.children[0].textContent, tr.children[1].textContent, \
           [...tr.children[k].querySelectorAll('.bar')].map(s => [s.title, s.offsetHeight])])",
    );
    let rows = shown.as_array().unwrap();
    let tasks = r["tasks"]["tasks"].as_array().unwrap();
    assert_eq!(rows.len(), tasks.len());
    for t in tasks {
        let name = t["name"].as_str().unwrap();
        let label = if t["ended"] == true {
            format!("{name} (ended)")
        } else {
            name.to_owned()
        };
        let row = rows
            .iter()
            .find(|r| r[0] == label.as_str())
            .unwrap_or_else(|| panic!("no row for {label}: {rows:?}"));
        assert_eq!(row[1], with_commas(t["polls"].as_u64().unwrap()).as_str());
        // One bar per bin of the poll lengths; the tallest is the bin with the most polls.
        let bins = t["poll_histogram"].as_array().unwrap();
        let bars = row[2].as_array().unwrap();
        assert_eq!(bars.len(), bins.len(), "{label}");
        let most = bins
            .iter()
            .max_by_key(|b| b["count"].as_u64().unwrap())
            .unwrap();
        let tallest = bars.iter().max_by_key(|b| b[1].as_u64().unwrap()).unwrap();
        assert!(
            tallest[0].as_str().unwrap().ends_with(&format!(
                ": {}",
                with_commas(most["count"].as_u64().unwrap())
            )),
            "{label}: {tallest} against {most}"
        );
    }
    // Each executor's idle share, the interrupt executor's among them, as the JSON has it.
    let shown =
        b.js("return [...document.querySelectorAll('#executors li')].map(l => l.textContent)");
    let items = shown.as_array().unwrap();
    let executors = r["tasks"]["executors"].as_array().unwrap();
    assert_eq!(items.len(), executors.len(), "{items:?}");
    for (li, x) in items.iter().zip(executors) {
        let li = li.as_str().unwrap();
        let pct = |v: &serde_json::Value| format!("{:.2} %", v.as_f64().unwrap());
        assert!(
            li.contains(x["context"].as_str().unwrap())
                && li.contains(&format!("idle {}", pct(&x["idle_percent"])))
                && li.contains(&format!("(exact {})", pct(&x["exact_idle_percent"]))),
            "{li} against {x}"
        );
    }
    b.screenshot("tasks.png");
}

fn with_commas(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn open_hands_the_page_to_the_browser_and_refuses_what_is_not_a_page() {
    let (_, dir) = profile_in("hot-loops", &["-n", "500"]);
    let seen = dir.join("browser-was-given.txt");
    let script = dir.join("fake-browser.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nprintf '%s' \"$1\" > '{}'\n", seen.display()),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let err = report(
        &dir,
        &["--format", "html", "--open"],
        &[("BROWSER", script.to_str().unwrap())],
    );
    let page = dir.join("report.html").canonicalize().unwrap();
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap(),
        page.to_str().unwrap()
    );
    assert!(
        std::fs::read_to_string(&page)
            .unwrap()
            .contains("id=\"data\"")
    );
    assert!(err.contains("Opened"), "{err}");
    // The SVG goes the same way.
    report(
        &dir,
        &["--format", "svg", "--open"],
        &[("BROWSER", script.to_str().unwrap())],
    );
    assert!(
        std::fs::read_to_string(&seen)
            .unwrap()
            .ends_with("flamegraph.svg")
    );
    // A text report is not a page.
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-sample"))
        .args(["sample", "report", dir.to_str().unwrap(), "--open"])
        .current_dir(scenarios())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--format html"));
}

#[test]
fn the_svg_flame_graph_renders_and_zooms_in_chromium() {
    let Some(b) = Browser::start() else { return };
    let (_, dir) = profile_in("call-graph", &["--stacks", "-n", "3000"]);
    let svg = dir.join("test-flamegraph.svg");
    report(&dir, &["--format", "svg", "-o", svg.to_str().unwrap()], &[]);
    let text = std::fs::read_to_string(&svg).unwrap();
    b.open_document(&svg);
    // Every frame of the file is drawn, with a box of its own.
    let drawn = b.js("return document.querySelectorAll('#frames > g').length");
    assert_eq!(drawn.as_u64().unwrap() as usize, svg_frames(&text).len());
    let empty = b.js("return [...document.querySelectorAll('#frames > g rect')]\
         .filter(r => !(r.getBBox().width > 0)).length");
    assert_eq!(empty, 0);
    b.screenshot_of("svg", "flamegraph.png");
    // A click on the widest `leaf` frame zooms: it then spans the graph.
    let widest = "[...document.querySelectorAll('#frames > g')]\
         .filter(g => g.querySelector('title').textContent.startsWith('leaf ('))\
         .sort((a, b) => b.querySelector('rect').getBBox().width - \
                         a.querySelector('rect').getBBox().width)[0]";
    let before = b.js(&format!(
        "return {widest}.querySelector('rect').getBBox().width"
    ));
    let full = b.js("return document.getElementById('frames').getBBox().width");
    let (before, full) = (before.as_f64().unwrap(), full.as_f64().unwrap());
    assert!(before < full * 0.9, "{before} of {full}");
    b.js(&format!(
        "window.zoomed = {widest}; window.zoomed.dispatchEvent(\
         new MouseEvent('click', {{bubbles: true}})); return null"
    ));
    let after = b
        .js("return window.zoomed.querySelector('rect').getBBox().width")
        .as_f64()
        .unwrap();
    assert!((after - full).abs() <= 0.01 * full, "{after} of {full}");
    b.screenshot_of("svg", "flamegraph-zoomed.png");
    let errors: Vec<_> = b
        .console()
        .into_iter()
        .filter(|(level, _)| level == "SEVERE")
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}
