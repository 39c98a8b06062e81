// launchtrace report: draws the timeline from the JSON data island. Every string goes through textContent.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("launchtrace-data").textContent);
  const root = document.getElementById("timeline");
  const tip = document.getElementById("tip");
  const ROW = 18;
  let t0 = Infinity, t1 = -Infinity;
  for (const it of data.items) { t0 = Math.min(t0, it.s); t1 = Math.max(t1, it.e); }
  const span = Math.max(t1 - t0, 1);
  const lanes = new Map();
  for (const it of data.items) {
    const key = it.t + "\u0000" + it.l;
    if (!lanes.has(key)) lanes.set(key, { trace: it.t, name: it.l, items: [] });
    lanes.get(key).items.push(it);
  }
  function showTip(ev, it) {
    tip.replaceChildren();
    const table = document.createElement("table");
    for (const [k, v] of it.d) {
      const tr = table.insertRow();
      const a = tr.insertCell(); a.className = "k"; a.textContent = k;
      tr.insertCell().textContent = v;
    }
    tip.appendChild(table);
    tip.style.display = "block";
    tip.style.left = Math.min(ev.clientX + 12, window.innerWidth - 300) + "px";
    tip.style.top = (ev.clientY + 12) + "px";
  }
  for (const lane of lanes.values()) {
    const div = document.createElement("div"); div.className = "lane";
    const name = document.createElement("div"); name.className = "lane-name";
    name.textContent = (data.traces.length > 1 ? data.traces[lane.trace] + " / " : "") + lane.name;
    div.appendChild(name);
    const track = document.createElement("div"); track.className = "track";
    // rows: scopes by depth, then records packed into the first row where they fit
    const rowEnds = [];
    const scopeRows = 1 + lane.items.filter(it => it.k === "scope").reduce((m, it) => Math.max(m, it.depth), -1);
    for (const it of lane.items) {
      let row;
      if (it.k === "scope") { row = it.depth; }
      else {
        row = scopeRows;
        while (rowEnds[row] !== undefined && rowEnds[row] > it.s) row++;
        rowEnds[row] = it.e;
      }
      const bar = document.createElement("div");
      const kind = ["scope", "launch", "copy", "fill"].includes(it.k) ? it.k : "other";
      bar.className = "bar " + kind;
      if (it.r >= 0) { bar.dataset.record = String(it.r); bar.dataset.trace = String(it.t); }
      bar.style.left = (100 * (it.s - t0) / span) + "%";
      bar.style.width = (100 * Math.max(it.e - it.s, 0) / span) + "%";
      bar.style.top = (row * ROW) + "px";
      bar.textContent = it.n;
      bar.addEventListener("mousemove", ev => showTip(ev, it));
      bar.addEventListener("mouseleave", () => { tip.style.display = "none"; });
      track.appendChild(bar);
    }
    track.style.height = (Math.max(rowEnds.length, scopeRows + 1) * ROW + 2) + "px";
    div.appendChild(track);
    root.appendChild(div);
  }
  document.body.dataset.rendered = String(data.items.length);
})();
