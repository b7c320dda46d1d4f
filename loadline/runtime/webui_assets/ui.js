// Loadline additions to Locust's page: the live view inside the LLM tab, shape summaries in the picker,
// the custom parameters in groups.
(function () {
  "use strict";
  // filled in by the server (loadline/runtime/webui_live.py): shape name -> summary, form field -> group
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
    const text = SHAPES[select.value] || "";
    if (help.textContent !== text) help.textContent = text;  // unchanged: no mutation, no new observer call
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
  function decorate() {
    try { llmTab(); shapePicker(); formGroups(); } catch (e) { /* Locust's page changed shape: leave it be */ }
  }
  // Right after each React render, before the browser paints or takes the next click: on a timer alone
  // the form moved up to 0.7 s after it appeared (the shape's summary pushes what is below it down),
  // under a pointer already aimed at "Custom parameters".
  new MutationObserver(decorate).observe(document.body, { childList: true, subtree: true });
  document.addEventListener("change", decorate, true);  // a shape picked: its summary, at once
  setInterval(decorate, 700);  // the LLM tab follows the URL (?tab=llm), which no DOM change announces
  decorate();
})();
