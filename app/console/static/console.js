/* noisyloop console: sign in, the tenant's models, one model's learning, noise, versions and
 * challengers.  Every page is drawn from the JSON API with DOM calls (text is always set as
 * text, never parsed as HTML).  The key lives in sessionStorage only and is sent as the
 * Authorization header; it never appears in a URL. */
"use strict";

(() => {
  const STORE = "noisyloop.console";
  /* The evaluations this tab started (job ids per model), forgotten with the key. */
  const EVALUATIONS = "noisyloop.console.evaluations";
  const MAX_EVALUATIONS = 10;
  /* An evaluation is polled every POLL_MS at first, then less often, up to MAX_POLL_MS. */
  const POLL_MS = 500;
  const MAX_POLL_MS = 5000;
  const COLORS = { online: "#2563eb", calibrated: "#dc2626", rho0: "#7c3aed", rho1: "#059669",
                   debiased: "#6b7280" };
  /* How often the "N s ago" of every figure is brought up to date. */
  const AGE_TICK_MS = 1000;
  const main = document.getElementById("view");
  let renderId = 0;

  /* ---------- session and API ---------- */

  const session = {
    get() {
      try { return JSON.parse(sessionStorage.getItem(STORE) || "null"); } catch { return null; }
    },
    set(value) { sessionStorage.setItem(STORE, JSON.stringify(value)); },
    clear() {
      sessionStorage.removeItem(STORE);
      sessionStorage.removeItem(EVALUATIONS);
    },
  };

  class ApiError extends Error {
    constructor(status, body) {
      const err = body && body.error;
      super(err ? `${err.code}: ${err.message}` : `HTTP ${status}`);
      this.status = status;
      this.code = err ? err.code : null;
    }
  }

  /* One API call with the session's token; JSON in, JSON (or JSON Lines, as text) out. */
  async function api(method, path, body, token) {
    const auth = token || (session.get() || {}).token;
    const headers = { Authorization: `Bearer ${auth}`, Accept: "application/json" };
    const init = { method, headers, cache: "no-store", credentials: "omit",
                   referrerPolicy: "no-referrer" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const r = await fetch(path, init);
    const text = await r.text();
    let data = text;
    try { data = text ? JSON.parse(text) : null; } catch { /* JSON Lines or plain text */ }
    if (r.status === 401 && !token) {
      session.clear();
      showSignIn("The key is no longer accepted; sign in again.");
    }
    if (!r.ok) throw new ApiError(r.status, data);
    return data;
  }

  const modelPath = (id, rest) => `v1/models/${encodeURIComponent(id)}${rest || ""}`;
  /* Whether an error says the model itself is gone (deleted while its page was open). */
  const modelGone = (err) => err instanceof ApiError && err.status === 404 &&
    err.code === "unknown_model";
  const GONE = "This model no longer exists (it was deleted); Refresh to leave its page.";

  /* ---------- DOM helpers ---------- */

  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") node.className = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else if (k === "text") node.textContent = v;
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  const fmt = (v, digits = 3) => (v === null || v === undefined || Number.isNaN(v)
    ? "—" : (typeof v === "number" ? Number(v.toFixed(digits)).toString() : String(v)));
  const pct = (v) => (v === null || v === undefined ? "—" : `${(100 * v).toFixed(1)}%`);
  const interval = (lo, hi, f = fmt) => (lo === null || lo === undefined ? ""
    : ` [${f(lo)}, ${f(hi)}]`);
  const when = (iso) => (iso ? new Date(iso).toLocaleString() : "—");
  const unixTime = (iso) => (iso ? Date.parse(iso) / 1000 : null);

  /* "12 s ago" of a Unix time in seconds. */
  function ago(t) {
    const s = Math.max(0, Math.round(Date.now() / 1000 - t));
    if (s < 120) return `${s} s ago`;
    if (s < 7200) return `${Math.round(s / 60)} min ago`;
    return s < 172800 ? `${Math.round(s / 3600)} h ago` : `${Math.round(s / 86400)} d ago`;
  }

  /* The age of a figure (Unix seconds), kept current while it is shown. */
  function age(t) {
    return t === null || t === undefined ? null
      : h("span", { class: "age", "data-t": String(t) }, ago(t));
  }

  setInterval(() => {
    for (const el of main.querySelectorAll(".age[data-t]")) {
      el.textContent = ago(Number(el.dataset.t));
    }
  }, AGE_TICK_MS);
  const clock = (iso) => (iso ? new Date(iso).toLocaleTimeString() : "—");

  function table(headers, rows, cls) {
    return h("div", { class: "scroll" },
      h("table", { class: cls || "" },
        h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col" }, x)))),
        h("tbody", {}, rows)));
  }

  function note(text, cls) { return h("p", { class: cls || "muted" }, text); }

  /* A card whose body is filled by `fill`; an endpoint this server lacks (404/405) shows
   * "not available", another error its message. */
  function section(title, id, fill) {
    const body = h("div", { class: "body" }, note("Loading…"));
    const card = h("section", { class: "card", id }, h("h2", {}, title), body);
    fill(body).catch((err) => {
      const missing = err instanceof ApiError && (err.status === 405 ||
        (err.status === 404 && (err.code === null || err.code === "not_found")));
      body.replaceChildren(missing ? note("Not available on this server.", "muted na")
        : modelGone(err) ? note(GONE, "error gone")
          : note(`Could not load: ${err.message}`, "error"));
    });
    return card;
  }

  /* Two clicks to act: the first asks, the second does. */
  function confirmButton(label, question, action) {
    const button = h("button", { type: "button", class: "act" }, label);
    let armed = false;
    button.addEventListener("click", async () => {
      if (!armed) {
        armed = true;
        button.textContent = question;
        button.classList.add("armed");
        return;
      }
      button.disabled = true;
      await action();
    });
    return button;
  }

  /* ---------- sign in ---------- */

  function showSignIn(message) {
    renderId += 1;
    main.replaceChildren();
    document.getElementById("signin").hidden = false;
    document.getElementById("logout").hidden = true;
    document.getElementById("who").textContent = "";
    document.getElementById("signin-error").textContent = message || "";
  }

  async function signIn(token) {
    try {
      await api("GET", "v1/models", undefined, token);
      return { token, role: "tenant" };
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 401) throw err;
    }
    await api("GET", "v1/admin/tenants", undefined, token);
    return { token, role: "admin" };
  }

  document.getElementById("signin-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const input = document.getElementById("token");
    const error = document.getElementById("signin-error");
    error.textContent = "";
    try {
      session.set(await signIn(input.value.trim()));
      input.value = "";
      if (location.hash !== "#/models") location.hash = "#/models"; else route();
    } catch (err) {
      error.textContent = err instanceof ApiError && err.status === 401
        ? "This key is not accepted." : `Sign-in failed: ${err.message}`;
    }
  });

  document.getElementById("logout").addEventListener("click", () => {
    session.clear();
    location.hash = "#/models";
    showSignIn("Logged out.");
  });

  /* ---------- pages ---------- */

  async function route() {
    const s = session.get();
    if (!s) { showSignIn(); return; }
    document.getElementById("signin").hidden = true;
    document.getElementById("logout").hidden = false;
    document.getElementById("who").textContent =
      s.role === "admin" ? "admin (every tenant, read only)" : "tenant key";
    const id = ++renderId;
    const page = (location.hash || "#/models").slice(1).split("/").filter(Boolean);
    let content;
    try {
      if (s.role === "admin") {
        content = page[0] === "tenants" && page[1]
          ? await tenantPage(decodeURIComponent(page[1])) : await tenantsPage();
      } else if (page[0] === "models" && page[1]) {
        content = await modelPage(decodeURIComponent(page[1]));
      } else {
        content = await modelsPage();
      }
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) return;
      content = h("section", { class: "card" }, note(`Could not load: ${err.message}`, "error"));
    }
    if (id === renderId) main.replaceChildren(content);
  }

  window.addEventListener("hashchange", route);

  /* The rates, then (on a line of its own in a table's noise cell) their source and age. */
  function noiseSummary(noise) {
    if (!noise) return ["—"];
    return [`ρ0 ${fmt(noise.rho0)}, ρ1 ${fmt(noise.rho1)}`, " ",
      h("small", { class: "source" }, noise.source,
        noise.estimated_at ? [", ", age(unixTime(noise.estimated_at))] : null)];
  }

  /* A model's event rate, by one rule for every page: the newest series point's, or 0
   * (idle) once the model's live events_applied (read as sync reads it) has not moved past
   * that point's (the trainer writes a point within an interval of a model going idle).
   * {idle, perSecond, t}, or null without a point. */
  function eventRate(p, applied) {
    if (!p) return null;
    const idle = p.events_applied >= applied;
    return { idle, perSecond: idle ? 0 : p.events_per_second, t: p.t };
  }

  function rateCell(p, applied) {
    const rate = eventRate(p, applied);
    if (!rate) return h("td", { class: "num rate" }, "—");
    return h("td", { class: "num rate" }, rate.idle ? "0" : fmt(rate.perSecond, 1), " ",
      h("small", {}, rate.idle ? "idle, last point " : "point ", age(rate.t)));
  }

  /* A model's drift detector in a word or two: off, warming up, stable, or drift with its
   * detections. */
  function driftCell(drift) {
    if (!drift) return h("td", { class: "drift" }, "—");
    const said = drift.status === "warming_up" ? "warming up" : drift.status;
    return h("td", { class: drift.status === "drift" ? "drift error" : "drift" }, said,
      drift.detections ? h("small", {}, ` ${drift.detections} detected`) : null);
  }

  async function modelsPage() {
    const { models } = await api("GET", "v1/models");
    const read = Date.now() / 1000;
    const latest = await Promise.all(models.map((m) =>
      api("GET", modelPath(m.model_id, "/series?limit=1"))
        .then((r) => r.points[r.points.length - 1] || null).catch(() => null)));
    const rows = models.map((m, i) => {
      const s = m.stats;
      return h("tr", { "data-model": m.model_id },
        h("td", {}, h("a", { href: `#/models/${encodeURIComponent(m.model_id)}` }, m.model_id)),
        h("td", {}, m.task), h("td", {}, m.algorithm),
        h("td", { class: "num" }, String(m.version), " ",
          h("small", {}, age(unixTime(m.updated_at)))),
        rateCell(latest[i], s.events_applied),
        h("td", { class: "num awaiting" }, s.awaiting_feedback ?? "—"),
        h("td", { class: "num backlog" }, s.backlog ?? "—"),
        h("td", { class: "num" }, s.events_dead_lettered),
        driftCell(m.drift),
        h("td", { class: "noise" }, noiseSummary(m.noise), s.calibration_unreliable
          ? h("small", { class: "error" }, " calibration unreliable") : null));
    });
    return h("section", { class: "card", id: "models" },
      h("h1", {}, "Models"),
      models.length ? h("p", { class: "muted", id: "models-read" },
        "Counts as of ", age(read), ", read live as sync reads them; events/s: the newest "
        + "series point's. ",
        h("button", { type: "button", onclick: () => route() }, "Refresh")) : null,
      models.length ? table(["model", "task", "algorithm", "version", "events/s",
                             "awaiting feedback", "not applied", "dead letters", "drift",
                             "last noise estimate"], rows, "models")
        : note("This tenant has no models yet."));
  }

  async function tenantsPage() {
    const { tenants } = await api("GET", "v1/admin/tenants");
    const rows = tenants.map((t) => h("tr", {},
      h("td", {}, h("a", { href: `#/tenants/${encodeURIComponent(t.tenant_id)}` }, t.tenant_id)),
      h("td", { class: "num" }, t.n_models), h("td", {}, when(t.created_at))));
    return h("section", { class: "card", id: "tenants" }, h("h1", {}, "Tenants"),
      note("Signed in with the admin token: read only."),
      tenants.length ? table(["tenant", "models", "created"], rows) : note("No tenants yet."));
  }

  async function tenantPage(tenant) {
    const card = h("section", { class: "card", id: "tenant" },
      h("p", {}, h("a", { href: "#/models" }, "← tenants")), h("h1", {}, `Tenant ${tenant}`));
    card.append(section("Models", "tenant-models", async (body) => {
      const { models } = await api("GET",
        `v1/admin/tenants/${encodeURIComponent(tenant)}/models`);
      body.replaceChildren(models.length ? table(
        ["model", "task", "algorithm", "version", "events applied", "dead letters",
         "last noise estimate"],
        models.map((m) => h("tr", {}, h("td", {}, m.model_id), h("td", {}, m.task),
          h("td", {}, m.algorithm), h("td", { class: "num" }, m.version),
          h("td", { class: "num" }, m.stats.events_applied),
          h("td", { class: "num" }, m.stats.events_dead_lettered),
          h("td", { class: "noise" }, noiseSummary(m.noise))))) : note("No models."));
    }));
    return card;
  }

  async function modelPage(id) {
    let model;
    try {
      model = await api("GET", modelPath(id));
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        return h("section", { class: "card", id: "model-missing" },
          h("p", {}, h("a", { href: "#/models" }, "← models")),
          h("h1", {}, "No such model"),
          note("This tenant has no model with that id."));
      }
      throw err;
    }
    // a refresh asked for later (after an action) does nothing once the page is left
    const shown = renderId;
    const refresh = () => { if (shown === renderId) route(); };
    const s = model.stats;
    const head = h("section", { class: "card", id: "model" },
      h("p", {}, h("a", { href: "#/models" }, "← models")),
      h("h1", {}, model.model_id),
      h("dl", { class: "facts" },
        fact("task", model.task), fact("algorithm", model.algorithm),
        model.mode ? fact("mode", model.mode) : null,
        fact("version", model.version), fact("events applied", s.events_applied),
        fact("predictions", s.predictions), fact("dead letters", s.events_dead_lettered),
        fact("debiased reward", s.debiased_reward === null ? "—"
          : `${pct(s.debiased_reward)}${s.calibration_unreliable ? " (unreliable)" : ""}`),
        fact("updated", when(model.updated_at))),
      h("button", { type: "button", onclick: refresh }, "Refresh"));

    const seriesPromise = api("GET", modelPath(id, "/series"));
    const cards = [
      head,
      section("Reward over time", "reward", async (body) => {
        const { points } = await seriesPromise;
        rewardChart(body, points, model.drift, s.events_applied);
      }),
      section("Noise rates", "noise", async (body) => {
        const { points } = await seriesPromise;
        await noiseCard(body, id, model, points);
      }),
    ];
    if (model.position_bias) cards.push(positionBiasCard(model.position_bias, seriesPromise));
    if (model.apprentice) cards.push(apprenticeCard(model));
    if (Array.isArray(model.params.action_range)) {
      cards.push(section("Learned action", "learned-actions",
        (body) => learnedActionsCard(body, id, model.params.action_range)));
    }
    cards.push(
      section("Versions", "versions", (body) => versionsCard(body, id, refresh)),
      section("Challengers", "challengers", (body) => challengersCard(body, id, refresh)),
      section("Recent decisions", "decisions", (body) => decisionsCard(body, id)),
      section("Evaluations", "evaluations", (body) => evaluationsCard(body, model)),
      section("Dead letters", "dead-letters", (body) => deadLettersCard(body, id)),
      configCard(model));
    return h("div", { class: "grid" }, cards);
  }

  function fact(name, value) {
    return h("div", {}, h("dt", {}, name), h("dd", {}, String(value ?? "—")));
  }

  /* A detection of the model's drift detector as a chart mark. */
  function driftMark(d) {
    const recovered = d.recovered_version === null || d.recovered_version === undefined ? ""
      : `, recovered as version ${d.recovered_version}`;
    return { t: d.time, label: `drift detected (${d.since} events after the estimated `
      + `change, action ${d.action}${recovered})` };
  }

  /* `applied`: the model's events_applied as its page read it (live). */
  function rewardChart(body, points, drift, applied) {
    body.replaceChildren();
    const last = points[points.length - 1];
    const rate = eventRate(last, applied);
    if (rate) {
      body.append(h("p", { class: "latest", id: "latest-window" },
        `latest window: online ${pct(last.online_reward)}, calibrated `,
        `${pct(last.calibrated_reward)}; `, rate.idle
          ? h("span", { class: "rate" }, "0 events/s (idle, last point ", age(rate.t), ")")
          : h("span", { class: "rate" }, `${fmt(rate.perSecond, 1)} events/s (point `,
            age(rate.t), ")")));
    }
    const chart = h("div", { class: "chart-box", id: "reward-chart" });
    body.append(chart);
    NoisyChart.draw(chart, {
      title: "online and calibrated reward", yMin: 0, yMax: 1,
      empty: "No points yet: the trainer records one about every 10 s while the model learns.",
      marks: ((drift && drift.history) || []).map(driftMark), markName: "drift detected",
      series: [
        { name: "online reward (mean click)", color: COLORS.online,
          points: points.map((p) => [p.t, p.online_reward]) },
        { name: "calibrated reward h(f)", color: COLORS.calibrated,
          points: points.map((p) => [p.t, p.calibrated_reward]) },
        { name: "debiased reward (all events)", color: COLORS.debiased, dashed: true,
          points: points.map((p) => [p.t, p.debiased_reward]) },
      ],
    });
  }

  /* What a reason asks of the model's owner, where its code alone would not say. */
  const REASONS = {
    one_right_label_unstated: "one_right_label_unstated: not published until every input is "
      + "stated to have exactly one right label (PUT …/noise {\"one_right_label\": true}, "
      + "true when the labels are classes); clicks of graded arms identify no noise rates.",
  };

  /* A rank model's per-slot estimate (GET …/noise `slots`): each value with its 95%
   * interval, those not published marked, and the share of the lowest scores whose click
   * rate gave the low end of ρ0's interval. */
  function slotNoiseTable(slots) {
    const value = (slot, name) => {
      const iv = (slot.interval || {})[name];
      return h("td", { class: "num" }, fmt(slot[name]) + (iv ? interval(iv[0], iv[1]) : ""),
        slot.published && slot.published[name] ? null : h("small", {}, " not published"));
    };
    return table(["slot", "θ", "ρ0", "ρ1", "ρ0's low end from"], slots.map((slot) =>
      h("tr", {}, h("td", {}, `slot ${slot.slot}`),
        value(slot, "theta"), value(slot, "rho0"), value(slot, "rho1"),
        h("td", {}, slot.bottom_fraction
          ? `the lowest ${pct(slot.bottom_fraction)} of scores` : "—"))), "slot-noise");
  }

  async function noiseCard(body, id, model, points) {
    body.replaceChildren();
    if (!model.noise) {
      body.append(note("This model's task has no click-noise rates."));
      return;
    }
    let n = null;
    try {
      n = await api("GET", modelPath(id, "/noise"));
      const iv = n.interval || {};
      body.append(h("dl", { class: "facts", id: "noise-now" },
        fact("status", n.status), fact("estimator", n.estimator),
        fact("ρ0", fmt(n.rho0) + (iv.rho0 ? interval(iv.rho0[0], iv.rho0[1]) : "")),
        fact("ρ1", fmt(n.rho1) + (iv.rho1 ? interval(iv.rho1[0], iv.rho1[1]) : "")),
        fact("source", n.source), fact("plays used", n.n_events),
        fact("estimated", when(n.estimated_at)),
        n.one_right_label === null || n.one_right_label === undefined ? null
          : fact("one right label", n.one_right_label ? "stated" : "not stated")));
      if (n.reason) body.append(note(REASONS[n.reason] || n.reason));
      if (n.slots && n.slots.length) {
        body.append(h("h3", {}, "Per-slot estimate"), slotNoiseTable(n.slots));
      }
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) throw err;
    }
    const chart = h("div", { class: "chart-box", id: "noise-chart" });
    body.append(chart);
    // a point without an interval breaks the band (it is not shaded across)
    const band = (kind) => points.map((p) => (p[`${kind}_interval`]
      ? [p.t, ...p[`${kind}_interval`]] : [p.t, null, null]));
    NoisyChart.draw(chart, {
      title: "noise rates", yMin: 0,
      empty: "No points yet.",
      series: [
        { name: "ρ0 (false click)", color: COLORS.rho0, band: band("rho0"),
          points: points.map((p) => [p.t, p.rho0]) },
        { name: "ρ1 (missed click)", color: COLORS.rho1, band: band("rho1"),
          points: points.map((p) => [p.t, p.rho1]) },
      ],
    });
    const banded = points.some((p) => p.rho0_interval || p.rho1_interval);
    const published = n && n.interval && n.interval.rho0;
    body.append(note(banded ? "Shaded: the published anchor estimate's 95% interval at "
      + "each point since its publish (a bar where a single point has it)."
      : published ? "No point since the estimate was published: its interval is above, "
        + "and is shaded from the model's next point on."
        : "No interval: no estimate with an interval was published for these rates.",
    "muted band-caption"));
  }

  /* What each source of a rank model's position bias means. */
  const BIAS_SOURCES = {
    configured: "the model's position_bias param",
    estimated: "the published per-slot estimate",
    insufficient_data: "no per-slot estimate published yet: every slot at the prior 1",
  };

  /* Line colours of the slots (cycled). */
  const SLOT_COLORS = [COLORS.online, COLORS.calibrated, COLORS.rho0, COLORS.rho1,
                       COLORS.debiased];

  /* One line per slot of `key` (theta or rho0) at the series points that recorded a
   * publish, its intervals as whiskers; slots from `first` on. */
  function slotSeries(published, key, symbol, first) {
    const n = published.length ? published[0].slots.length : 0;
    const out = [];
    for (let k = first; k < n; k++) {
      const at = published.filter((p) => p.slots[k]);
      out.push({ name: `${symbol} slot ${k}`, color: SLOT_COLORS[k % SLOT_COLORS.length],
                 whiskers: true, points: at.map((p) => [p.t, p.slots[k][key]]),
                 band: at.map((p) => [p.t, ...p.slots[k].interval[key]]) });
    }
    return out;
  }

  /* Marks where the per-slot estimate's state becomes flagged (not published, or its last
   * run refused), labelled with the status and reason. */
  function flaggedMarks(points) {
    const marks = [];
    let before = "";
    for (const p of points) {
      const flag = p.slots_status && (p.slots_status !== "published" || p.slots_reason)
        ? `${p.slots_status}${p.slots_reason ? `: ${p.slots_reason}` : ""}` : "";
      if (flag && flag !== before) marks.push({ t: p.t, label: flag });
      before = flag;
    }
    return marks;
  }

  /* A rank model's per-slot examination and click noise over time, with their intervals
   * and the points where the estimate is flagged. */
  function slotEstimateCharts(body, points) {
    const published = points.filter((p) => p.slots);
    const marks = flaggedMarks(points);
    const last = points[points.length - 1];
    body.replaceChildren(h("p", { class: "latest", id: "slot-status" },
      last && last.slots_status ? `per-slot estimate: ${last.slots_status}`
        + (last.slots_reason ? ` (${last.slots_reason})` : "") : "no points yet"));
    const charts = [
      ["slot-theta-chart", "Examination θ per slot (slot 0 = 1)",
       slotSeries(published, "theta", "θ", 1)],
      ["slot-noise-chart", "Click noise per slot: ρ0 (false click), ρ1 (missed click)",
       [...slotSeries(published, "rho0", "ρ0", 0),
        ...(published.length ? [{ name: "ρ1 (every slot)", color: COLORS.debiased,
          dashed: true, whiskers: true,
          points: published.map((p) => [p.t, p.slots[0].rho1]),
          band: published.map((p) => [p.t, ...p.slots[0].interval.rho1]) }] : [])]],
    ];
    for (const [id, title, series] of charts) {
      const box = h("div", { class: "chart-box", id });
      body.append(h("h3", {}, title), box);
      NoisyChart.draw(box, {
        title, yMin: 0, series, marks, markName: "estimate flagged",
        empty: "No per-slot estimate published in these points yet.",
      });
    }
    body.append(note("Each point is a published estimate; whiskers: its 95% interval."));
  }

  function positionBiasCard(bias, seriesPromise) {
    const chart = h("div", { class: "chart-box", id: "position-bias-chart" });
    NoisyChart.bars(chart, {
      items: bias.values.map((v, slot) => ({ name: `slot ${slot}`, value: v })),
      yMax: 1, height: 220, yLabel: "θ (slot 0 = 1)", color: COLORS.online,
    });
    const overTime = h("div", { id: "slot-estimate" }, note("Loading…"));
    seriesPromise.then(({ points }) => slotEstimateCharts(overTime, points))
      .catch((err) => overTime.replaceChildren(note(`Could not load: ${err.message}`,
                                                    "error")));
    return h("section", { class: "card", id: "position-bias" },
      h("h2", {}, "Position bias and click noise per slot"),
      h("p", {}, "Examination probability of each slot relative to slot 0. Source: ",
        h("strong", { class: "source" }, bias.source),
        BIAS_SOURCES[bias.source] ? ` (${BIAS_SOURCES[bias.source]})` : ""),
      chart, overTime);
  }

  /* Fields of the apprentice block shown by name; any other is listed as it comes. */
  const APPRENTICE_FIELDS = ["decisions", "agreement", "events", "agreed_events",
                             "baseline_reward", "model_value_estimate"];

  /* A model serving its callers' baselines (or that did): how often it agreed, and the
   * rewards observed (as numbers: a continuous model's reward, a price paid, is no rate). */
  function apprenticeCard(model) {
    const a = model.apprentice;
    const chart = h("div", { class: "chart-box", id: "apprentice-chart" });
    const items = [{ name: "baseline (all events)", value: a.baseline_reward },
                   { name: "model where it agreed", value: a.model_value_estimate }]
      .filter((x) => typeof x.value === "number");
    if (items.length) {
      NoisyChart.bars(chart, { items, yMax: 1, height: 200, yLabel: "mean observed reward",
                               color: COLORS.online });
    }
    const rest = Object.entries(a).filter(([k]) => !APPRENTICE_FIELDS.includes(k));
    return h("section", { class: "card", id: "apprentice" }, h("h2", {}, "Apprentice"),
      note(model.mode === "apprentice"
        ? "Serving the callers' baselines and learning from their feedback."
        : "Back online; what it saw while an apprentice:"),
      h("dl", { class: "facts" },
        fact("decisions", a.decisions), fact("agreement", pct(a.agreement)),
        fact("events with feedback", a.events), fact("agreed events", a.agreed_events),
        fact("baseline reward", fmt(a.baseline_reward)),
        fact("model value where it agreed", fmt(a.model_value_estimate)),
        rest.map(([k, v]) => fact(k, short(v)))),
      chart,
      note("The baselines are served deterministically, so the model's own choice is " +
           "observed only where it agreed: its value is known on that share of the traffic."));
  }

  async function versionsCard(body, id, refresh) {
    const data = await api("GET", modelPath(id, "/versions"));
    const rows = data.versions.map((v) => h("tr", { "data-version": v.version },
      h("td", { class: "num" }, v.version), h("td", {}, when(v.created_at)),
      h("td", { class: "num" }, v.events_applied), h("td", {}, v.reason || ""),
      h("td", {}, v.current ? h("strong", {}, "current")
        : confirmButton("Roll back", `Roll back to v${v.version}?`, async () => {
          try {
            const r = await api("POST", modelPath(id, "/rollback"), { version: v.version });
            flash(body, `Rolled back to v${r.rolled_back_to}: now version ${r.version}.`);
            setTimeout(refresh, 800);
          } catch (err) { flash(body, `Rollback failed: ${err.message}`, "error"); }
        }))));
    body.replaceChildren(data.versions.length
      ? table(["version", "published", "events applied", "why kept", ""], rows)
      : note("No kept versions yet."));
  }

  function flash(body, text, cls) {
    body.prepend(h("p", { class: cls || "ok", role: "status" }, text));
  }

  function valueText(v) {
    return v ? `${fmt(v.estimate)}${interval(v.ci_low, v.ci_high)}` : "—";
  }

  async function challengersCard(body, id, refresh) {
    const data = await api("GET", modelPath(id, "/challengers"));
    const champion = data.champion || {};
    const rows = [h("tr", { class: "champion" }, h("td", {}, "champion"), h("td", {}, ""),
      h("td", { class: "num" }, champion.events ?? "—"),
      h("td", {}, valueText(champion.value)), h("td", {}, ""), h("td", {}, ""))];
    for (const c of data.challengers || []) {
      rows.push(h("tr", { "data-challenger": c.name }, h("td", {}, c.name),
        h("td", {}, c.algorithm), h("td", { class: "num" }, c.events ?? "—"),
        h("td", {}, valueText(c.value)), h("td", {}, valueText(c.vs_champion)),
        h("td", {}, confirmButton("Promote", `Promote ${c.name}?`, async () => {
          try {
            const r = await api("POST", modelPath(id, "/promote"), { challenger: c.name });
            flash(body, `Promoted ${c.name}: now version ${r.version} (${r.algorithm}).`);
            setTimeout(refresh, 800);
          } catch (err) { flash(body, `Promotion failed: ${err.message}`, "error"); }
        }))));
    }
    const plot = intervalPlot([{ name: "champion", v: champion.value },
      ...(data.challengers || []).map((c) => ({ name: c.name, v: c.value }))]);
    body.replaceChildren(...[
      (data.challengers || []).length ? null
        : note("No challengers. Add one with POST …/challengers."),
      table(["name", "algorithm", "events", "estimated value [interval]",
             "vs champion [interval]", ""], rows),
      plot].filter(Boolean));
  }

  /* Each estimate as a dot with its interval, on one shared axis. */
  function intervalPlot(items) {
    const shown = items.filter((x) => x.v && x.v.estimate !== null && x.v.estimate !== undefined);
    if (!shown.length) return null;
    const NS = "http://www.w3.org/2000/svg";
    const lo = Math.min(...shown.map((x) => x.v.ci_low ?? x.v.estimate));
    const hi = Math.max(...shown.map((x) => x.v.ci_high ?? x.v.estimate));
    const span = hi - lo || 1, W = 640, row = 22, left = 120;
    const sx = (v) => left + ((v - lo + span * 0.05) / (span * 1.1)) * (W - left - 16);
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", `0 0 ${W} ${row * shown.length + 24}`);
    svg.setAttribute("class", "chart intervals");
    const add = (name, attrs, text) => {
      const n = document.createElementNS(NS, name);
      for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
      if (text !== undefined) n.textContent = text;
      svg.appendChild(n);
    };
    shown.forEach((x, i) => {
      const y = row * i + 14;
      add("text", { x: left - 8, y: y + 4, "text-anchor": "end", class: "tick" }, x.name);
      if (x.v.ci_low !== null && x.v.ci_low !== undefined) {
        add("line", { x1: sx(x.v.ci_low), x2: sx(x.v.ci_high), y1: y, y2: y,
                      stroke: COLORS.online, "stroke-width": 2 });
      }
      add("circle", { cx: sx(x.v.estimate), cy: y, r: 4, fill: COLORS.calibrated });
    });
    const axisY = row * shown.length + 16;
    for (const t of NoisyChart.ticks(lo, hi, 4)) {
      add("text", { x: sx(t), y: axisY, "text-anchor": "middle", class: "tick" },
          Number(t.toPrecision(3)).toString());
    }
    return h("div", { class: "chart-box", id: "challenger-plot" }, svg);
  }

  function parseLines(data) {
    if (Array.isArray(data)) return data;
    if (data && typeof data === "object") return [data];
    return String(data || "").split("\n").filter((l) => l.trim()).map((l) => {
      try { return JSON.parse(l); } catch { return null; }
    }).filter(Boolean);
  }

  const first = (o, names) => {
    for (const n of names) if (o[n] !== undefined && o[n] !== null) return o[n];
    return undefined;
  };
  const short = (v) => (v === undefined ? "—" : typeof v === "object" ? JSON.stringify(v)
    : typeof v === "number" ? fmt(v) : String(v));

  const RECENT_ROWS = 20;

  /* The newest lines of the decision log, newest first. */
  async function recentLog(id) {
    return parseLines(await api("GET",
      modelPath(id, `/log?order=desc&limit=${RECENT_ROWS}`)));
  }

  /* A shown candidate: the id the request sent; for a slot whose id the model's id table
   * does not hold (logged before it kept them, or beyond its capacity) the leading hex digits
   * of its 64-bit id hash (a signed integer in the log; the low digits do not survive a
   * JavaScript number). */
  const itemText = (slot) => (typeof slot.id === "string" ? slot.id
    : typeof slot.id_hash === "number"
      ? `#${(slot.id_hash < 0 ? slot.id_hash + 2 ** 64 : slot.id_hash).toString(16)
        .padStart(16, "0").slice(0, 8)}…` : short(slot.id_hash));

  /* A decision's table rows: one for a label decision or marker, one per slot of a ranking
   * (the time, event and version spanning them). */
  function decisionRows(e) {
    if (e.type !== "event") {
      const detail = Object.fromEntries(Object.entries(e)
        .filter(([k]) => !["type", "stream_id", "time"].includes(k)));
      return [h("tr", { class: "marker" }, h("td", {}, clock(e.time)),
        h("td", { colspan: 5 }, `${e.type} ${JSON.stringify(detail)}`))];
    }
    const timeout = e.kind === "timeout";
    const lead = [h("td", {}, clock(e.time)), h("td", {}, short(e.event_id)),
                  h("td", { class: "num" }, short(e.model_version))];
    if (!(e.slots && e.slots.length)) {
      const outcome = first(e.feedback || {}, ["click", "reward", "label", "y"]);
      return [h("tr", {}, lead, h("td", {}, short(e.action)),
        h("td", { class: "num" }, short(e.propensity)),
        h("td", {}, timeout ? "no feedback" : short(outcome)))];
    }
    for (const td of lead) td.setAttribute("rowspan", e.slots.length);
    return e.slots.map((slot, k) => h("tr", { class: k ? "slot" : "slot first" }, k ? null : lead,
      h("td", {}, `slot ${slot.slot}: `, h("span", { class: "item-id" }, itemText(slot))),
      h("td", { class: "num" }, short(slot.propensity)),
      h("td", {}, timeout ? "no feedback" : short(slot.click))));
  }

  async function decisionsCard(body, id) {
    const recent = await recentLog(id);
    body.replaceChildren(recent.length
      ? table(["applied", "event", "version", "action, or slot: item id", "propensity",
               "outcome"],
              recent.flatMap(decisionRows), "decisions")
      : note("No decisions logged yet."));
  }

  /* ---------- the learned action (continuous models) ---------- */

  const ACTION_ROWS = 200;

  /* Least squares: the coefficients b minimising |A b - y|^2 (A: rows of equal length), by
   * the normal equations with a tiny ridge, solved by elimination with partial pivoting. */
  function leastSquares(A, y) {
    const p = A[0].length;
    const M = Array.from({ length: p }, (_, i) => Array.from({ length: p + 1 }, (_, j) =>
      (j < p ? A.reduce((s, r) => s + r[i] * r[j], 0) + (i === j ? 1e-9 : 0)
        : A.reduce((s, r, k) => s + r[i] * y[k], 0))));
    for (let c = 0; c < p; c++) {
      let best = c;
      for (let r = c + 1; r < p; r++) if (Math.abs(M[r][c]) > Math.abs(M[best][c])) best = r;
      [M[c], M[best]] = [M[best], M[c]];
      for (let r = 0; r < p; r++) {
        if (r === c || M[c][c] === 0) continue;
        const f = M[r][c] / M[c][c];
        for (let j = c; j <= p; j++) M[r][j] -= f * M[c][j];
      }
    }
    return M.map((row, i) => (row[i] === 0 ? 0 : row[p] / row[i]));
  }

  /* The newest decisions' greedy (learned) and played actions against a one-number summary of
   * each context: the linear index of its features that best fits the greedy actions (least
   * squares over the decisions shown), so that a learned action that follows the context
   * lies along a curve and one that ignores it lies flat. */
  async function learnedActionsCard(body, id, range) {
    const lines = parseLines(await api("GET",
      modelPath(id, `/log?order=desc&limit=${ACTION_ROWS}`)));
    const rows = lines.filter((e) => e.type === "event" && Array.isArray(e.features)
      && Number.isFinite(e.greedy_action) && e.context && Number.isFinite(e.context.action));
    const width = rows.length ? rows[0].features.length + 1 : 0;
    const dense = rows.filter((e) => e.features.length + 1 === width);
    if (dense.length < width + 1) {
      body.replaceChildren(note("Not enough decisions logged yet: the learned action is drawn "
        + "from the newest decisions of the log."));
      return;
    }
    const A = dense.map((e) => [1, ...e.features]);
    const coef = leastSquares(A, dense.map((e) => e.greedy_action));
    const index = A.map((r) => r.reduce((s, v, j) => s + v * coef[j], 0));
    const chart = h("div", { class: "chart-box", id: "learned-actions-chart" });
    body.replaceChildren(
      note(`The newest ${dense.length} decisions: the model's greedy action (learned) and the `
        + "action played, against the context's index w·x, the linear summary of its features "
        + `that best fits the greedy actions (w = ${coef.slice(1).map((v) => fmt(v)).join(", ")};`
        + ` intercept ${fmt(coef[0])}).`),
      chart);
    NoisyChart.scatter(chart, {
      title: "learned action per context", xLabel: "context index w·x",
      yMin: range[0], yMax: range[1],
      series: [
        { name: "played action", color: COLORS.debiased, opacity: 0.5, r: 2,
          points: dense.map((e, k) => [index[k], e.context.action]) },
        { name: "greedy action (learned)", color: COLORS.online,
          points: dense.map((e, k) => [index[k], e.greedy_action]) },
      ],
    });
  }

  /* ---------- evaluations ---------- */

  /* Evaluations started in this browser session, per model, newest first (the service keeps
   * a job a day but does not list them). */
  const startedEvaluations = {
    all() {
      try { return JSON.parse(sessionStorage.getItem(EVALUATIONS) || "{}"); } catch { return {}; }
    },
    of(id) { return this.all()[id] || []; },
    add(id, entry) {
      const all = this.all();
      all[id] = [entry, ...(all[id] || [])].slice(0, MAX_EVALUATIONS);
      sessionStorage.setItem(EVALUATIONS, JSON.stringify(all));
    },
  };
  /* The three estimators of `noisyloop evaluate`, in its plot's order. */
  const ESTIMATORS = { ips: "IPS", snips: "SNIPS", dr: "DR" };
  /* Fields of an evaluation shown by name; any other is listed as it comes. */
  const EVALUATION_FIELDS = ["job_id", "status", "error", "n", "ess", "correction", "policy",
                             "log", "format", "bootstrap"];
  const isEstimate = (v) => v && typeof v === "object" && !Array.isArray(v) &&
    typeof v.value === "number";

  /* A policy typed in the form's "other" field: a JSON object (a configuration) or a name. */
  function typedPolicy(text) {
    const t = text.trim();
    if (t.startsWith("{")) {
      try { return JSON.parse(t); } catch { /* sent as typed: the server names the field */ }
    }
    return t;
  }
  const policyText = (p) => (typeof p === "string" ? p : JSON.stringify(p));

  async function evaluationsCard(body, model) {
    const offered = model.evaluation_policies || [];
    if (!offered.length) {
      body.replaceChildren(note(`The service does not evaluate the decision log of a ` +
                                `${model.task} model.`, "muted hint"));
      return;
    }
    const list = h("div", { class: "evaluations-list" });
    const form = evaluationForm(model, (entry) => {
      startedEvaluations.add(model.model_id, entry);
      list.prepend(evaluationBox(model.model_id, entry));
    });
    const started = startedEvaluations.of(model.model_id);
    body.replaceChildren(form, started.length ? "" : note(
      "Evaluates a policy off-policy on this model's decision log (IPS, SNIPS and DR with " +
      "bootstrap intervals). Evaluations started here are listed while this tab is open.",
      "muted hint"), list);
    list.append(...started.map((entry) => evaluationBox(model.model_id, entry)));
  }

  /* How the form offers each kind of policy the API lists for a model
   * (`evaluation_policies`): the option's value and its text; a kind not listed here is
   * offered by its name. */
  const POLICY_CHOICES = {
    model: ["model", "model (its current snapshot)"],
    "model:greedy": ["model:greedy", "model:greedy (its greedy label)"],
    uniform: ["uniform", "uniform"],
    logging: ["logging", "logging (what was played)"],
    "fixed:N": ["fixed", "fixed:N (always label N)"],
    configuration: ["other", "other (a name, or a configuration as JSON)"],
  };

  function evaluationForm(model, onStart) {
    const field = (label, input) => h("label", {}, h("span", {}, label), input);
    const policy = h("select", { id: "eval-policy", name: "policy" },
      model.evaluation_policies.map((kind) => {
        const [value, text] = POLICY_CHOICES[kind] || [kind, kind];
        return h("option", { value }, text);
      }));
    const label = h("input", { id: "eval-label", name: "label", type: "number", min: 0,
                               max: model.n_classes ? model.n_classes - 1 : undefined,
                               value: 0, step: 1 });
    const labelField = field("N", label);
    const other = h("input", { id: "eval-other", name: "other", type: "text", spellcheck: "false",
                               placeholder: "policy the server knows" });
    const otherField = field("policy name or JSON", other);
    const fraction = h("input", { id: "eval-train-fraction", name: "train_fraction",
                                  type: "number", min: 0, max: 1, step: "any",
                                  placeholder: "0.5" });
    const fractionField = field("train fraction", fraction);
    const showFields = () => {
      labelField.hidden = policy.value !== "fixed";
      otherField.hidden = fractionField.hidden = policy.value !== "other";
    };
    showFields();
    policy.addEventListener("change", showFields);
    // a model whose clicks are corrected per slot (its per-slot estimate, which the service
    // uses when no rates are sent) gets empty fields; another, the rates in force
    const perSlot = Boolean(model.position_bias);
    const rate = (name) => h("input", {
      id: `eval-${name}`, name, type: "number", min: 0, max: 0.999, step: "any",
      placeholder: perSlot ? "per slot" : "none",
      title: perSlot ? "empty: the model's per-slot estimate corrects the clicks" : undefined,
      value: model.noise && !perSlot ? model.noise[name] : undefined });
    const rho0 = rate("rho0"), rho1 = rate("rho1");
    const status = h("p", { class: "muted", role: "status", id: "eval-status" });
    const submit = h("button", { type: "submit" }, "Evaluate");
    const form = h("form", { class: "inline", id: "eval-form", autocomplete: "off" },
      field("policy", policy), labelField, otherField, fractionField, field("ρ0", rho0),
      field("ρ1", rho1), submit, status);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const request = { policy: policy.value === "fixed" ? `fixed:${label.value}`
        : policy.value === "other" ? typedPolicy(other.value) : policy.value };
      if (policy.value === "other" && fraction.value !== "") {
        request.train_fraction = Number(fraction.value);
      }
      if (rho0.value !== "" || rho1.value !== "") {
        request.rho0 = rho0.value === "" ? null : Number(rho0.value);
        request.rho1 = rho1.value === "" ? null : Number(rho1.value);
      }
      submit.disabled = true;
      status.className = "muted";
      status.textContent = "Queuing…";
      try {
        const job = await api("POST", modelPath(model.model_id, "/evaluations"), request);
        status.textContent = "";
        onStart({ job_id: job.job_id, request, started: new Date().toISOString() });
      } catch (err) {
        status.className = "error";
        status.textContent = `Not started: ${err.message}`;
      } finally {
        submit.disabled = false;
      }
    });
    return form;
  }

  /* One evaluation: what was asked, then its status until done, then its plot and numbers. */
  function evaluationBox(id, entry) {
    const { request } = entry;
    const rates = request.rho0 === undefined
      ? "no rates sent (a rank model: its per-slot estimate, else its rates; else raw clicks)"
      : `ρ0 ${fmt(request.rho0)}, ρ1 ${fmt(request.rho1)}`;
    const status = h("span", { class: "muted" }, "queued");
    const content = h("div", {});
    const box = h("div", { class: "evaluation", "data-job": entry.job_id },
      h("h3", {}, `policy ${policyText(request.policy)}`),
      h("p", { class: "muted" }, `${rates}; started ${clock(entry.started)}; `, status),
      content);
    const rid = renderId;
    let delay = POLL_MS;
    const again = () => {
      setTimeout(poll, delay);
      delay = Math.min(delay * 1.5, MAX_POLL_MS);
    };
    const poll = async () => {
      if (rid !== renderId) return;  // the page was left
      let job;
      try {
        job = await api("GET", modelPath(id, `/evaluations/${encodeURIComponent(entry.job_id)}`));
      } catch (err) {
        if (modelGone(err)) {
          status.textContent = "the model no longer exists";
        } else if (err instanceof ApiError && err.status === 404) {
          status.textContent = "expired (the service keeps an evaluation a day)";
        } else if (!(err instanceof ApiError) || err.status >= 500) {
          // a network failure or a server error: say so and ask again later
          status.textContent = `could not load (${err.message}); retrying`;
          again();
        } else {
          status.textContent = `could not load: ${err.message}`;
        }
        return;
      }
      if (rid !== renderId) return;
      status.textContent = job.status;
      if (job.status === "failed") {
        content.replaceChildren(note(job.error || "failed", "error"));
      } else if (job.status === "done") {
        content.replaceChildren(...evaluationResult(job));
      } else {
        again();
      }
    };
    poll();
    return box;
  }

  const ESTIMATOR_COLORS = { ips: COLORS.online, snips: COLORS.calibrated, dr: COLORS.rho1 };

  /* A rank evaluation's every position (its three estimators side by side, then a table with
   * each one's effective sample size and flag) and the slate estimates. */
  function positionsResult(job) {
    const out = [];
    const positions = Array.isArray(job.positions) ? job.positions : [];
    if (positions.length) {
      const chart = h("div", { class: "chart-box positions-chart" });
      NoisyChart.groupedErrorbars(chart, {
        groups: Object.entries(ESTIMATORS).map(([k, name]) => ({
          name, color: ESTIMATOR_COLORS[k] })),
        items: positions.map((p) => ({ name: `slot ${p.position}`, values: Object.keys(
          ESTIMATORS).map((k) => (isEstimate(p[k]) ? { value: p[k].value, low: p[k].ci_low,
          high: p[k].ci_high } : null)) })),
        title: ["every position: value of the slot's item (95% interval)"],
        yLabel: "estimated value", empty: "No position has an estimate.",
      });
      out.push(h("h4", {}, "Positions"), chart, table(
        ["slot", "IPS", "SNIPS", "DR", "ESS", ""],
        positions.map((p) => h("tr", { "data-position": p.position },
          h("td", { class: "num" }, p.position),
          Object.keys(ESTIMATORS).map((k) => h("td", { class: k }, isEstimate(p[k])
            ? [fmt(p[k].value), h("small", {}, interval(p[k].ci_low, p[k].ci_high).trim())]
            : "—")),
          h("td", { class: "num" }, fmt(p.ess, 0)),
          h("td", { class: p.insufficient_data ? "error flag" : "flag" },
            p.insufficient_data ? "insufficient_data" : ""))),
        "positions"),
      // a flagged slot's reason below the table (long: it would widen the narrow table)
      ...positions.filter((p) => p.insufficient_data).map((p) => note(
        `slot ${p.position}: ${p.reason || "insufficient_data"}`, "muted flag-reason")));
    }
    const slates = job.slates;
    if (slates && (isEstimate(slates.rips) || isEstimate(slates.snrips))) {
      const chart = h("div", { class: "chart-box slates-chart" });
      const items = [["rips", "RIPS"], ["snrips", "SNRIPS"]].filter(([k]) => isEstimate(
        slates[k])).map(([k, name]) => ({ name, value: slates[k].value,
        low: slates[k].ci_low, high: slates[k].ci_high }));
      NoisyChart.errorbars(chart, {
        items, height: 220, color: COLORS.online,
        title: [`slates: expected clicks per ranking (${fmt(slates.n_slates, 0)} rankings ` +
                `of ${fmt(slates.slots, 0)} slots)`],
        yLabel: "clicks per ranking",
      });
      out.push(h("h4", {}, "Slates"), chart, table(["estimator", "value", "95% interval"],
        items.map((x) => h("tr", { "data-slate": x.name.toLowerCase() },
          h("td", {}, x.name), h("td", { class: "num" }, fmt(x.value)),
          h("td", {}, interval(x.low, x.high).trim() || "—"))), "slates"));
    }
    return out;
  }

  function evaluationResult(job) {
    const names = [...Object.keys(ESTIMATORS).filter((k) => isEstimate(job[k])),
                   ...Object.keys(job).filter((k) => !ESTIMATORS[k] && isEstimate(job[k]))];
    const ranked = Array.isArray(job.positions) && job.positions.length > 0;
    const correction = job.correction || {};
    const chart = h("div", { class: "chart-box evaluation-chart" });
    NoisyChart.errorbars(chart, {
      items: names.map((k) => ({ name: ESTIMATORS[k] || k, value: job[k].value,
                                 low: job[k].ci_low, high: job[k].ci_high })),
      title: [`policy ${policyText(job.policy)} on the ${job.log || "log"}` +
              (ranked ? " (slot 0)" : ""),
              `n = ${fmt(job.n, 0)}, ESS = ${fmt(job.ess, 0)}, ` +
              (correction.rho0 === null || correction.rho0 === undefined ? "raw clicks"
                : correction.theta ? "corrected per slot" : "h(f)")],
      yLabel: "estimated value (95% interval)", color: COLORS.online,
      empty: "No estimates (no events in the log?).",
    });
    const rows = names.map((k) => h("tr", { "data-estimator": k },
      h("td", {}, ESTIMATORS[k] || k), h("td", { class: "num" }, fmt(job[k].value)),
      h("td", {}, interval(job[k].ci_low, job[k].ci_high).trim() || "—")));
    const rest = Object.entries(job).filter(([k, v]) => !EVALUATION_FIELDS.includes(k) &&
      !isEstimate(v) && !(ranked && ["positions", "slates"].includes(k)));
    const scalars = rest.filter(([, v]) => v === null || typeof v !== "object");
    const nested = rest.filter(([, v]) => v !== null && typeof v === "object");
    return [
      chart,
      table(["estimator", "value", "95% interval"], rows, "estimates"),
      h("dl", { class: "facts" }, fact("events (n)", fmt(job.n, 0)),
        fact("effective sample size", fmt(job.ess, 1)), fact("bootstrap", job.bootstrap),
        fact("reward", correction.reward), scalars.map(([k, v]) => fact(k, short(v)))),
      ...(ranked ? positionsResult(job) : []),
      ...nested.map(([k, v]) => h("details", {}, h("summary", {}, k),
        h("pre", {}, JSON.stringify(v, null, 2)))),
    ];
  }

  async function deadLettersCard(body, id) {
    const data = await api("GET", modelPath(id, "/dead-letters?limit=5"));
    body.replaceChildren(data.total
      ? h("div", {}, note(`${data.total} held (the oldest first):`),
        table(["event", "kind", "reason", "when"], data.dead_letters.map((d) => h("tr", {},
          h("td", {}, d.event_id || "—"), h("td", {}, d.kind || "—"), h("td", {}, d.reason),
          h("td", {}, when(d.dead_lettered_at))))))
      : note("None: every accepted event is applied or waiting."));
  }

  function configCard(model) {
    const config = {};
    for (const k of ["task", "algorithm", "n_features", "n_classes", "params", "feedback",
                     "seed", "label_budget", "max_feature_norm", "versions", "created_at"]) {
      if (model[k] !== undefined && model[k] !== null) config[k] = model[k];
    }
    return h("section", { class: "card wide", id: "config" }, h("h2", {}, "Configuration"),
      h("pre", {}, JSON.stringify(config, null, 2)));
  }

  route();
})();
