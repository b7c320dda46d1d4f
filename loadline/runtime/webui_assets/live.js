// The live LLM page (/loadline/live): charts drawn on <canvas> (no CDN, no bundle: the machines have no
// internet, and the echarts inside Locust's bundle is not reachable on its own), the SLO panel, every 2 s.
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
