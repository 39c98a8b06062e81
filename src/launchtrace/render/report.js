// launchtrace report: draws the charts and the timeline from the JSON data island.
// Every string from a trace goes through textContent (never innerHTML); no network, no eval.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("launchtrace-data").textContent);
  const SVGNS = "http://www.w3.org/2000/svg";
  const tip = document.getElementById("tip");

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function svg(tag, attrs) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }
  // A duration in ns for people: "850 ns", "12.3 us", "4.56 ms", "1.23 s".
  function dur(ns) {
    const a = Math.abs(ns);
    if (a < 1e3) return ns.toFixed(0) + " ns";
    if (a < 1e6) return (ns / 1e3).toPrecision(3) + " us";
    if (a < 1e9) return (ns / 1e6).toPrecision(3) + " ms";
    return (ns / 1e9).toPrecision(3) + " s";
  }
  // A tick's label with as many decimals as its step needs: zoomed into 7.14-7.18 s in steps of 5 ms the ticks
  // read 7.145 s, 7.150 s, ... (dur()'s three significant digits would repeat 7.15 s).
  function tickLabel(v, step) {
    const a = Math.abs(v);
    const [scale, unit] = a < 1e3 ? [1, " ns"] : a < 1e6 ? [1e3, " us"] : a < 1e9 ? [1e6, " ms"] : [1e9, " s"];
    const digits = Math.min(9, Math.max(0, Math.ceil(-Math.log10(step / scale) - 1e-9)));
    return (v / scale).toFixed(digits) + unit;
  }
  // Round tick steps (1, 2, 5 x 10^k) giving about `want` ticks over [t0, t1].
  function ticks(t0, t1, want) {
    const span = Math.max(t1 - t0, 1e-9);
    const raw = span / want;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= raw) || 10 * mag;
    const out = [];
    for (let t = Math.ceil(t0 / step) * step; t <= t1 + step * 1e-9; t += step) out.push(t);
    return { step, values: out };
  }
  function showTip(ev, rows) {
    tip.replaceChildren();
    const table = el("table");
    for (const [k, v] of rows) {
      const tr = table.insertRow();
      tr.insertCell().textContent = k; tr.cells[0].className = "k";
      tr.insertCell().textContent = v;
    }
    tip.appendChild(table);
    tip.style.display = "block";
    tip.style.left = Math.max(0, Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8)) + "px";
    tip.style.top = Math.min(ev.clientY + 14, window.innerHeight - tip.offsetHeight - 8) + "px";
  }
  function hideTip() { tip.style.display = "none"; }

  // ---- step durations -------------------------------------------------------------------------------------
  const COLORS = ["#3465a4", "#cc6633", "#4e9a06", "#75507b", "#c4a000", "#06989a", "#a40000", "#555753"];
  function drawSteps() {
    const root = document.getElementById("steps-chart");
    const steps = data.steps;
    if (!steps.length) { root.appendChild(el("p", "note", "no scopes in these traces")); return; }
    const names = [...new Set(steps.map(s => s.n))];
    const W = 900, H = 220, L = 70, R = 12, T = 12, B = 34;
    const box = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "steps", role: "img" });
    const maxD = Math.max(...steps.map(s => s.d), 1);
    const x = i => L + (steps.length > 1 ? i * (W - L - R) / (steps.length - 1) : (W - L - R) / 2);
    const y = d => H - B - d / maxD * (H - T - B);
    const yt = ticks(0, maxD, 4);
    for (const v of yt.values) {
      box.appendChild(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
      const t = svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "tick-label" });
      t.textContent = dur(v); box.appendChild(t);
    }
    const xt = ticks(0, Math.max(steps.length - 1, 1), 8);
    for (const v of xt.values) {
      if (v !== Math.round(v) || v >= steps.length) continue;
      const t = svg("text", { x: x(v), y: H - B + 16, "text-anchor": "middle", class: "tick-label" });
      t.textContent = String(v); box.appendChild(t);
    }
    const xl = svg("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle", class: "axis-label" });
    xl.textContent = "occurrence, in run order"; box.appendChild(xl);
    steps.forEach((s, i) => {
      const c = svg("circle", { cx: x(i), cy: y(s.d), r: 4, class: "step-point",
        fill: COLORS[names.indexOf(s.n) % COLORS.length] });
      c.dataset.view = s.v;
      const tipRows = [["scope", s.n], ["occurrence", "#" + s.i], ["duration", dur(s.d)]];
      if (s.ld) tipRows.push(["compile/load (not in the point)", dur(s.ld)]);
      c.addEventListener("mousemove", ev => showTip(ev, tipRows));
      c.addEventListener("mouseleave", hideTip);
      c.addEventListener("click", () => selectView(s.v));
      box.appendChild(c);
    });
    root.appendChild(box);
    const legend = el("div", "legend");
    names.forEach((n, k) => {
      const item = el("span", "legend-item");
      const sw = el("span", "swatch"); sw.style.background = COLORS[k % COLORS.length];
      item.append(sw, document.createTextNode(n + " (" + steps.filter(s => s.n === n).length + ")"));
      legend.appendChild(item);
    });
    root.appendChild(legend);
  }

  // ---- kernel breakdown -------------------------------------------------------------------------------------
  function drawKernels(scope) {
    const rows = data.kernels[scope] || [];
    const chart = document.getElementById("kernel-chart");
    const table = document.getElementById("kernel-table");
    chart.replaceChildren(); table.replaceChildren();
    const top = rows.slice(0, 15);
    const maxShare = Math.max(...top.map(r => r.sh), 1e-9);
    for (const r of top) {
      const line = el("div", "kbar");
      const label = el("span", "kbar-label", r.k); label.title = r.k;
      const track = el("span", "kbar-track");
      const fill = el("span", "kbar-fill " + r.op); fill.style.width = (100 * r.sh / maxShare) + "%";
      track.appendChild(fill);
      line.append(label, track, el("span", "kbar-value", (100 * r.sh).toFixed(1) + "% " + dur(r.t)));
      chart.appendChild(line);
    }
    const t = el("table", "stats kernels");
    const head = t.createTHead().insertRow();
    for (const h of ["kernel", "op", "count", "total", "p50", "p95", "share"]) head.appendChild(el("th", "", h));
    const body = t.createTBody();
    for (const r of rows) {
      const tr = body.insertRow();
      tr.insertCell().textContent = r.k;
      tr.insertCell().textContent = r.op;
      for (const [v, f] of [[r.c, v => v.toLocaleString("en")], [r.t, dur], [r.p50, dur], [r.p95, dur],
                            [r.sh, v => (100 * v).toFixed(1) + "%"]]) {
        const td = tr.insertCell(); td.className = "num"; td.textContent = v === null ? "-" : f(v);
      }
    }
    table.appendChild(t);
  }
  function setupKernels() {
    const sel = document.getElementById("kernel-scope");
    for (const name of Object.keys(data.kernels)) sel.appendChild(el("option", "", name)).value = name;
    sel.addEventListener("change", () => drawKernels(sel.value));
    drawKernels(sel.value);
  }

  // ---- timeline ---------------------------------------------------------------------------------------------
  const ROW = 18, LABEL = 170;
  function layout(items) {
    // lanes: threads first, then streams; rows inside a lane: scopes and records by depth on threads,
    // greedy packing on streams.
    const lanes = new Map();
    for (const it of items) {
      const key = it.lk + "\u0000" + it.l;
      if (!lanes.has(key)) lanes.set(key, { name: it.l, kind: it.lk, items: [] });
      lanes.get(key).items.push(it);
    }
    const order = [...lanes.values()].sort((a, b) => (a.kind === b.kind ? 0 : a.kind === "thread" ? -1 : 1));
    for (const lane of order) {
      const ends = [];
      for (const it of lane.items) {
        let row = lane.kind === "thread" ? Math.max(it.d, 0) : 0;
        while (ends[row] !== undefined && ends[row] > it.s && it.k !== "scope") row++;
        ends[row] = Math.max(ends[row] || 0, it.e);
        it.row = row;
      }
      lane.rows = Math.max(ends.length, 1);
    }
    return order;
  }
  // A label too long for its bar keeps its end ("...repulsion (adjoint)"): a kernel's own name is at the end,
  // its module ("__main__.") at the start. 10px text: about 6 px a character, 4 px of padding and border.
  function elideLeft(label, px) {
    const fits = Math.floor((px - 4) / 6);
    if (label.length <= fits) return label;
    return fits >= 8 ? "..." + label.slice(label.length - (fits - 3)) : "";  // at least 5 characters of the name
  }
  function Timeline(view) {
    const root = el("div", "timeline");
    root.dataset.view = view.id;
    const title = el("h3", "", view.label);
    const axis = el("div", "axis");
    const body = el("div", "tl-body");
    root.append(title, axis, body);
    const items = view.items;
    const lanes = layout(items);
    let t0 = 0, t1 = Math.max(1, ...items.map(it => it.e));
    const full = [t0, t1];
    const bars = [];
    for (const lane of lanes) {
      const row = el("div", "lane " + lane.kind);
      row.appendChild(el("div", "lane-name", lane.name)).title = lane.name;
      const track = el("div", "track");
      track.style.height = (lane.rows * ROW + 2) + "px";
      for (const it of lane.items) {
        const kind = ["scope", "launch", "copy", "fill", "fold", "graph_launch"].includes(it.k) ? it.k : "other";
        const label = it.k === "fold" ? it.n + " (folded, " + it.c + " ops)" : it.n;
        const bar = el("div", "bar " + kind, label);
        if (it.r >= 0) bar.dataset.record = String(it.r);
        bar.dataset.label = label;
        bar.style.top = (it.row * ROW) + "px";
        bar.addEventListener("mousemove", ev => showTip(ev, it.h));
        bar.addEventListener("mouseleave", hideTip);
        track.appendChild(bar);
        bars.push([bar, it]);
      }
      row.appendChild(track);
      body.appendChild(row);
    }
    function draw() {
      const width = Math.max(body.clientWidth - LABEL, 50);
      const k = width / Math.max(t1 - t0, 1e-9);
      for (const [bar, it] of bars) {
        if (it.e < t0 || it.s > t1) { bar.style.display = "none"; continue; }
        const left = Math.max(it.s, t0), right = Math.min(Math.max(it.e, it.s), t1);
        bar.style.display = "";
        bar.style.left = ((left - t0) * k) + "px";
        const px = Math.max((right - left) * k, 1);
        bar.style.width = px + "px";
        bar.textContent = elideLeft(bar.dataset.label, px);
      }
      axis.replaceChildren();
      const tk = ticks(t0, t1, Math.max(2, Math.floor(width / 110)));
      for (const v of tk.values) {
        const tick = el("div", "tick", tickLabel(v, tk.step));
        tick.style.left = (LABEL + (v - t0) * k) + "px";
        axis.appendChild(tick);
      }
      root.dataset.viewStart = String(t0);
      root.dataset.viewEnd = String(t1);
      root.dataset.ticks = String(tk.values.length);
    }
    function zoom(frac, f) {  // keep the time under `frac` (0..1 of the width) in place, scale the span by f
      const at = t0 + frac * (t1 - t0);
      const span = Math.min(Math.max((t1 - t0) * f, 100), (full[1] - full[0]) * 4);
      t0 = at - frac * span; t1 = t0 + span;
      draw();
    }
    let mouseFrac = 0.5;
    body.addEventListener("wheel", ev => {
      ev.preventDefault();
      const width = Math.max(body.clientWidth - LABEL, 50);
      const rect = body.getBoundingClientRect();
      zoom(Math.min(Math.max((ev.clientX - rect.left - LABEL) / width, 0), 1), Math.pow(1.0015, ev.deltaY));
    }, { passive: false });
    body.addEventListener("mousemove", ev => {
      const rect = body.getBoundingClientRect();
      mouseFrac = Math.min(Math.max((ev.clientX - rect.left - LABEL) / Math.max(body.clientWidth - LABEL, 50), 0), 1);
      hovered = root;
    });
    root.key = key => {  // as in Perfetto: W/S zoom in/out at the mouse, A/D pan left/right
      if (key === "w") zoom(mouseFrac, 0.8);
      else if (key === "s") zoom(mouseFrac, 1.25);
      else if (key === "a" || key === "d") {
        const shift = (key === "a" ? -0.2 : 0.2) * (t1 - t0);
        t0 += shift; t1 += shift; draw();
      } else return false;
      return true;
    };
    let drag = null;
    body.addEventListener("mousedown", ev => { drag = { x: ev.clientX, t0, t1 }; body.classList.add("dragging"); });
    window.addEventListener("mousemove", ev => {
      if (!drag) return;
      const width = Math.max(body.clientWidth - LABEL, 50);
      const shift = (ev.clientX - drag.x) / width * (drag.t1 - drag.t0);
      t0 = drag.t0 - shift; t1 = drag.t1 - shift; draw();
    });
    window.addEventListener("mouseup", () => { drag = null; body.classList.remove("dragging"); });
    root.reset = () => { [t0, t1] = full; draw(); };
    root.draw = draw;
    return root;
  }
  const timelines = new Map();
  let hovered = null;  // the timeline the mouse was last over: W/A/S/D act on it
  window.addEventListener("keydown", ev => {
    if (hovered && !ev.ctrlKey && !ev.metaKey && !ev.altKey && ev.target.tagName !== "SELECT" &&
        hovered.key(ev.key.toLowerCase())) ev.preventDefault();
  });
  function selectView(id, keep) {
    const host = document.getElementById("timelines");
    const sel = document.getElementById("view-select");
    if (!data.views.some(v => v.id === id)) return;
    if (!keep) host.replaceChildren();
    let tl = timelines.get(id);
    if (!tl) { tl = Timeline(data.views.find(v => v.id === id)); timelines.set(id, tl); }
    host.appendChild(tl);
    tl.draw();
    sel.value = id;
  }
  function setupTimeline() {
    const sel = document.getElementById("view-select");
    for (const v of data.views) sel.appendChild(el("option", "", v.label)).value = v.id;
    sel.addEventListener("change", () => selectView(sel.value));
    document.getElementById("zoom-reset").addEventListener("click", () => {
      for (const tl of document.getElementById("timelines").children) tl.reset();
    });
    const defaults = data.defaults.length ? data.defaults : data.views.slice(0, 1).map(v => v.id);
    defaults.forEach((id, k) => selectView(id, k > 0));
    if (defaults.length) sel.value = defaults[0];  // the selector names the first shown (the median step)
    window.addEventListener("resize", () => { for (const tl of document.getElementById("timelines").children) tl.draw(); });
  }

  for (const g of document.querySelectorAll(".graph")) g.addEventListener("click", () => g.classList.toggle("fit"));
  drawSteps();
  setupKernels();
  setupTimeline();
  document.body.dataset.rendered = String(data.views.reduce((n, v) => n + v.items.length, 0));
  document.body.dataset.ready = "1";
})();
