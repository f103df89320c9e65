"use strict";
// Draws cargo-sample's HTML report from the JSON in #data: facts, findings, the flame graph
// (click a frame to zoom into it, search to highlight), sortable tables, callers and callees,
// and the annotated code of the hottest functions.
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const r = data.report;
  const exact = r.mode === "exact";
  const unit = exact ? "instructions" : "samples";
  const total = (exact ? r.instructions : r.samples) || 0;

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const k of kids) {
      if (k === null || k === undefined) continue;
      e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return e;
  }
  const fmtPct = (p) => (p === undefined || p === null ? "" : p.toFixed(2) + " %");
  const fmtInt = (n) => (n === undefined || n === null ? "" : Number(n).toLocaleString("en-US"));
  const fmtCi = (ci) => (ci ? "[" + ci[0].toFixed(2) + ", " + ci[1].toFixed(2) + "]" : "");
  const hex = (a) => "0x" + a.toString(16).padStart(8, "0");

  // ---- header, navigation, facts and findings ----
  const sections = [];
  const header = el("header", {},
    el("h1", { text: r.firmware + " on " + r.machine }),
    el("div", { class: "sub", text: exact
      ? "every executed instruction counted (" + fmtInt(total) + " instructions)"
      : fmtInt(total) + " samples" }));
  const nav = el("nav", { id: "nav" });
  const main = el("main", {});
  document.body.append(header, nav, main);

  function section(id, title, ...kids) {
    const s = el("section", { id }, el("h2", { text: title }), ...kids);
    main.append(s);
    nav.append(el("a", { href: "#" + id, text: title }));
    sections.push(id);
    return s;
  }

  const facts = [
    ["Mode", r.mode],
    ["Samples", exact ? null : fmtInt(r.samples)],
    ["Instructions", exact ? fmtInt(r.instructions) : null],
    ["Taken", fmtInt(r.taken)],
    ["Lost", r.lost ? fmtInt(r.lost) : null],
    ["Overwritten", r.overwritten ? fmtInt(r.overwritten) : null],
    ["Timer", r.timer && r.timer_hz ? r.timer + " at " + fmtInt(r.timer_hz) + " Hz" : r.timer],
    ["Mean period", r.period_units ? fmtInt(Math.round(r.period_units)) + " " + r.unit : null],
    ["Jitter", r.jitter_ticks ? fmtInt(r.jitter_ticks) + " ticks" : null],
    ["Duration", r.duration_units ? fmtInt(Math.round(r.duration_units)) + " " + r.unit : null],
    ["Counted by", r.counted_by],
    ["Budget", r.instruction_budget ? fmtInt(r.instruction_budget) + " instructions" : null],
    ["Stop", r.stop],
    ["Source", r.source],
    ["Distinct addresses", fmtInt(r.distinct_pcs)],
    ["Exact instructions", r.exact_instructions ? fmtInt(r.exact_instructions) : null],
    ["Largest error", r.max_error_points !== undefined
      ? r.max_error_points.toFixed(2) + " points against the exact counts" : null],
  ];
  if (r.unwinding) {
    const u = r.unwinding;
    facts.push(["Stacks", fmtInt(u.complete) + " complete, " + fmtInt(u.handler_root) +
      " to a handler's root, " + fmtInt(u.truncated) + " cut short by the " + u.window_words +
      "-word window, " + fmtInt(u.failed.reduce((a, f) => a + f[1], 0)) + " failed"]);
  }
  const dl = el("dl", { class: "facts" });
  for (const [k, v] of facts) {
    if (v === undefined || v === null || v === "") continue;
    dl.append(el("dt", { text: k }), el("dd", { text: v }));
  }
  const findings = el("ul", { class: "findings", id: "findings" });
  for (const d of r.diagnostics || []) {
    const sev = String(d.severity || "").toLowerCase();
    findings.append(el("li", { class: sev }, el("span", { class: "kind", text: sev + ":" }), d.message));
  }
  section("summary", "Run", dl, (r.diagnostics || []).length ? findings : null);

  // ---- flame graph ----
  const F = data.flame;
  const ROW = 18;
  const n = F.name.length;
  const kids = Array.from({ length: n }, () => []);
  for (let i = 1; i < n; i++) kids[F.parent[i]].push(i);
  const nameOf = (i) => F.names[F.name[i]];
  for (const k of kids) k.sort((a, b) => (nameOf(a) < nameOf(b) ? -1 : nameOf(a) > nameOf(b) ? 1 : 0));
  const colours = new Map();
  function colour(name) {
    let c = colours.get(name);
    if (c) return c;
    if (name.startsWith("[")) {
      c = "hsl(210, 10%, 72%)";
    } else {
      // FNV-1a of the name: the same function gets the same colour in every report.
      let h = 0x811c9dc5;
      for (let i = 0; i < name.length; i++) {
        h ^= name.charCodeAt(i);
        h = Math.imul(h, 0x01000193) >>> 0;
      }
      c = "hsl(" + (h % 50) + ", " + (60 + ((h >>> 8) % 25)) + "%, " + (58 + ((h >>> 16) % 14)) + "%)";
    }
    colours.set(name, c);
    return c;
  }
  let zoom = 0;
  let search = null;
  const flame = el("div", { id: "flame", role: "img", "aria-label": "flame graph" });
  const status = el("div", { id: "flame-status", text: "Click a frame to zoom into it." });
  const matched = el("span", { id: "flame-matched" });
  const input = el("input", { id: "flame-search", type: "search",
    placeholder: "Search frames (text or /regex/)", "aria-label": "search frames" });
  const reset = el("button", { id: "flame-reset", type: "button", text: "Reset zoom",
    onclick: () => { zoom = 0; drawFlame(); } });
  section("flamegraph", "Flame graph",
    el("div", { class: "sub in", text: data.stacks_kind + "; widths are shares of all " + unit +
      ", the outermost frame on top" }),
    el("div", { class: "controls" }, input, reset, matched), status, flame);

  function matcher(text) {
    if (!text) return null;
    const m = /^\/(.*)\/$/.exec(text);
    if (m) {
      try { const re = new RegExp(m[1], "i"); return (s) => re.test(s); } catch (e) { /* as text */ }
    }
    const t = text.toLowerCase();
    return (s) => s.toLowerCase().includes(t);
  }

  function drawFlame() {
    const width = flame.clientWidth || 1000;
    const frag = document.createDocumentFragment();
    const path = [];
    for (let i = zoom; i !== -1; i = F.parent[i]) path.unshift(i);
    let maxDepth = 0;
    const place = (i, depth, x, w, ancestor) => {
      const d = el("div", { class: "frame" + (ancestor ? " ancestor" : "") });
      d.style.left = (x * 100) + "%";
      d.style.width = (w * 100) + "%";
      d.style.top = (depth * ROW) + "px";
      d.style.background = colour(nameOf(i));
      d.dataset.node = i;
      d.dataset.name = nameOf(i);
      if (w * width > 28) d.textContent = nameOf(i);
      if (search && i !== 0 && search(nameOf(i))) d.classList.add("match");
      frag.append(d);
      if (depth > maxDepth) maxDepth = depth;
    };
    path.forEach((i, depth) => place(i, depth, 0, 1, i !== zoom));
    const base = F.value[zoom] || 1;
    const walk = (i, depth, x) => {
      let cx = x;
      for (const c of kids[i]) {
        const w = F.value[c] / base;
        if (w * width >= 0.5) {
          place(c, depth, cx, w, false);
          walk(c, depth + 1, cx);
        }
        cx += w;
      }
    };
    walk(zoom, path.length, 0);
    flame.replaceChildren(frag);
    flame.style.height = ((maxDepth + 1) * ROW + 2) + "px";
  }

  function frameText(i) {
    const v = F.value[i];
    const of = F.value[0] || 1;
    return nameOf(i) + " — " + fmtInt(v) + " " + unit + " (" + fmtPct(100 * v / of) + ")";
  }
  flame.addEventListener("click", (ev) => {
    const t = ev.target.closest(".frame");
    if (!t) return;
    zoom = Number(t.dataset.node);
    drawFlame();
    status.textContent = frameText(zoom);
  });
  flame.addEventListener("mouseover", (ev) => {
    const t = ev.target.closest(".frame");
    if (t) status.textContent = frameText(Number(t.dataset.node));
  });

  function applySearch() {
    search = matcher(input.value.trim());
    if (!search) {
      matched.textContent = "";
    } else {
      // Each matching frame counted once: not again below a matching ancestor.
      let sum = 0;
      const walk = (i, under) => {
        const hit = i !== 0 && search(nameOf(i));
        if (hit && !under) sum += F.value[i];
        for (const c of kids[i]) walk(c, under || hit);
      };
      walk(0, false);
      const share = 100 * sum / (F.value[0] || 1);
      matched.textContent = "Matched: " + fmtPct(share) + " of all " + unit;
      matched.dataset.percent = share.toFixed(6);
    }
    drawFlame();
  }
  input.addEventListener("input", applySearch);
  window.addEventListener("resize", drawFlame);

  // ---- tables ----
  const LIMIT = 100;
  function rowsTable(id, rows, cols) {
    const table = el("table", { class: "rows", id });
    const head = el("tr", {});
    const body = el("tbody", {});
    let key = cols.find((c) => c.sortDefault) || cols[0];
    let asc = false;
    let all = false;
    const more = el("button", { class: "more", type: "button", onclick: () => { all = true; fill(); } });
    function fill() {
      const sorted = rows.slice().sort((a, b) => {
        const x = key.value(a), y = key.value(b);
        const c = typeof x === "string" ? x.localeCompare(y) : (x ?? -Infinity) - (y ?? -Infinity);
        return asc ? c : -c;
      });
      const shown = all ? sorted : sorted.slice(0, LIMIT);
      body.replaceChildren(...shown.map((row) => el("tr", {}, ...cols.map((c) => c.cell(row)))));
      more.textContent = "Show all " + rows.length + " rows";
      more.hidden = all || rows.length <= LIMIT;
      for (const th of head.children) {
        th.classList.toggle("sorted", th.dataset.key === key.title);
        th.classList.toggle("asc", th.dataset.key === key.title && asc);
      }
    }
    for (const c of cols) {
      head.append(el("th", { class: c.num ? "num" : null, "data-key": c.title, text: c.title,
        title: "Sort by " + c.title,
        onclick: () => { if (key === c) asc = !asc; else { key = c; asc = !!c.ascFirst; } fill(); } }));
    }
    table.append(el("thead", {}, head), body);
    fill();
    return el("div", {}, table, more);
  }
  const count = (row) => (exact ? row.instructions : row.samples);
  // `atMost`: the share is a lower bound (stacks stopped short of their root), at most this.
  function shareCell(p, ci, atMost, lowerBound) {
    const bounded = atMost !== undefined || lowerBound;
    const td = el("td", { class: "share" }, (bounded ? "≥ " : "") + fmtPct(p),
      ci ? el("div", { class: "ci", text: fmtCi(ci) }) : null);
    if (bounded) {
      td.title = "a lower bound: some stacks stopped short of their root" +
        (atMost !== undefined ? " (at most " + fmtPct(atMost) + ")" : "");
    }
    const w = Math.max(0, Math.min(100, p || 0));
    td.style.backgroundImage = "linear-gradient(to right, var(--bar) " + w + "%, transparent " + w + "%)";
    return td;
  }
  function columns(rows, withFunction) {
    const has = (f) => rows.some((row) => row[f] !== undefined && row[f] !== null);
    const cols = [
      { title: "share", num: true, sortDefault: true, value: (row) => row.percent,
        cell: (row) => shareCell(row.percent, row.ci95, undefined, row.lower_bound) },
      { title: unit, num: true, value: count, cell: (row) => el("td", { class: "num", text: fmtInt(count(row)) }) },
    ];
    if (has("inclusive_percent")) {
      cols.push({ title: "inclusive", num: true, value: (row) => row.inclusive_percent,
        cell: (row) => shareCell(row.inclusive_percent, row.inclusive_ci95, row.inclusive_at_most_percent) });
    }
    if (has("exact_percent")) {
      cols.push({ title: "exact", num: true, value: (row) => row.exact_percent,
        cell: (row) => el("td", { class: "num", text: fmtPct(row.exact_percent) }) });
    }
    if (has("exact_inclusive_percent")) {
      cols.push({ title: "exact inclusive", num: true, value: (row) => row.exact_inclusive_percent,
        cell: (row) => el("td", { class: "num", text: fmtPct(row.exact_inclusive_percent) }) });
    }
    if (has("error_sigma")) {
      cols.push({ title: "error σ", num: true, value: (row) => row.error_sigma,
        cell: (row) => el("td", { class: "num", text: row.error_sigma === undefined ? "" : row.error_sigma.toFixed(1) }) });
    }
    cols.push({ title: "name", ascFirst: true, value: (row) => row.name,
      cell: (row) => el("td", { class: "name" }, row.name,
        withFunction && row.function && row.function !== row.name
          ? el("span", { class: "in", text: "  in " + row.function }) : null) });
    return cols;
  }
  const tables = [
    ["functions", "Functions", r.functions, false],
    ["inlined", "Inlined frames", r.inlined, true],
    ["lines", "Source lines", r.lines, true],
    ["tags", "Tags", r.tags, false],
    ["tag-functions", "Tags and functions", r.tag_functions, false],
  ];
  for (const [id, title, rows, withFunction] of tables) {
    if (!rows || !rows.length) continue;
    section(id, title, rowsTable("t-" + id, rows, columns(rows, withFunction)));
  }

  // ---- lap-timed regions ----
  if (r.laps && r.laps.regions && r.laps.regions.length) {
    const L = r.laps;
    const num = (title, f, fmt) => ({ title, num: true, value: f,
      cell: (x) => el("td", { class: "num", text: f(x) === undefined || f(x) === null ? "-" : fmt(f(x)) }) });
    const one = (v) => v.toFixed(1);
    section("laps", "Lap-timed regions", el("div", { class: "in",
      text: "Counted by " + L.counter + " in " + r.unit + ", each lap's own cost (" + one(L.overhead) + ") subtracted" }),
    L.warnings && L.warnings.length ? el("ul", { class: "findings" },
      ...L.warnings.map((w) => el("li", { class: "warning", text: w }))) : null,
    L.cycles_model ? el("div", { class: "in",
      text: "Cycles estimated by the " + L.cycles_model + " (not measured), at the CPI of the code each region's laps ran" }) : null,
    L.cycles_notes && L.cycles_notes.length ? el("ul", { class: "findings" },
      ...L.cycles_notes.map((w) => el("li", { text: w }))) : null,
    rowsTable("t-laps", L.regions, [
      { title: "region", ascFirst: true, value: (x) => x.name, cell: (x) => el("td", { class: "name", text: x.name + (x.kind === "iteration" ? " (iteration)" : "") }) },
      num("laps", (x) => x.calls, fmtInt),
      num("min", (x) => x.min, one),
      num("median", (x) => x.median, one),
      Object.assign(num("mean", (x) => x.mean, one), { sortDefault: true }),
      num("max", (x) => x.max, one),
      num("mean µs", (x) => x.mean_us, (v) => v.toFixed(3)),
      num("rate Hz", (x) => x.rate_hz, one),
    ].concat(L.cycles_model ? [
      num("mean cycles", (x) => x.cycles && x.cycles.mean, one),
      num("max cycles", (x) => x.cycles && x.cycles.max, one),
      num("CPI", (x) => x.cycles && x.cycles.cpi, (v) => v.toFixed(3)),
    ] : []).concat([
      { title: "clusters", value: (x) => x.clusters.length,
        cell: (x) => el("td", { class: "in", text: x.clusters.map((c) => one(c.center) + " × " + fmtInt(c.laps) + " (" + fmtPct(c.percent) + ")").join(", ") }) },
    ])));
  }

  // ---- Embassy tasks ----
  if (r.tasks && r.tasks.tasks && r.tasks.tasks.length) {
    const T = r.tasks;
    const num = (title, f, fmt) => ({ title, num: true, value: f,
      cell: (x) => el("td", { class: "num", text: f(x) === undefined || f(x) === null ? "-" : fmt(f(x)) }) });
    const whole = (v) => Math.round(v).toLocaleString("en-US");
    // A histogram as bars, one per power of two (a bar's title: its range and count).
    const bars = (bins) => {
      const most = Math.max(1, ...bins.map((b) => b.count));
      return el("td", { class: "hist" }, ...bins.slice().reverse().map((b) => el("span", {
        class: "bar",
        style: "height:" + Math.max(2, Math.round(24 * b.count / most)) + "px",
        title: whole(b.low) + " – " + whole(b.high) + " " + T.unit + ": " + fmtInt(b.count),
      })));
    };
    const exactCols = T.tasks.some((k) => k.exact);
    section("tasks", "Embassy tasks", el("div", { class: "in",
      text: "Timed by " + T.clock + " in " + T.unit + (T.idle_percent !== undefined
        ? " · executor idle " + fmtPct(T.idle_percent) + (T.exact_idle_percent !== undefined ? " (exact " + fmtPct(T.exact_idle_percent) + ")" : "")
        : "") }),
    T.executors && T.executors.length > 1 ? el("ul", { class: "in", id: "executors" },
      ...T.executors.map((x) => el("li", { text: "executor " + hex(x.id) + " in " + x.context
        + (x.idle_percent !== undefined ? ": idle " + fmtPct(x.idle_percent) : ": idle not timed")
        + " in " + fmtInt(x.idle_periods) + " periods"
        + (x.exact_idle_percent !== undefined ? " (exact " + fmtPct(x.exact_idle_percent) + ")" : "") }))) : null,
    T.notes && T.notes.length ? el("ul", { class: "findings" },
      ...T.notes.map((w) => el("li", { text: w }))) : null,
    rowsTable("t-tasks", T.tasks, [
      { title: "task", ascFirst: true, value: (x) => x.name, cell: (x) => el("td", { class: "name", text: x.name + (x.ended ? " (ended)" : "") }) },
      num("polls", (x) => x.polls, fmtInt),
      Object.assign(num("busy %", (x) => x.busy_percent, fmtPct), { sortDefault: true }),
      num("mean poll", (x) => x.mean_poll, whole),
      num("max poll", (x) => x.max_poll, whole),
      { title: "poll lengths", value: (x) => x.poll_histogram.length, cell: (x) => bars(x.poll_histogram) },
      num("wakes", (x) => x.wakes, fmtInt),
      num("mean latency", (x) => x.mean_latency, whole),
      num("max latency", (x) => x.max_latency, whole),
      { title: "latencies", value: (x) => x.latency_histogram.length, cell: (x) => bars(x.latency_histogram) },
      num("sampled %", (x) => x.sampled_percent, fmtPct),
    ].concat(exactCols ? [
      num("exact busy %", (x) => x.exact && x.exact.busy_percent, fmtPct),
      num("exact max poll", (x) => x.exact && x.exact.max_poll, whole),
      num("error σ", (x) => x.exact && x.exact.error_sigma, (v) => v.toFixed(1)),
    ] : [])));
  }

  // ---- exception trace (SWO captures) ----
  if (r.exceptions && r.exceptions.length) {
    const num = (title, f, fmt) => ({ title, num: true, value: f,
      cell: (e) => el("td", { class: "num", text: f(e) === undefined ? "-" : fmt(f(e)) }) });
    section("exceptions", "Exceptions", el("div", { class: "in",
      text: "From the exception trace: times from entry to exit in ticks of the ITM's timestamp clock, preemption included" }),
    rowsTable("t-exceptions", r.exceptions, [
      num("number", (e) => e.number, String),
      num("entries", (e) => e.entries, fmtInt),
      num("timed", (e) => e.timed, fmtInt),
      num("min", (e) => e.min_ticks, fmtInt),
      num("mean", (e) => e.mean_ticks, (m) => m.toFixed(1)),
      num("max", (e) => e.max_ticks, fmtInt),
      { title: "name", ascFirst: true, value: (e) => e.name, cell: (e) => el("td", { class: "name", text: e.name }) },
    ]));
  }

  // ---- callers and callees ----
  for (const [id, title, edges] of [["callers", "Callers of ", r.callers], ["callees", "Callees of ", r.callees]]) {
    if (!edges) continue;
    const cols = columns(edges.rows, false).filter((c) => c.title !== "inclusive");
    if (edges.rows.some((e) => e.calls !== undefined)) {
      cols.splice(cols.length - 1, 0, { title: "calls", num: true, value: (e) => e.calls,
        cell: (e) => el("td", { class: "num", text: fmtInt(e.calls) }) });
    }
    section(id, title + edges.function, rowsTable("t-" + id, edges.rows, cols));
  }

  // ---- annotated code ----
  if (r.annotate && r.annotate.length) {
    const s = section("annotate", "Annotated code");
    // Each function's table is built when it is first opened (a big function is thousands of
    // rows): the hottest one open from the start.
    r.annotate.forEach((f, k) => {
      const details = el("details", { class: "fn-asm" },
        el("summary", {}, el("h3", { text: f.name + " — " + fmtPct(f.percent) + " (" + fmtInt(f.count) + " " + unit + ")" })));
      const build = () => {
        if (details.querySelector("table")) return;
        details.append(asmTable(f));
      };
      details.addEventListener("toggle", () => { if (details.open) build(); });
      if (k === 0) { details.open = true; build(); }
      s.append(details);
    });
  }

  function asmTable(f) {
    const withExact = f.instructions.some((i) => i.exact_percent !== undefined);
    const t = el("table", { class: "asm" });
    const head = el("tr", {}, el("th", { class: "num", text: "share" }), el("th", { class: "num", text: unit }));
    if (withExact) head.append(el("th", { class: "num", text: "exact" }));
    head.append(el("th", { text: "address" }), el("th", { text: "instruction" }));
    t.append(el("thead", {}, head));
    const body = el("tbody", {});
    const cols = head.children.length;
    const hottest = Math.max(...f.instructions.map((i) => i.percent), 0);
    for (const i of f.instructions) {
      if (i.line) body.append(el("tr", { class: "src" }, el("td", { colspan: cols, text: i.line })));
      const tr = el("tr", { class: i.percent > 0 && i.percent >= hottest / 2 ? "hot" : null },
        i.count ? shareCell(i.percent) : el("td", {}),
        el("td", { class: "num", text: i.count ? fmtInt(i.count) : "" }));
      if (withExact) tr.append(el("td", { class: "num", text: fmtPct(i.exact_percent) }));
      tr.append(el("td", { text: hex(i.addr) }), el("td", { class: "text", text: i.data ? "(data) " + i.text : i.text }));
      body.append(tr);
    }
    t.append(body);
    return t;
  }

  document.body.append(el("footer", { text: "Made by " + data.generator +
    ". The same figures: cargo sample report <run> --format json." }));
  drawFlame();
  // Milliseconds from the start of navigation to a drawn page (read by the benchmark).
  document.body.dataset.drawnMs = String(Math.round(performance.now()));
  document.body.dataset.ready = "1";
})();
