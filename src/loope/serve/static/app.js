// The loope dashboard: two pages drawn from the server's JSON, kept current by server-sent events.
// Everything a run wrote is shown as text (textContent), never parsed as HTML.
"use strict";

const body = document.body;
const TOKEN = document.querySelector('meta[name="loope-token"]').content;
const app = document.getElementById("app");
const conn = document.getElementById("conn");

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== null && value !== undefined) node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  for (const child of children.flat()) if (child) node.append(child instanceof Node ? child : String(child));
  return node;
}

const money = (usd) => "$" + Number(usd || 0).toFixed(4);
function duration(seconds) {
  const s = Math.floor(seconds || 0);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
  return Math.floor(s / 3600) + "h" + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
}
function age(iso) {
  const t = Date.parse(iso || "");
  return Number.isNaN(t) ? "" : duration((Date.now() - t) / 1000) + " ago";
}
const status = (s) => el("span", { class: "status " + s, "data-status": s }, s);

async function getJSON(url) {
  const response = await fetch(url, { cache: "no-store" });
  if (!response.ok) throw new Error(url + ": " + response.status);
  return response.json();
}

function connected(source) {
  source.onopen = () => { conn.textContent = "live"; conn.className = "conn live"; };
  source.onerror = () => { conn.textContent = "reconnecting…"; conn.className = "conn"; };
}

// -- the runs list --------------------------------------------------------------------------------

function drawFleets(fleets) {
  if (!fleets || !fleets.length) return [];
  const rows = fleets.flatMap((f) => [
    el("tr", { class: "fleet", "data-fleet": f.fleet_id },
      el("td", {}, f.fleet_id), el("td", { class: "muted" }, f.on), el("td", {}, status(f.status)),
      el("td", { class: "num" }, money(f.cost_usd)), el("td", {}, f.loops.length + " loop(s)")),
    ...f.loops.map((l) =>
      el("tr", { class: "fleet-loop", "data-task": l.task },
        el("td", {}, "· " + l.task), el("td", {}, l.url ? el("a", { href: l.url }, l.loop_id) : (l.loop_id || "")),
        el("td", {}, status(l.status)), el("td", { class: "num iterations" }, String(l.iteration)), el("td", {}, ""))),
  ]);
  return [el("h1", {}, "Fleets"), el("table", { id: "fleets" },
    el("thead", {}, el("tr", {}, ["fleet", "on", "status", "cost", "loops"].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows))];
}

function drawRuns(runs, fleets) {
  const rows = runs.map((r) =>
    el("tr", { "data-run": r.id, "data-project": r.project },
      el("td", {}, el("a", { href: r.url }, r.id)),
      el("td", { class: "muted" }, r.project_dir),
      el("td", {}, r.goal.slice(0, 120)),
      el("td", {}, status(r.status)),
      el("td", { class: "num iterations" }, r.iterations + "/" + (r.max_iters ?? "?")),
      el("td", { class: "num" }, money(r.cost_usd)),
      el("td", { class: "muted" }, age(r.started_at)),
      el("td", {}, r.live ? el("span", { class: "live-dot", title: "running" }, "●") : "")));
  app.replaceChildren(
    ...drawFleets(fleets),
    el("h1", {}, "Runs"),
    runs.length ? el("table", { id: "runs" },
      el("thead", {}, el("tr", {}, ["run", "project", "goal", "status", "iterations", "cost", "started", "live"].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows))
      : el("p", { id: "no-runs", class: "muted" }, "No runs yet: start one with loope run."));
}

function runsPage() {
  getJSON("/api/runs").then((d) => drawRuns(d.runs, d.fleets));
  const source = new EventSource("/api/events");
  connected(source);
  source.addEventListener("runs", (e) => { const d = JSON.parse(e.data); drawRuns(d.runs, d.fleets); });
}

// -- one run ----------------------------------------------------------------------------------------

const runUrl = () => "/api/runs/" + encodeURIComponent(body.dataset.project) + "/" + encodeURIComponent(body.dataset.run);
let opened = null; // the step directory whose records are open
let said = ""; // the answer to the last Stop, kept across redraws

async function stop(now) {
  const response = await fetch(runUrl() + "/stop", {
    method: "POST",
    headers: { "content-type": "application/json", "x-loope-token": TOKEN },
    body: JSON.stringify({ now }),
  });
  const answer = await response.json().catch(() => ({}));
  said = answer.detail || answer.error || String(response.status);
  document.getElementById("message").textContent = said;
}

function header(d) {
  const v = d.view;
  const total = d.max_iters || v.max_iters || 0;
  const pct = total ? Math.min(100, (100 * d.iterations) / total) : 0;
  const cap = v.budgets && v.budgets.cost_usd;
  return [
    el("h1", {}, d.id, " ", status(d.status)),
    el("div", { class: "muted" }, d.goal),
    el("div", { class: "summary" },
      el("span", {}, "iteration ", el("b", { id: "iteration" }, d.iterations + "/" + (total || "?")), " ",
        el("span", { class: "bar" }, el("span", { style: "width:" + pct + "%" }))),
      el("span", {}, "elapsed ", el("b", {}, duration(v.elapsed_s))),
      el("span", {}, "cost ", el("b", { id: "cost" }, money(v.cost_usd) + (cap ? " of $" + Number(cap).toFixed(2) : ""))),
      el("span", {}, "tokens ", el("b", {}, v.tokens)),
      d.live ? el("span", {},
        el("button", { id: "stop", class: "danger", onclick: () => stop(false) }, "Stop"), " ",
        el("button", { id: "stop-now", class: "danger", onclick: () => stop(true) }, "Stop now"),
        el("span", { id: "message", class: "muted" }, said)) : null),
  ];
}

function nowPanel(v) {
  if (!v.running.length && !v.wait) return null;
  return [el("h2", {}, "Now"),
    v.running.map((s) => el("div", { class: "panel now" }, el("b", {}, s.label),
      s.action ? el("div", { class: "muted" }, s.action) : null,
      s.message ? el("div", {}, "» " + s.message) : null)),
    v.wait ? el("div", { class: "panel" }, "waiting: " + JSON.stringify(v.wait)) : null];
}

function gatePanel(v) {
  const g = v.gate;
  if (!g) return null;
  const head = g.passed ? el("b", { class: "passed" }, "passed")
    : el("b", { class: "failed" }, (g.timed_out ? "timed out" : "failed (exit " + g.exit_code + ")") +
      (g.failing ? ": failing " + (g.previous_failing ? g.previous_failing + " → " : "") + g.failing : ""));
  return [el("h2", {}, "Gate (iteration " + g.iteration + ")"),
    el("div", { class: "panel", id: "gate" }, head,
      g.summary ? el("div", { class: "muted" }, g.summary) : null,
      g.failures.map((f) => el("div", { class: "failure" }, "✗ ", el("code", {}, f.test), f.message ? " — " + f.message : "")),
      g.output_tail.length ? el("pre", { class: "scroll" }, g.output_tail.join("\n")) : null)];
}

function findingsPanel(v) {
  const parts = [];
  if (v.reviews.length) {
    parts.push(el("h2", {}, "Reviews"), v.reviews.map((r) => el("div", { class: "panel" },
      el("b", {}, r.label), " ", el("span", { class: r.verdict || "" }, r.verdict || "no verdict"),
      r.findings.map((line) => el("div", { class: "finding" }, line)))));
  }
  if (v.violations.length) {
    parts.push(el("h2", {}, "Undone by the guard"), el("div", { class: "panel" }, v.violations.map((x) => el("div", {}, "⚠ " + x))));
  }
  return parts;
}

function candidatesPanel(d) {
  const rounds = d.record.rounds || [];
  if (!rounds.length) return null;
  const r = rounds[rounds.length - 1];
  const gate = (c) => c.gate_passed === true ? "passed" : c.gate_passed === false ? "failed" : "-";
  const rows = r.candidates.map((c) => el("tr", { class: "candidate" + (c.candidate === r.winner ? " winner" : ""), "data-candidate": String(c.candidate) },
    el("td", {}, (c.candidate === r.winner ? "★ " : "") + r.iteration + "." + c.candidate), el("td", {}, c.agent),
    el("td", { class: gate(c) }, gate(c)), el("td", { class: "num" }, c.score === null ? "" : String(c.score)),
    el("td", { class: "num" }, String(c.diff_lines)), el("td", { class: "num" }, money(c.cost_usd)), el("td", {}, c.why)));
  return [el("h2", {}, "Candidates (iteration " + r.iteration + ")"), el("table", { id: "candidates" },
    el("thead", {}, el("tr", {}, ["candidate", "agent", "gate", "score", "lines", "cost", "why"].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows))];
}

function timeline(d) {
  const rows = [];
  let iteration = null;
  const steps = (d.record.steps || []).concat(d.view.running.map((s) => ({
    id: s.step, iteration: s.iteration, role: s.role, adapter: s.adapter, running: true, dir: s.dir, candidate: s.candidate })));
  for (const s of steps) {
    if (s.iteration !== iteration) {
      iteration = s.iteration;
      rows.push(el("tr", { class: "iter" }, el("td", { colspan: 7 }, iteration === 0 ? "Before iteration 1" : "Iteration " + iteration)));
    }
    const result = s.running ? "running…" : s.ok === false ? "failed: " + (s.error || "") :
      s.gate_passed === true ? "passed" : s.gate_passed === false ? "failed" : s.score !== undefined && s.score !== null ? "score " + s.score : "ok";
    const dir = (s.dir || "").split("/").pop();
    rows.push(el("tr", { class: "step", "data-step": dir, onclick: () => openStep(dir) },
      el("td", {}, String(s.id).padStart(2, "0")), el("td", {}, s.role + " " + s.adapter + (s.candidate ? " c" + s.candidate : "")),
      el("td", { class: result.split(" ")[0].replace(/[:…]/g, "") }, result),
      el("td", { class: s.verdict || "" }, s.verdict || ""),
      el("td", { class: "num" }, s.duration_s !== undefined ? s.duration_s.toFixed(1) + "s" : ""),
      el("td", { class: "num" }, s.cost_usd ? money(s.cost_usd) : ""),
      el("td", {}, (s.changed_files || []).join(", "))));
  }
  return [el("h2", {}, "Timeline"), el("table", { id: "timeline" },
    el("thead", {}, el("tr", {}, ["step", "agent", "result", "verdict", "time", "cost", "changed"].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows)), el("div", { id: "step" })];
}

async function openStep(dir) {
  opened = dir;
  const holder = document.getElementById("step");
  const listing = await getJSON(runUrl() + "/steps/" + encodeURIComponent(dir));
  const view = el("div", { class: "panel", id: "step-file" });
  const tabs = listing.files.map((name) => el("button", { onclick: (e) => {
    for (const b of tabs) b.classList.remove("on");
    e.target.classList.add("on");
    loadFile(dir, name, 0, view, true);
  } }, name));
  holder.replaceChildren(el("h2", {}, "Step " + dir), el("div", { class: "tabs" }, tabs), view);
  if (tabs.length) tabs[0].click();
}

async function loadFile(dir, name, offset, view, fresh) {
  const page = await getJSON(runUrl() + "/steps/" + encodeURIComponent(dir) + "/" + encodeURIComponent(name) + "?offset=" + offset);
  if (fresh) view.replaceChildren(el("pre", { class: "scroll", "data-file": name }));
  view.querySelector("pre").append(page.text);
  const more = view.querySelector("button.more");
  if (more) more.remove();
  if (page.next_offset !== null) {
    view.append(el("button", { class: "more", onclick: () => loadFile(dir, name, page.next_offset, view, false) },
      "more (" + (page.total - page.next_offset) + " bytes left)"));
  }
}

function chart(m) {
  const points = m.attempts.filter((a) => a.score !== null);
  if (!m.enabled) return null;
  const W = 640, H = 220, P = 36;
  const values = points.map((a) => a.score).concat([m.baseline, m.target].filter((x) => x !== null && x !== undefined));
  if (!values.length) return [el("h2", {}, "Score"), el("p", { class: "muted" }, "no score yet")];
  let lo = Math.min(...values), hi = Math.max(...values);
  if (lo === hi) { lo -= 1; hi += 1; }
  const n = Math.max(1, ...m.attempts.map((a) => a.iteration));
  const x = (i) => P + (W - 2 * P) * (n > 1 ? (i - 1) / (n - 1) : 0.5);
  const y = (v) => H - P - ((H - 2 * P) * (v - lo)) / (hi - lo);
  const parts = [svg("line", { x1: P, y1: H - P, x2: W - P, y2: H - P, stroke: "#ccc" })];
  const hline = (v, cls, label) => {
    if (v === null || v === undefined) return;
    parts.push(svg("line", { class: cls, x1: P, x2: W - P, y1: y(v), y2: y(v) }),
      svg("text", { x: W - P + 2, y: y(v) + 4 }, label + " " + v));
  };
  hline(m.baseline, "baseline", "baseline");
  hline(m.target, "target", "target");
  const better = (a, b) => (m.direction === "higher" ? a > b : a < b);
  let best = m.baseline;
  const bestLine = [];
  for (const a of m.attempts) {
    if (a.score !== null && (a.verdict === "kept" || a.verdict === "converged") && (best === null || best === undefined || better(a.score, best) || a.score === best)) best = a.score;
    if (best !== null && best !== undefined) bestLine.push(x(a.iteration) + "," + y(best));
  }
  if (bestLine.length) parts.push(svg("polyline", { class: "best", points: bestLine.join(" ") }));
  for (const a of points) {
    parts.push(svg("circle", { class: "mark " + a.verdict, cx: x(a.iteration), cy: y(a.score), r: 5, "data-iteration": a.iteration },
      svg("title", {}, "attempt " + a.iteration + ": " + a.score + " (" + a.verdict + ")")));
    parts.push(svg("text", { x: x(a.iteration) - 3, y: H - P + 14 }, String(a.iteration)));
  }
  return [el("h2", {}, "Score per attempt"),
    svg("svg", { class: "chart", id: "chart", width: W + 40, height: H, viewBox: "0 0 " + (W + 40) + " " + H }, parts),
    el("div", { class: "muted" }, el("span", { class: "kept" }, "● kept"), "   ", el("span", { class: "reverted" }, "● reverted"), "   — best   - - baseline / target")];
}

function diffView(text) {
  const pre = el("pre", { class: "diff scroll", id: "diff" });
  for (const line of text.split("\n")) {
    const cls = line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ") ? "file"
      : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : "";
    pre.append(el("div", { class: cls }, line || " "));
  }
  return [el("h2", {}, "Changes"), text.trim() ? pre : el("p", { class: "muted" }, "no changes yet")];
}

async function drawRun() {
  const [d, diff] = await Promise.all([getJSON(runUrl()), fetch(runUrl() + "/diff").then((r) => r.text())]);
  const scroll = window.scrollY;
  const step = document.getElementById("step");
  const parts = [
    header(d), nowPanel(d.view), gatePanel(d.view), findingsPanel(d.view), candidatesPanel(d), chart(d.metric), timeline(d),
    diffView(diff), el("h2", {}, "State file"), el("div", { class: "panel" }, el("pre", { id: "state" }, d.state_file || "(none)")),
  ];
  app.replaceChildren(...parts.flat(3).filter((x) => x));
  if (opened && step) document.getElementById("step").replaceWith(step);
  window.scrollTo(0, scroll);
  body.dataset.drawn = String(d.events_offset);
  return d.events_offset;
}

function runPage() {
  let pending = null;
  const refresh = () => { if (!pending) pending = setTimeout(() => { pending = null; drawRun(); }, 250); };
  drawRun().then((offset) => {
    const source = new EventSource(runUrl() + "/events?offset=" + offset); // only what comes after this drawing
    connected(source);
    source.addEventListener("loope", refresh);
  });
}

if (body.dataset.page === "run") runPage(); else runsPage();
