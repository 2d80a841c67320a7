/* Small SVG line charts for the console: lines over time, optional interval bands.
 * No dependencies; everything is built with DOM calls (no markup strings), so no value
 * read from the API is ever parsed as HTML. */
"use strict";

const NoisyChart = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const W = 640, H = 240, PAD = { left: 48, right: 12, top: 12, bottom: 28 };

  function el(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (parent) parent.appendChild(node);
    return node;
  }

  /* Round, readable tick values between lo and hi (about n of them). */
  function ticks(lo, hi, n) {
    const span = hi - lo || 1;
    const raw = span / n;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => span / s <= n) || 10 * mag;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
      out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    }
    return out;
  }

  function empty(container, text) {
    const p = document.createElement("p");
    p.className = "empty";
    p.textContent = text || "No points yet.";
    container.appendChild(p);
  }

  /* Horizontal grid lines with their values, from x = left to right. */
  function yGrid(svg, y0, y1, sy, left, right) {
    for (const v of ticks(y0, y1, 4)) {
      el("line", { x1: left, x2: right, y1: sy(v), y2: sy(v), class: "gridline" }, svg);
      el("text", { x: left - 6, y: sy(v) + 4, "text-anchor": "end", class: "tick" }, svg)
        .textContent = Number(v.toPrecision(3)).toString();
    }
  }

  /* A legend: a colour swatch and the name of each entry ({name, color}). */
  function legendList(entries) {
    const legend = document.createElement("ul");
    legend.className = "legend";
    for (const entry of entries) {
      const li = document.createElement("li");
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      const mark = el("svg", { width: 14, height: 10, viewBox: "0 0 14 10" });
      el("rect", { width: 14, height: 10, fill: entry.color }, mark);
      swatch.appendChild(mark);
      li.append(swatch, document.createTextNode(" " + entry.name));
      legend.appendChild(li);
    }
    return legend;
  }

  /* A band's runs of consecutive entries with bounds (an entry with lo null ends a run). */
  function bandRuns(band) {
    const runs = [[]];
    for (const b of band) {
      if (b[1] === null || b[1] === undefined) runs.push([]);
      else runs[runs.length - 1].push(b);
    }
    return runs.filter((r) => r.length);
  }

  function timeLabel(seconds) {
    const d = new Date(seconds * 1000);
    return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }

  /* Draw into `container` (emptied first).  spec: {series: [{name, color, points: [[t, y]],
   * band: [[t, lo, hi]] (optional: shaded between consecutive entries, an entry with lo null
   * breaks it, an entry alone is a bar; whiskers: a bar per time, not a shaded band),
   * dashed}], yMin, yMax, yLabel, title, marks: [{t, label}]
   * (optional: a vertical line at each time, its label on hover; the time axis spans them),
   * markName (the marks' legend entry)} */
  function draw(container, spec) {
    container.replaceChildren();
    const all = spec.series.flatMap((s) => [
      ...s.points.filter((p) => p[1] !== null && p[1] !== undefined),
      ...(s.band || []).filter((b) => b[1] !== null && b[1] !== undefined)
        .flatMap((b) => [[b[0], b[1]], [b[0], b[2]]]),
    ]);
    if (!all.length) {
      empty(container, spec.empty);
      return;
    }
    const xs = [...all, ...(spec.marks || [])].map((p) => p[0] ?? p.t);
    const ys = all.map((p) => p[1]);
    let x0 = Math.min(...xs), x1 = Math.max(...xs);
    if (x0 === x1) { x0 -= 30; x1 += 30; }
    let y0 = spec.yMin ?? Math.min(...ys), y1 = spec.yMax ?? Math.max(...ys);
    if (spec.yMin === undefined || spec.yMax === undefined) {
      const pad = (y1 - y0) * 0.08 || Math.abs(y1) * 0.1 || 0.05;
      if (spec.yMin === undefined) y0 -= pad;
      if (spec.yMax === undefined) y1 += pad;
    }
    const sx = (t) => PAD.left + ((t - x0) / (x1 - x0)) * (W - PAD.left - PAD.right);
    const sy = (v) => H - PAD.bottom - ((v - y0) / (y1 - y0)) * (H - PAD.top - PAD.bottom);

    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img",
                            "aria-label": spec.title || "chart" });
    yGrid(svg, y0, y1, sy, PAD.left, W - PAD.right);
    const xt = ticks(x0, x1, 4);
    for (const t of xt.length > 1 ? xt : [x0, x1]) {
      // a label near an edge is anchored inside the chart, not cut off
      const anchor = sx(t) > W - PAD.right - 40 ? "end" : sx(t) < PAD.left + 40 ? "start"
        : "middle";
      el("text", { x: sx(t), y: H - 8, "text-anchor": anchor, class: "tick" }, svg)
        .textContent = timeLabel(t);
    }
    el("line", { x1: PAD.left, x2: PAD.left, y1: PAD.top, y2: H - PAD.bottom, class: "axis" }, svg);
    el("line", { x1: PAD.left, x2: W - PAD.right, y1: H - PAD.bottom, y2: H - PAD.bottom,
                 class: "axis" }, svg);

    const whisker = (color, [t, lo, hi]) => {
      const g = el("g", { class: "whisker", stroke: color, "stroke-width": 1.5 }, svg);
      el("line", { x1: sx(t), x2: sx(t), y1: sy(lo), y2: sy(hi) }, g);
      for (const v of [lo, hi]) {
        el("line", { x1: sx(t) - 4, x2: sx(t) + 4, y1: sy(v), y2: sy(v) }, g);
      }
    };
    for (const s of spec.series) {
      if (s.whiskers) {
        for (const b of s.band || []) whisker(s.color, b);
      } else {
        for (const run of bandRuns(s.band || [])) {
          if (run.length === 1) {  // one interval has no width to shade: its bar
            whisker(s.color, run[0]);
            continue;
          }
          const upper = run.map((b) => `${sx(b[0]).toFixed(1)},${sy(b[2]).toFixed(1)}`);
          const lower = run.slice().reverse()
            .map((b) => `${sx(b[0]).toFixed(1)},${sy(b[1]).toFixed(1)}`);
          el("polygon", { points: [...upper, ...lower].join(" "), fill: s.color,
                          "fill-opacity": 0.15, stroke: "none", class: "band" }, svg);
        }
      }
      // a gap (null) breaks the line into runs
      let run = [];
      const flush = () => {
        if (run.length === 1) {
          el("circle", { cx: run[0][0], cy: run[0][1], r: 2.5, fill: s.color }, svg);
        } else if (run.length > 1) {
          el("polyline", { points: run.map((p) => p.join(",")).join(" "), fill: "none",
                           stroke: s.color, "stroke-width": 2,
                           "stroke-dasharray": s.dashed ? "5 4" : "none" }, svg);
        }
        run = [];
      };
      for (const [t, v] of s.points) {
        if (v === null || v === undefined) flush();
        else run.push([sx(t).toFixed(1), sy(v).toFixed(1)]);
      }
      flush();
    }
    const marks = spec.marks || [];
    for (const m of marks) {
      const g = el("g", { class: "mark" }, svg);
      el("title", {}, g).textContent = m.label;
      el("line", { x1: sx(m.t), x2: sx(m.t), y1: PAD.top, y2: H - PAD.bottom }, g);
      el("text", { x: sx(m.t), y: PAD.top + 8, "text-anchor": "middle" }, g).textContent = "▼";
    }
    container.appendChild(svg);

    const legend = legendList(spec.series);
    if (marks.length) {
      const li = document.createElement("li");
      li.className = "mark-legend";
      li.textContent = `▼ ${spec.markName || "mark"}`;
      legend.appendChild(li);
    }
    container.appendChild(legend);
  }

  /* Named items side by side on a value axis from y0 to y1: the frame (title lines, grid,
   * axes, each item's name below it), then drawItem(g, cx, sy, item, width) per item.
   * spec: {items: [{name, ...}], title: [lines], yLabel, height, class} */
  function categories(container, spec, y0, y1, drawItem) {
    const CW = 480, CH = spec.height || 300, lines = spec.title || [];
    const pad = { left: 64, right: 12, top: 10 + 15 * lines.length, bottom: 26 };
    const step = (CW - pad.left - pad.right) / spec.items.length;
    const sx = (i) => pad.left + step * (i + 0.5);
    const sy = (v) => CH - pad.bottom - ((v - y0) / (y1 - y0)) * (CH - pad.top - pad.bottom);
    const svg = el("svg", { viewBox: `0 0 ${CW} ${CH}`, class: `chart ${spec.class}`,
                            role: "img", "aria-label": lines.join(" ") || spec.class });
    lines.forEach((line, i) => {
      el("text", { x: (pad.left + CW - pad.right) / 2, y: 14 + 15 * i, "text-anchor": "middle",
                   class: "title" }, svg).textContent = line;
    });
    yGrid(svg, y0, y1, sy, pad.left, CW - pad.right);
    if (spec.yLabel) {
      const cy = (pad.top + CH - pad.bottom) / 2;
      el("text", { x: 14, y: cy, transform: `rotate(-90 14 ${cy})`, "text-anchor": "middle",
                   class: "tick" }, svg).textContent = spec.yLabel;
    }
    el("line", { x1: pad.left, x2: pad.left, y1: pad.top, y2: CH - pad.bottom, class: "axis" },
       svg);
    el("line", { x1: pad.left, x2: CW - pad.right, y1: CH - pad.bottom, y2: CH - pad.bottom,
                 class: "axis" }, svg);
    spec.items.forEach((item, i) => {
      const g = el("g", { class: "item", "data-name": item.name }, svg);
      drawItem(g, sx(i), sy, item, step);
      el("text", { x: sx(i), y: CH - 8, "text-anchor": "middle", class: "tick" }, g)
        .textContent = item.name;
    });
    container.appendChild(svg);
  }

  /* Estimates with their intervals as error bars, side by side (the plot `noisyloop evaluate
   * --plot` draws).  spec: categories' and {items: [{name, value, low, high}], color, empty} */
  function errorbars(container, spec) {
    const items = spec.items.filter((x) => Number.isFinite(x.value));
    groupedErrorbars(container, { ...spec, groups: [{ color: spec.color || "#2563eb" }],
                                  items: items.map((x) => ({ ...x, values: [x] })) });
  }

  /* Several estimates per named item (one per group, side by side, in the group's colour)
   * with their intervals, and a legend of the named groups.  spec: categories' and {groups:
   * [{name, color}], items: [{name, values: [{value, low, high}] (one per group)}], empty} */
  function groupedErrorbars(container, spec) {
    container.replaceChildren();
    const shown = (v) => v && Number.isFinite(v.value);
    const ys = spec.items.flatMap((x) => x.values.filter(shown)
      .flatMap((v) => [v.value, v.low, v.high])).filter(Number.isFinite);
    if (!ys.length) {
      empty(container, spec.empty);
      return;
    }
    let y0 = Math.min(...ys), y1 = Math.max(...ys);
    const margin = (y1 - y0) * 0.08 || Math.abs(y1) * 0.1 || 0.05;
    y0 -= margin;
    y1 += margin;
    const n = spec.groups.length, cap = n > 1 ? 4 : 8;
    categories(container, { ...spec, class: n > 1 ? "errorbars grouped" : "errorbars" }, y0, y1,
               (g, cx, sy, x, w) => {
      x.values.forEach((v, k) => {
        if (!shown(v)) return;
        const color = spec.groups[k].color;
        const at = cx + (k - (n - 1) / 2) * Math.min(18, (w * 0.7) / n);
        const bar = n > 1 ? el("g", { class: "estimate", "data-group": spec.groups[k].name }, g)
          : g;
        if (Number.isFinite(v.low) && Number.isFinite(v.high)) {
          el("line", { x1: at, x2: at, y1: sy(v.low), y2: sy(v.high), stroke: color,
                       "stroke-width": 1.5 }, bar);
          for (const b of [v.low, v.high]) {
            el("line", { x1: at - cap, x2: at + cap, y1: sy(b), y2: sy(b), stroke: color,
                         "stroke-width": 1.5 }, bar);
          }
        }
        el("circle", { cx: at, cy: sy(v.value), r: n > 1 ? 3.5 : 4, fill: color }, bar);
      });
    });
    if (n > 1) container.appendChild(legendList(spec.groups));
  }

  /* Values as bars from 0, each labelled with its value.  spec: categories' and
   * {items: [{name, value}], yMax, color} */
  function bars(container, spec) {
    container.replaceChildren();
    const top = Math.max(spec.yMax ?? 0, ...spec.items.map((x) => x.value));
    const color = spec.color || "#2563eb";
    categories(container, { ...spec, class: "bars" }, 0, top * 1.08 || 1,
      (g, cx, sy, x, width) => {
        const w = Math.min(60, width * 0.6);
        el("rect", { x: cx - w / 2, y: sy(x.value), width: w, height: sy(0) - sy(x.value),
                     fill: color }, g);
        el("text", { x: cx, y: sy(x.value) - 4, "text-anchor": "middle", class: "tick value" },
           g).textContent = Number(x.value.toPrecision(3)).toString();
      });
  }

  /* Points on two value axes (no lines).  spec: {series: [{name, color, points: [[x, y]]}],
   * xLabel, yLabel, yMin, yMax, title, empty} */
  function scatter(container, spec) {
    container.replaceChildren();
    const all = spec.series.flatMap((s) => s.points)
      .filter((p) => Number.isFinite(p[0]) && Number.isFinite(p[1]));
    if (!all.length) {
      empty(container, spec.empty);
      return;
    }
    const pad = { ...PAD, bottom: 40 };
    let x0 = Math.min(...all.map((p) => p[0])), x1 = Math.max(...all.map((p) => p[0]));
    const xPad = (x1 - x0) * 0.05 || 0.5;
    x0 -= xPad;
    x1 += xPad;
    const y0 = spec.yMin ?? Math.min(...all.map((p) => p[1]));
    const y1 = spec.yMax ?? Math.max(...all.map((p) => p[1]));
    const sx = (v) => pad.left + ((v - x0) / (x1 - x0)) * (W - pad.left - pad.right);
    const sy = (v) => H - pad.bottom - ((v - y0) / ((y1 - y0) || 1)) * (H - pad.top - pad.bottom);
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart scatter", role: "img",
                            "aria-label": spec.title || "chart" });
    yGrid(svg, y0, y1, sy, pad.left, W - pad.right);
    for (const v of ticks(x0, x1, 5)) {
      el("text", { x: sx(v), y: H - pad.bottom + 14, "text-anchor": "middle", class: "tick" },
         svg).textContent = Number(v.toPrecision(3)).toString();
    }
    if (spec.xLabel) {
      el("text", { x: (pad.left + W - pad.right) / 2, y: H - 6, "text-anchor": "middle",
                   class: "tick" }, svg).textContent = spec.xLabel;
    }
    el("line", { x1: pad.left, x2: pad.left, y1: pad.top, y2: H - pad.bottom, class: "axis" },
       svg);
    el("line", { x1: pad.left, x2: W - pad.right, y1: H - pad.bottom, y2: H - pad.bottom,
                 class: "axis" }, svg);
    for (const s of spec.series) {
      const g = el("g", { class: "points", "data-name": s.name }, svg);
      for (const [x, y] of s.points) {
        if (Number.isFinite(x) && Number.isFinite(y)) {
          el("circle", { cx: sx(x).toFixed(1), cy: sy(y).toFixed(1), r: s.r || 2.5,
                         fill: s.color, "fill-opacity": s.opacity ?? 1 }, g);
        }
      }
    }
    container.appendChild(svg);
    container.appendChild(legendList(spec.series));
  }

  return { bars, draw, errorbars, groupedErrorbars, scatter, ticks };
})();
