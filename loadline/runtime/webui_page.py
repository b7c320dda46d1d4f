"""The live LLM page (/loadline/live) and the script injected into Locust's page (/loadline/ui.js).

Self-contained: the charts are drawn on <canvas> by the small script below (no CDN, no bundle: the
machines have no internet, and the echarts inside Locust's bundle is not reachable on its own).
The look follows Locust's Charts tab (locust/webui: echarts, 300 px high, title top left, round
legend icons, its colours and its light / dark palettes, refreshed every 2 s); the theme follows
Locust's own switch (localStorage.theme, else the system's preference).
"""

LIVE_HTML = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Loadline: live LLM charts</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 :root { --bg:#fff; --panel:#fff; --text:#000; --muted:#555; --axis:#000; --split:#ddd; --border:#e0e0e0;
         --pass:#00a152; --fail:#d32f2f; --nj:#9e9e9e; --band:rgba(0,0,0,0.035); --link:#15803d; }
 body.dark { --bg:#121212; --panel:#27272a; --text:#b3c3bc; --muted:#8fa39a; --axis:#5b6f66; --split:#4c4c52;
             --border:#3a3a3f; --band:rgba(255,255,255,0.05); --link:#4ade80; }
 body { margin:0; padding:12px; background:var(--bg); color:var(--text); font:14px Roboto, Helvetica, Arial, sans-serif; }
 a, a:visited { color:var(--link); }
 .bar { display:flex; flex-wrap:wrap; gap:8px 20px; align-items:center; margin-bottom:10px; }
 .bar .item b { font-weight:600; }
 .btn { border:1px solid var(--link); border-radius:4px; padding:4px 10px; text-decoration:none; font-weight:500; }
 .panel { background:var(--panel); border:1px solid var(--border); border-radius:4px; padding:8px 12px; margin-bottom:10px; }
 table.slo { border-collapse:collapse; }
 table.slo td, table.slo th { padding:3px 12px 3px 0; text-align:left; }
 .chip { display:inline-block; min-width:64px; text-align:center; border-radius:10px; padding:1px 8px; color:#fff; font-weight:600; }
 .chip.pass { background:var(--pass); } .chip.fail { background:var(--fail); } .chip.nj { background:var(--nj); }
 .grid { display:grid; grid-template-columns:repeat(auto-fit, minmax(560px, 1fr)); gap:10px; }
 .chart { background:var(--panel); border:1px solid var(--border); border-radius:4px; position:relative; }
 canvas { display:block; width:100%; height:300px; }
 .muted { color:var(--muted); }
 #stopreason { color:var(--fail); font-weight:600; }
</style></head>
<body>
<div class="bar">
  <span class="item" id="phase">Phase: -</span>
  <span class="item" id="users">Users: -</span>
  <span class="item muted" id="clock"></span>
  <a class="btn" id="report" href="./report" target="_blank">Open the report</a>
  <a class="btn" href="./requests.csv">requests.csv</a>
  <a class="btn" href="./run.zip">Run folder (zip)</a>
</div>
<div class="panel" id="slopanel">
  <div><b>SLO as it stands</b> <span class="muted" id="slofile"></span></div>
  <table class="slo" id="slo"><tbody></tbody></table>
  <div class="muted" id="notapplied"></div>
  <div id="stoprule" class="muted"></div>
  <div id="stopreason"></div>
</div>
<div class="grid" id="charts"></div>
<script>
"use strict";
const COLORS = { p50:"#ff9f00", p95:"#9966CC", p99:"#8A2BE2", rps:"#00ca5a", fail:"#ff6d6d", users:"#0099ff",
                 tokens:"#0099ff", slo:"#d32f2f" };
const ERROR_COLORS = ["#ff6d6d", "#ff9f00", "#8E4585", "#d32f2f", "#C8A2C8", "#9966CC", "#5b6f66"];
const CHARTS = [
  { id:"ttft", title:"Time to first token (ms)", lines:[["ttft_p50_ms","TTFT P50",COLORS.p50],["ttft_p95_ms","TTFT P95",COLORS.p95],["ttft_p99_ms","TTFT P99",COLORS.p99]],
    slo:["ttft_p95_ms","ttft_p99_ms"] },
  { id:"itl", title:"Inter-token latency, every gap pooled (ms)", lines:[["itl_pooled_p50_ms","ITL P50",COLORS.p50],["itl_p99_ms","ITL P99",COLORS.p99]],
    slo:["itl_p95_ms","itl_p99_ms"] },
  { id:"e2e", title:"End-to-end time (ms)", lines:[["e2e_p95_ms","E2E P95",COLORS.p95]], slo:["e2e_p95_ms"] },
  { id:"tokens", title:"Output tokens/s and requests/s", lines:[["output_tokens_per_s","Output tokens/s",COLORS.tokens],["rps","Requests/s (ok, right axis)",COLORS.rps,"right"]] },
  { id:"users", title:"Number of users", lines:[["users","Users",COLORS.users]] },
  { id:"errors", title:"Errors/s by class", errors:true, lines:[] },
];
const SLO_NAMES = { ttft_p95_ms:"TTFT P95", ttft_p99_ms:"TTFT P99", itl_p95_ms:"ITL P95", itl_p99_ms:"ITL P99",
                    e2e_p95_ms:"E2E P95" };
let series = { points:[], phases:[], scale:1 }, status = null;

function isDark() {
  const t = localStorage.theme;
  return t === "dark" || (!t && window.matchMedia("(prefers-color-scheme: dark)").matches);
}
function applyTheme() { document.body.classList.toggle("dark", isDark()); draw(); }
window.addEventListener("storage", e => { if (e.key === "theme") applyTheme(); });

const grid = document.getElementById("charts");
for (const c of CHARTS) {
  const box = document.createElement("div"); box.className = "chart";
  const canvas = document.createElement("canvas"); canvas.id = "chart-" + c.id;
  canvas.setAttribute("data-points", "0"); canvas.setAttribute("data-phase-markers", "0");
  box.appendChild(canvas); grid.appendChild(box); c.canvas = canvas;
}

function css(name) { return getComputedStyle(document.body).getPropertyValue(name).trim(); }
function fmtTime(s) {
  s = Math.max(0, Math.round(s)); const h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60), x = s % 60;
  return (h ? h + ":" + String(m).padStart(2, "0") : m) + ":" + String(x).padStart(2, "0");
}
function fmtNum(v) {
  if (v === null || v === undefined) return "-";
  return Math.abs(v) >= 100 ? Math.round(v).toLocaleString("en") : (Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2));
}
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v))), n = v / p;
  return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 2.5 ? 2.5 : n <= 5 ? 5 : 10) * p;
}

function linesOf(c) {
  if (!c.errors) return c.lines;
  const classes = new Set();
  for (const p of series.points) for (const k in (p.errors_per_s || {})) classes.add(k);
  return [...classes].sort().map((k, i) => ["errors:" + k, k, ERROR_COLORS[i % ERROR_COLORS.length]]);
}
function valueOf(p, key) {
  if (key.startsWith("errors:")) return (p.errors_per_s || {})[key.slice(7)] || 0;
  const v = p[key]; return v === undefined ? null : v;
}
function sloLines(c) {
  const limits = (status && status.slo && status.slo.limits) || {};
  return (c.slo || []).filter(k => limits[k] !== undefined).map(k => [k, limits[k]]);
}

function drawChart(c) {
  const canvas = c.canvas, dpr = window.devicePixelRatio || 1;
  const W = canvas.clientWidth, H = canvas.clientHeight;
  canvas.width = W * dpr; canvas.height = H * dpr;
  const g = canvas.getContext("2d"); g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.fillStyle = css("--panel"); g.fillRect(0, 0, W, H);
  const pts = series.points, lines = linesOf(c), limits = sloLines(c);
  const right = lines.some(l => l[3] === "right");
  const L = 64, R = right ? 64 : 24, T = 58, B = 34, pw = W - L - R, ph = H - T - B;
  const text = css("--text");
  g.font = "bold 15px Roboto, Arial, sans-serif"; g.fillStyle = text; g.textBaseline = "top";
  g.fillText(c.title, 10, 8);
  // legend: round icons, like Locust's
  g.font = "12px Roboto, Arial, sans-serif"; let lx = 10;
  const legend = lines.map(l => [l[1], l[2], false]).concat(limits.map(([k, v]) => ["SLO " + SLO_NAMES[k] + " ≤ " + fmtNum(v) + " ms", COLORS.slo, true]));
  for (const [name, color, dashed] of legend) {
    g.fillStyle = color; g.strokeStyle = color;
    if (dashed) { g.setLineDash([5, 3]); g.beginPath(); g.moveTo(lx, 38); g.lineTo(lx + 14, 38); g.stroke(); g.setLineDash([]); }
    else { g.beginPath(); g.arc(lx + 6, 38, 5, 0, 2 * Math.PI); g.fill(); }
    g.fillStyle = text; g.fillText(name, lx + 18, 32); lx += g.measureText(name).width + 34;
  }
  const t0 = pts.length ? Math.max(0, pts[0].t - (series.sample_s || 2) * scaleOf()) : 0;
  const t1 = pts.length ? Math.max(pts[pts.length - 1].t, t0 + 1) : 60;
  const x = t => L + (t - t0) / (t1 - t0) * pw;
  let maxL = 0, maxR = 0;
  for (const p of pts) for (const l of lines) { const v = valueOf(p, l[0]); if (v !== null) { if (l[3] === "right") maxR = Math.max(maxR, v); else maxL = Math.max(maxL, v); } }
  // an SLO line sets the scale unless it is far above the data (then it is named at the top edge)
  const shown = limits.filter(([, v]) => !maxL || v <= 3 * maxL);
  for (const [, v] of shown) maxL = Math.max(maxL, v);
  const yL = niceMax(maxL * 1.1), yR = niceMax(maxR * 1.1);
  const y = (v, top) => T + ph - v / top * ph;
  // phase bands and markers
  let markers = 0;
  (series.phases || []).forEach((s, i) => {
    const a = Math.max(s.start_t, t0), b = Math.min(s.end_t === null ? t1 : s.end_t, t1);
    if (b <= t0 || a >= t1) return;
    if (i % 2 === 0) { g.fillStyle = css("--band"); g.fillRect(x(a), T, x(b) - x(a), ph); }
    if (s.start_t >= t0) {
      g.strokeStyle = css("--axis"); g.setLineDash([2, 3]); g.beginPath(); g.moveTo(x(s.start_t), T); g.lineTo(x(s.start_t), T + ph); g.stroke(); g.setLineDash([]);
    }
    markers++;
    g.save(); g.beginPath(); g.rect(x(a), T, Math.max(0, x(b) - x(a)), ph); g.clip();
    g.fillStyle = css("--muted"); g.font = "11px Roboto, Arial, sans-serif"; g.fillText(s.label, x(a) + 3, T + 3); g.restore();
  });
  // axes and split lines
  g.font = "12px Roboto, Arial, sans-serif"; g.textBaseline = "middle";
  for (let i = 0; i <= 4; i++) {
    const v = yL * i / 4, yy = y(v, yL);
    g.strokeStyle = css("--split"); g.beginPath(); g.moveTo(L, yy); g.lineTo(L + pw, yy); g.stroke();
    g.fillStyle = text; g.textAlign = "right"; g.fillText(fmtNum(v), L - 6, yy);
    if (right) { g.textAlign = "left"; g.fillText(fmtNum(yR * i / 4), L + pw + 6, yy); }
  }
  g.strokeStyle = css("--axis"); g.beginPath(); g.moveTo(L, T + ph); g.lineTo(L + pw, T + ph); g.stroke();
  g.textAlign = "center"; g.textBaseline = "top"; g.fillStyle = text;
  const ticks = W < 700 ? 4 : 7;
  for (let i = 0; i <= ticks; i++) { const t = t0 + (t1 - t0) * i / ticks; g.fillText(fmtTime(t), x(t), T + ph + 6); }
  g.textAlign = "right"; g.fillStyle = css("--muted");
  const axis = axisLabel(); canvas.setAttribute("data-axis", axis);
  g.fillText(axis, L + pw, T + ph + 20);
  g.textAlign = "left";
  // the series
  for (const l of lines) {
    const top = l[3] === "right" ? yR : yL;
    g.strokeStyle = l[2]; g.lineWidth = 2; g.beginPath(); let pen = false;
    for (const p of pts) {
      const v = valueOf(p, l[0]);
      if (v === null) { pen = false; continue; }
      pen ? g.lineTo(x(p.t), y(v, top)) : g.moveTo(x(p.t), y(v, top)); pen = true;
    }
    g.stroke(); g.lineWidth = 1;
  }
  // SLO limits
  let above = 0;
  for (const [k, v] of limits) {
    g.strokeStyle = COLORS.slo; g.fillStyle = COLORS.slo; g.lineWidth = 1.5; g.setLineDash([6, 4]);
    if (shown.some(s => s[0] === k)) {
      const yy = y(v, yL); g.beginPath(); g.moveTo(L, yy); g.lineTo(L + pw, yy); g.stroke();
      label(g, "SLO " + SLO_NAMES[k], L + pw - 2, yy - 2);
    } else { label(g, "SLO " + SLO_NAMES[k] + " " + fmtNum(v) + " ms (above)", L + pw - 2, T + 30 + 15 * above++); }
    g.setLineDash([]); g.lineWidth = 1;
  }
  if (!pts.length) { g.fillStyle = css("--muted"); g.textAlign = "center"; g.fillText("waiting for a run…", L + pw / 2, T + ph / 2); g.textAlign = "left"; }
  canvas.setAttribute("data-points", String(pts.length));
  canvas.setAttribute("data-phase-markers", String(markers));
}

function scaleOf() { const s = Number(series.scale); return s > 0 ? s : 1; }  // before a run: 1, never "undefined"
function axisLabel() { const s = scaleOf(); return s !== 1 ? "model time (×" + s + ")" : "time since start"; }

function label(g, text, right, bottom) {
  // right-aligned text on a panel-coloured box: readable over the lines it sits on
  g.font = "12px Roboto, Arial, sans-serif"; const w = g.measureText(text).width;
  g.fillStyle = css("--panel"); g.globalAlpha = 0.85; g.fillRect(right - w - 4, bottom - 14, w + 6, 15); g.globalAlpha = 1;
  g.fillStyle = COLORS.slo; g.textAlign = "right"; g.textBaseline = "bottom"; g.fillText(text, right, bottom); g.textAlign = "left";
}
function draw() { for (const c of CHARTS) drawChart(c); postHeight(); }
function postHeight() { if (window.parent !== window) window.parent.postMessage({ loadlineHeight: document.body.scrollHeight + 20 }, "*"); }

function showStatus() {
  if (!status) return;
  const ph = status.phase;
  document.getElementById("phase").innerHTML = ph ? "Phase <b>" + ph.index + "/" + ph.of + ": " + esc(ph.label) + "</b>, " + fmtTime(ph.left_s) + " left" + (status.scale !== 1 ? " (model time)" : "") : "Phase: -";
  document.getElementById("users").innerHTML = "Users: <b>" + status.users + "</b>";
  document.getElementById("clock").textContent = (status.running ? "running" : (status.ended ? "stopped" : status.state)) + ", " + status.requests_recorded.toLocaleString("en") + " requests recorded";
  const slo = status.slo, body = document.querySelector("#slo tbody");
  document.getElementById("slofile").textContent = slo.error ? "" : "(" + slo.file + "; last " + status.window_s + " s)";
  let rows = slo.error ? "<tr><td class='chip fail'>" + esc(slo.error) + "</td></tr>" : "";
  for (const c of slo.checks) {
    const cls = c.outcome === "pass" ? "pass" : c.outcome === "fail" ? "fail" : "nj";
    rows += "<tr data-key='" + c.key + "' data-outcome='" + c.outcome + "'><td>" + esc(c.name) + "</td><td>" + esc(c.threshold) + "</td><td>" + esc(c.value) + "</td><td><span class='chip " + cls + "'>" + c.outcome + "</span></td></tr>";
  }
  body.innerHTML = rows;
  document.getElementById("notapplied").textContent = slo.not_applied.length ? "Not applied: " + slo.not_applied.map(n => n.name).join(", ") + " (" + slo.not_applied[0].why + ")" : "";
  const rule = status.stop_rule;
  document.getElementById("stoprule").textContent = !rule ? "" : !rule.enabled ? "Stepped stop rule: off (--step-stop-on-slo false: every step runs)" :
    "Stepped stop rule: on (errors ≤ " + (rule.max_error_rate * 100).toFixed(1) + " %, ≥ " + rule.min_requests + " requests per step)" +
    (rule.verdicts.length ? "; " + rule.verdicts.map(v => v.phase + ": " + v.verdict).join("; ") : "; no step judged yet");
  document.getElementById("stopreason").textContent = status.start_refused ? "Could not start: " + status.start_refused :
    status.stop_reason ? "Stopped: " + status.stop_reason : status.ended_by === "user" ? "Stopped by the user (STOP)" : "";
}
function esc(s) { return String(s).replace(/[&<>'"]/g, ch => ({ "&":"&amp;", "<":"&lt;", ">":"&gt;", "'":"&#39;", '"':"&quot;" })[ch]); }

const MAX_POINTS = 5000;  // the page's own bound: beyond it the older half is thinned (one in two)
async function refresh() {
  try {
    // only what changed: the points after the last settled one we have (a new run: everything)
    const settled = series.points.filter(p => p.settled);
    const since = settled.length ? settled[settled.length - 1].t : null;
    const [s, st] = await Promise.all([
      fetch("./series" + (since === null ? "" : "?since=" + since)).then(r => r.json()),
      fetch("./status").then(r => r.json())]);
    if (since !== null && s.started_wall === series.started_wall) {
      s.points = series.points.filter(p => p.t <= since).concat(s.points);
    } else if (since !== null) {
      return refreshAll();  // another run started: its whole history
    }
    if (s.points.length > MAX_POINTS) {
      const half = Math.floor(s.points.length / 2);
      s.points = s.points.slice(0, half).filter((p, i) => i % 2 === 0).concat(s.points.slice(half));
    }
    series = s; status = st; showStatus(); draw();
  } catch (e) { /* the master stopped or restarts: try again at the next tick */ }
}
function refreshAll() { series = { points:[], phases:[], scale:1 }; return refresh(); }
window.addEventListener("resize", draw);
applyTheme(); refresh(); setInterval(refresh, 2000);
</script></body></html>
"""

UI_JS = r"""// Loadline additions to Locust's page: the live view inside the LLM tab, shape summaries in the picker,
// the custom parameters in groups.
(function () {
  "use strict";
  const SHAPES = __SHAPE_SUMMARIES__;
  const GROUPS = __FORM_GROUPS__;
  let frame = null;
  window.addEventListener("message", e => {
    if (frame && e.source === frame.contentWindow && e.data && e.data.loadlineHeight) frame.style.height = e.data.loadlineHeight + "px";
  });
  function llmTab() {
    const onLlm = new URLSearchParams(location.search).get("tab") === "llm";
    if (!onLlm) { if (frame) { frame.remove(); frame = null; } return; }
    if (frame && document.body.contains(frame)) return;
    // the LLM tab's own table (its "Whole run" column), not the start form's class picker table
    const table = [...document.querySelectorAll("table")].find(t => (t.tHead && t.tHead.textContent || "").includes("Whole run"));
    if (!table) return;
    const anchor = table.closest(".MuiTableContainer-root, .MuiPaper-root") || table;
    frame = document.createElement("iframe");
    frame.id = "loadline-live"; frame.src = "./loadline/live"; frame.title = "Loadline live LLM charts";
    frame.style.cssText = "width:100%;height:1300px;border:0;display:block;margin-bottom:12px";
    anchor.parentNode.insertBefore(frame, anchor);
  }
  function shapePicker() {
    // Locust's picker is a native <select>: each shape's option gets its summary, and the chosen
    // shape's summary is shown under the picker
    const select = document.querySelector("select[name=shapeClass]");
    if (!select) return;
    for (const option of select.options) {
      const text = SHAPES[option.value];
      if (!text || option.dataset.loadline) continue;
      option.dataset.loadline = "1"; option.title = text; option.textContent = option.value + ": " + text;
    }
    const box = select.closest(".MuiFormControl-root") || select.parentNode;
    let help = box.parentNode.querySelector(".loadline-shape-help");
    if (!help) {
      help = document.createElement("p"); help.className = "loadline-shape-help";
      help.style.cssText = "font-size:0.8em;opacity:0.75;margin:4px 0 0 14px";
      box.parentNode.insertBefore(help, box.nextSibling);
    }
    help.textContent = SHAPES[select.value] || "";
  }
  function formGroups() {
    // "Custom parameters" in groups with headings (webui_form.py): CSS order in Locust's flex column
    const wrap = el => el.closest(".MuiFormControl-root, .MuiFormControlLabel-root");
    const fields = Object.entries(GROUPS).map(([name, g]) => [document.querySelector("[name='" + name + "']"), g])
      .filter(([el]) => el && wrap(el));
    if (!fields.length) return;
    const container = wrap(fields[0][0]).parentNode;
    if (container.dataset.loadlineGrouped || fields.some(([el]) => wrap(el).parentNode !== container)) return;
    const headings = new Map();
    for (const [el, g] of fields) {
      wrap(el).style.order = g.order;
      headings.set(g.group, g.base);
    }
    for (const [title, base] of headings) {
      const h = document.createElement("div");
      h.className = "loadline-group"; h.textContent = title;
      h.style.cssText = "order:" + base + ";font-weight:600;margin-top:12px;opacity:0.85";
      container.appendChild(h);
    }
    container.dataset.loadlineGrouped = "1";
  }
  setInterval(() => { try { llmTab(); shapePicker(); formGroups(); } catch (e) { /* Locust's page changed shape: leave it be */ } }, 700);
})();
"""
