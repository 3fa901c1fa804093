// The console's page: runs (#/), a run (#/run/<id>), start a run (#/start). Plain ES modules, no build step.
import { RawJSON, el, parseJSON, schemaForm, stringify } from "./form.js";
import { timelinePanel } from "./timeline.js";

const main = document.getElementById("main");
const banner = document.getElementById("banner");
let info = null;
let leave = () => {};  // what the current view closes when the page moves on (its event stream, timers)

// One line at the top for what concerns the whole page: Temporal out of reach, an error in the page itself.
function setBanner(text, kind = "temporal") {
  if (!text && banner.dataset.kind && banner.dataset.kind !== kind) return;  // another kind's message stays
  banner.textContent = text;
  banner.hidden = !text;
  banner.dataset.kind = text ? kind : "";
}
function pageError(text) {
  setBanner(`Something went wrong in this page: ${text}. Reload it to start again.`, "page");
}
window.addEventListener("error", (e) => pageError(e.message || String(e.error)));
window.addEventListener("unhandledrejection", (e) => pageError((e.reason && e.reason.message) || String(e.reason)));

async function api(path, options = {}) {
  const init = { credentials: "same-origin", headers: {}, ...options };
  if (init.body !== undefined) {
    init.method = init.method || "POST";
    init.headers = { "Content-Type": "application/json", "X-TW-Console": "1", ...init.headers };
    init.body = stringify(init.body);  // integers past 2^53 and typed JSON travel as their digits
  }
  let resp;
  try { resp = await fetch(path, init); } catch (e) {
    setBanner("The console does not answer (stopped or restarting?): trying again.", "console");
    throw new Error(`the console does not answer: ${e.message}`);
  }
  setBanner("", "console");
  if (resp.status === 401) { location.href = "/login"; throw new Error("sign in"); }
  let data = null;
  try { data = parseJSON(await resp.text()); } catch { data = { error: `${resp.status} ${resp.statusText}` }; }
  if (resp.status === 502) setBanner(`The console cannot reach Temporal: ${data && data.error ? data.error : resp.statusText}. It keeps trying.`);
  else setBanner("");
  if (!resp.ok) {
    const e = new Error(data && data.error ? data.error : `${resp.status}`);
    e.status = resp.status;
    throw e;
  }
  return data;
}

// Ready: the view has drawn what it shows (data, picture, first events). The page's load event waits for it
// (the held image, pages.py), and <html data-ready> says it for whoever waits on a marker instead.
const HOLD_RELEASED = "data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7";
function notReady() { document.documentElement.dataset.ready = "false"; }
function releaseHold() {
  const hold = document.getElementById("ready-hold");
  if (hold && hold.dataset.released !== "1") { hold.dataset.released = "1"; hold.src = HOLD_RELEASED; }
}
function ready() {
  document.documentElement.dataset.ready = "true";
  releaseHold();
}
setTimeout(releaseHold, 9000);  // never hold a page's load longer than the console does (10 s)

// A run's routes by ?id=, so any id a run can have (".", "..", one with "/" or "?") reaches its own run.
function runUrl(runId, sub = "", params = {}) {
  const q = new URLSearchParams({ id: runId, ...params });
  return `/api/run${sub ? `/${sub}` : ""}?${q}`;
}

function toast(text) {
  const t = el("div", { class: "toast", role: "status" }, text);
  document.body.append(t);
  setTimeout(() => t.remove(), 4000);
}

function badge(status) {
  return el("span", { class: `badge ${status || ""}`, "data-status": status || "" }, (status || "unknown").replaceAll("_", " "));
}

function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return d.toLocaleString();
}

function pretty(value) {
  return el("pre", { class: "json" }, stringify(value, 2));
}

// -- runs ---------------------------------------------------------------------------------------

function runsView(params) {
  const graphSel = el("select", { name: "graph", "aria-label": "graph" }, el("option", { value: "" }, "any graph"),
    (info.graphs || []).map((g) => el("option", { value: g.name }, g.name)));
  const statusSel = el("select", { name: "status", "aria-label": "status" }, el("option", { value: "" }, "any status"),
    info.statuses.map((s) => el("option", { value: s }, s.replaceAll("_", " "))));
  const graphText = el("input", { name: "graph_name", placeholder: "any graph", "aria-label": "graph name" });
  const since = el("input", { type: "datetime-local", name: "since", "aria-label": "started after", title: "started after" });
  const until = el("input", { type: "datetime-local", name: "until", "aria-label": "started before", title: "started before" });
  graphSel.value = params.get("graph") || "";
  if (graphSel.value !== (params.get("graph") || "")) graphText.value = params.get("graph") || "";
  statusSel.value = params.get("status") || "";
  const body = el("tbody");
  const more = el("button", { class: "secondary", type: "button" }, "Load more");
  const count = el("span", { class: "muted", id: "runs-count" });
  const error = el("p", { class: "error" });
  let next = null;
  let shown = 0;

  function query() {
    const q = new URLSearchParams();
    const graph = graphText.value.trim() || graphSel.value;
    if (graph) q.set("graph", graph);
    if (statusSel.value) q.set("status", statusSel.value);
    if (since.value) q.set("since", new Date(since.value).toISOString());
    if (until.value) q.set("until", new Date(until.value).toISOString());
    return q;
  }

  async function load(reset) {
    const q = query();
    q.set("page_size", "50");
    if (!reset && next) q.set("next", next);
    error.textContent = "";
    try {
      const page = await api(`/api/runs?${q}`);
      if (reset) { body.replaceChildren(); shown = 0; }
      for (const r of page.runs) {
        body.append(el("tr", { "data-run": r.id },
          el("td", { class: "id" }, el("a", { href: `#/run/${encodeURIComponent(r.id)}` }, r.id)),
          el("td", {}, r.graph),
          el("td", {}, badge(r.status)),
          el("td", { class: "hide-narrow" }, when(r.start_time)),
          el("td", { class: "hide-narrow" }, when(r.close_time))));
      }
      shown += page.runs.length;
      next = page.next;
      more.hidden = !next;
      count.textContent = `${shown} shown${next ? ", more to load" : ""}`;
    } catch (e) { error.textContent = e.message; }
    ready();
  }

  function apply() {
    const q = query();
    history.replaceState(null, "", `#/?${q}`);
    load(true);
  }
  for (const c of [graphSel, statusSel, since, until]) c.addEventListener("change", apply);
  graphText.addEventListener("change", apply);
  more.addEventListener("click", () => load(false));

  main.replaceChildren(el("section", { class: "card" },
    el("h1", {}, "Runs"),
    el("div", { class: "filters" }, el("label", {}, "Graph", graphSel), el("label", {}, "or by name", graphText),
      el("label", {}, "Status", statusSel), el("label", {}, "Started after", since), el("label", {}, "Started before", until),
      el("label", {}, "\u00a0", el("button", { type: "button", class: "secondary", onclick: () => load(true) }, "Refresh"))),
    error,
    el("table", { id: "runs" }, el("thead", {}, el("tr", {}, el("th", {}, "Workflow id"), el("th", {}, "Graph"), el("th", {}, "Status"),
      el("th", { class: "hide-narrow" }, "Started"), el("th", { class: "hide-narrow" }, "Closed"))), body),
    el("div", { class: "actions", style: "margin-top:.8rem" }, more, count)),
    schedulesCard());
  load(true);
  const timer = setInterval(() => { if (shown <= 50 && !document.hidden) load(true); }, 5000);
  leave = () => clearInterval(timer);
}

// Temporal Schedules that start runs (GET /api/schedules): a small list under the runs.
function schedulesCard() {
  const body = el("tbody");
  const note = el("p", { class: "muted" }, "Loading…");
  api("/api/schedules").then((data) => {
    note.textContent = data.schedules.length ? "" : "No schedules.";
    for (const s of data.schedules) {
      const spec = [...(s.spec.cron || []), ...(s.spec.every_seconds || []).map((n) => `every ${n}s`)].join(", ");
      body.append(el("tr", { "data-schedule": s.id },
        el("td", { class: "id" }, s.id), el("td", {}, s.workflow || ""), el("td", {}, spec),
        el("td", {}, s.paused ? "paused" : "active"),
        el("td", { class: "hide-narrow" }, when(s.next_runs[0])),
        el("td", { class: "hide-narrow" }, s.recent_runs.length ? el("a", { href: `#/run/${encodeURIComponent(s.recent_runs[s.recent_runs.length - 1].workflow_id)}` }, "last run") : "")));
    }
  }).catch((e) => { note.textContent = e.message; note.className = "error"; });
  return el("section", { class: "card", id: "schedules" }, el("h2", {}, "Schedules"), note,
    el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "Schedule"), el("th", {}, "Graph"), el("th", {}, "When"),
      el("th", {}, "State"), el("th", { class: "hide-narrow" }, "Next"), el("th", { class: "hide-narrow" }, "Recent"))), body));
}

// A message into a running or keep-alive run, with what it does if the run is busy (POST /api/runs/<id>/send).
function sendCard(runId) {
  const message = el("input", { name: "message", placeholder: '"hello" (JSON)', "aria-label": "message as JSON" });
  const policy = el("select", { name: "policy", "aria-label": "if the run is busy" },
    el("option", { value: "" }, "the run's policy"),
    ["enqueue", "reject", "interrupt", "rollback"].map((p) => el("option", { value: p }, p)));
  const error = el("p", { class: "error", role: "alert" });
  async function send() {
    error.textContent = "";
    let value;
    try { JSON.parse(message.value); value = new RawJSON(message.value.trim()); } catch (e) { error.textContent = `not JSON: ${e.message}`; return; }
    try {
      const r = await api(runUrl(runId, "send"), { body: { message: value, policy: policy.value || null } });
      toast(r.accepted && r.accepted.interrupts ? "Sent: it interrupted the run's turn" : "Sent");
      message.value = "";
    } catch (e) { error.textContent = e.message; }
  }
  return el("section", { class: "card", id: "send" }, el("h2", {}, "Send a message"),
    el("div", { class: "filters" }, el("label", {}, "Message", message), el("label", {}, "If busy", policy),
      el("label", {}, "\u00a0", el("button", { type: "button", onclick: send }, "Send"))), error);
}

// -- a run --------------------------------------------------------------------------------------

const STATES = ["idle", "running", "done", "failed", "retrying", "waiting"];

// Mermaid (5 MB) is loaded when a picture is first drawn, after the run's event stream has opened: the runs list
// never pays for it, and a run page follows its events while it loads.
let mermaidLoading = null;
function loadMermaid() {
  if (window.mermaid) return Promise.resolve(window.mermaid);
  if (!mermaidLoading) {
    mermaidLoading = new Promise((resolve, reject) => {
      const script = el("script", { src: "/static/mermaid.min.js" });
      script.onload = () => resolve(window.mermaid);
      script.onerror = () => { mermaidLoading = null; reject(new Error("mermaid.min.js did not load")); };
      document.head.append(script);
    });
  }
  return mermaidLoading;
}
let graphSeq = 0;

function runView(runId) {
  const header = el("div");
  const graphBox = el("div", { id: "graph" }, el("p", { class: "muted" }, "Loading the picture…"));
  const legend = el("div", { class: "legend" }, STATES.map((s) => el("span", {}, el("i", { class: `lg-${s}`, style: `background:${legendColour(s)}` }), s)));
  const requestsBox = el("div", { id: "requests" });
  const outputsBox = el("div", { id: "outputs" });
  const stateBox = el("div", { id: "state" });
  const checkpointsBox = el("div", { id: "checkpoints" });
  const sendBox = el("section", { class: "card", id: "send-event", hidden: true });
  const messageCard = sendCard(runId);  // a graph run's messages; a LlamaIndex run takes events (sendBox)
  const streamBox = el("div", { id: "streams" });
  const log = el("div", { class: "log", id: "events" });
  const eventsCount = el("span", { class: "muted", id: "events-count" }, "0 events");
  const superstepText = el("span", { class: "muted", id: "superstep" });
  const timeline = timelinePanel(runId, api);
  main.replaceChildren(
    header,
    el("div", { class: "grid" },
      el("div", {},
        el("section", { class: "card" }, el("h2", {}, "Graph ", superstepText), graphBox, legend),
        el("section", { class: "card" }, el("h2", {}, "Requests"), requestsBox),
        el("section", { class: "card" }, el("h2", {}, "Timeline"), timeline.element),
        sendBox,
        messageCard,
        el("section", { class: "card" }, el("h2", {}, "Live output"), streamBox),
        el("section", { class: "card" }, el("h2", {}, "Events ", eventsCount), log)),
      el("div", {},
        el("section", { class: "card" }, el("h2", {}, "Outputs"), outputsBox),
        el("section", { class: "card" }, el("h2", {}, "State"), stateBox),
        el("section", { class: "card" }, el("h2", {}, "Checkpoints"), checkpointsBox))));

  let closed = false;
  let nodeIds = {};
  const executorState = new Map();
  let waiting = new Set();
  let total = 0;
  let refreshTimer = null;
  let drawPending = false;
  const streams = new Map();

  function setState(executor, state) { executorState.set(executor, state); scheduleDraw(); }
  function scheduleDraw() {
    if (drawPending) return;
    drawPending = true;
    requestAnimationFrame(() => { drawPending = false; paint(); });
  }
  function paint() {
    for (const [executor, nodeId] of Object.entries(nodeIds)) {
      const node = findNode(nodeId);
      if (!node) continue;
      let state = executorState.get(executor) || "idle";
      if (waiting.has(executor)) state = "waiting";
      for (const s of STATES) node.classList.remove(`st-${s}`);
      node.classList.add(`st-${state}`);
      node.setAttribute("data-executor", executor);
      node.setAttribute("data-state", state);
    }
  }
  function findNode(nodeId) {
    // A sub-workflow's executor is drawn as the Mermaid subgraph of the same id (Agent Framework's text).
    return graphBox.querySelector(`g.node[data-id="${nodeId}"]`) ||
      [...graphBox.querySelectorAll("g.node")].find((g) => new RegExp(`(^|-)${nodeId}-\\d+$`).test(g.id)) ||
      [...graphBox.querySelectorAll("g.cluster")].find((g) => g.id === nodeId || g.id.endsWith(`-${nodeId}`));
  }

  async function drawGraph(picture) {
    if (!picture) return;
    nodeIds = picture.node_ids;
    try {
      await loadMermaid();
      if (closed) return;
      // Labels as SVG text, never HTML (an executor id holding markup stays text: nothing is fetched); the
      // top-level setting is the one Mermaid reads, the flowchart one is its older name.
      window.mermaid.initialize({ startOnLoad: false, securityLevel: "strict", theme: "neutral", htmlLabels: false, flowchart: { htmlLabels: false } });
      const { svg } = await window.mermaid.render(`graph-${++graphSeq}`, picture.mermaid);
      graphBox.innerHTML = svg;
      paint();
    } catch (e) { graphBox.replaceChildren(el("p", { class: "error" }, `could not draw the graph: ${e.message}`)); }
  }

  // Ready once the run is drawn (its data and picture) and its first events are in (or 3 s have passed).
  let drawnOnce = false;
  let eventsOnce = false;
  function maybeReady() { if (drawnOnce && eventsOnce && !closed) { flushLog(); ready(); } }
  const eventsWait = setTimeout(() => { eventsOnce = true; maybeReady(); }, 3000);

  async function refresh() {
    try { await draw(); } finally { if (!drawnOnce) { drawnOnce = true; maybeReady(); } }
  }
  async function draw() {
    let run;
    try { run = await api(runUrl(runId)); } catch (e) {
      header.replaceChildren(el("section", { class: "card" }, el("h1", {}, runId), el("p", { class: "error" }, e.message)));
      return;
    }
    if (closed) return;
    const st = run.status && !run.status.unavailable ? run.status : null;
    const llama = run.kind === "llama_index";
    const shown = run.temporal_status === "running" ? (st ? st.status : "running") : run.temporal_status;
    header.replaceChildren(el("section", { class: "card" },
      el("h1", {}, run.id, " ", badge(shown)),
      el("dl", { class: "kv" },
        el("dt", {}, llama ? "LlamaIndex workflow" : "Graph"), el("dd", { id: "run-graph" }, run.graph),
        run.scheduled_by ? [el("dt", {}, "Scheduled by"), el("dd", { id: "scheduled-by" }, run.scheduled_by)] : null,
        el("dt", {}, "Started"), el("dd", {}, when(run.start_time)),
        run.close_time ? [el("dt", {}, "Closed"), el("dd", {}, when(run.close_time))] : null,
        st && !llama ? [el("dt", {}, "Superstep"), el("dd", {}, String(st.superstep))] : null,
        st && llama ? [el("dt", {}, "Steps running"), el("dd", { id: "in-flight" }, (st.in_flight || []).join(", ") || "none")] : null,
        st && st.error ? [el("dt", {}, "Error"), el("dd", { class: "error" }, st.error)] : null,
        st && st.warnings && st.warnings.length ? [el("dt", {}, "Warnings"), el("dd", {}, st.warnings.map((w) => el("div", { class: "error" }, w.message)))] : null,
        st && st.lineage ? [el("dt", {}, "Forked from"), el("dd", {}, el("a", { href: `#/run/${encodeURIComponent(st.lineage.workflow_id)}` }, st.lineage.workflow_id))] : null)));
    if (!graphBox.querySelector("svg")) {
      if (run.picture) await drawGraph(run.picture);
      else graphBox.replaceChildren(el("p", { class: "muted", id: "no-picture" }, `No picture: ${run.picture_note || "the run keeps none"}.`));
    }
    waiting = new Set(run.pending_requests.map((r) => r.source_executor_id));
    paint();
    renderRequests(run.pending_requests);
    const outputs = llama ? (run.result && !run.result.unavailable ? [run.result.result] : []) : (st && st.outputs) || [];
    outputsBox.replaceChildren(...(outputs.length ? outputs.map((o) => pretty(o)) : [el("p", { class: "muted" }, "None yet.")]));
    if (llama && run.temporal_status === "running") renderSendEvent(run.picture); else sendBox.hidden = true;
    messageCard.hidden = llama;
    stateBox.replaceChildren(run.state && !run.state.unavailable ? pretty(run.state) : el("p", { class: "muted" }, run.state && run.state.unavailable ? run.state.unavailable : "Empty."));
    renderCheckpoints(run.checkpoints, run.temporal_status === "running");
    timeline.refresh();
  }
  function scheduleRefresh() {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(refresh, 250);
  }

  const forms = new Map();  // request id -> its box, kept while it stays pending (what was typed survives refreshes)
  function renderRequests(pending) {
    const ids = new Set(pending.map((r) => r.request_id));
    for (const [id, box] of forms) if (!ids.has(id)) { box.remove(); forms.delete(id); }
    for (const r of pending) if (!forms.has(r.request_id)) forms.set(r.request_id, requestBox(r));
    requestsBox.replaceChildren(...(pending.length ? pending.map((r) => forms.get(r.request_id)) : [el("p", { class: "muted", id: "no-requests" }, "No pending requests.")]));
  }

  function requestBox(r) {
    const error = el("p", { class: "error", role: "alert" });
    const box = el("div", { class: "request", "data-request": r.request_id });
    const send = async (body, buttons) => {
      error.textContent = "";
      buttons.forEach((b) => { b.disabled = true; });
      try {
        await api(runUrl(runId, "requests", { request_id: r.request_id }), { body });
        toast("Answer accepted");
        scheduleRefresh();
      } catch (e) { error.textContent = e.message; }
      buttons.forEach((b) => { b.disabled = false; });
    };
    const data = r.data;
    if (data && typeof data === "object" && data.type === "function_approval_request") {
      const call = data.function_call || {};
      let args = call.arguments;
      try { if (typeof args === "string") args = JSON.parse(args); } catch { /* shown as text */ }
      const approve = el("button", { type: "button", "data-action": "approve" }, "Approve");
      const deny = el("button", { type: "button", class: "danger", "data-action": "deny" }, "Deny");
      approve.addEventListener("click", () => send({ approve: true }, [approve, deny]));
      deny.addEventListener("click", () => send({ approve: false }, [approve, deny]));
      box.append(el("div", {}, el("span", { class: "muted" }, `${r.source_executor_id} asks to call `), el("span", { class: "tool" }, call.name || "a tool")),
        args !== undefined ? pretty(args) : null, el("div", { class: "actions" }, approve, deny), error);
      return box;
    }
    const form = schemaForm(r.response_schema || {});
    const submit = el("button", { type: "submit" }, "Send answer");
    const f = el("form", { novalidate: true }, form.node, el("div", { class: "actions" }, submit), error);
    f.addEventListener("submit", (ev) => {
      ev.preventDefault();
      let read;
      try { read = form.read(); } catch (e) { error.textContent = `The page could not read the form: ${e.message}`; return; }
      if (read.errors) { error.textContent = "Fix the fields marked above."; return; }
      send({ response: read.value }, [submit]);
    });
    box.append(el("div", {}, el("span", { class: "muted" }, `${r.source_executor_id} asks`, r.response_type ? ` (answer: ${r.response_type.split(".").pop()})` : "")),
      pretty(data), f);
    return box;
  }

  // A LlamaIndex run takes events from outside by class name (handler.ctx.send_event): checked by the run.
  let sendForm = null;
  function renderSendEvent(picture) {
    sendBox.hidden = false;
    if (sendForm) return;
    const names = (picture && picture.accepted_events) || [];
    const list = el("datalist", { id: "accepted-events" }, names.map((n) => el("option", { value: n })));
    const cls = el("input", { name: "event_type", list: "accepted-events", placeholder: names[0] || "EventClass", required: true });
    const fields = el("textarea", { name: "event", placeholder: "{\"field\": \"value\"}" });
    const error = el("p", { class: "error", role: "alert" });
    const submit = el("button", { type: "submit" }, "Send event");
    sendForm = el("form", { novalidate: true },
      el("label", {}, "Event class", cls), list, el("label", {}, "Fields (JSON object)", fields),
      el("div", { class: "actions" }, submit), error);
    sendForm.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      error.textContent = "";
      let event;
      try { event = JSON.parse(fields.value.trim() || "{}"); } catch (e) { error.textContent = `not JSON: ${e.message}`; return; }
      submit.disabled = true;
      try {
        const r = await api(`/api/runs/${encodeURIComponent(runId)}/events`, { body: { event_type: cls.value.trim() || null, event } });
        toast(`Event accepted: ${r.accepted.accepted}`);
        scheduleRefresh();
      } catch (e) { error.textContent = e.message; }
      submit.disabled = false;
    });
    sendBox.replaceChildren(el("h2", {}, "Send an event"),
      el("p", { class: "muted" }, "An event the run's steps take, as handler.ctx.send_event does; the run checks its class and fields."),
      sendForm);
  }

  function renderCheckpoints(list, running) {
    if (!list.length) { checkpointsBox.replaceChildren(el("p", { class: "muted" }, "None.")); return; }
    const error = el("p", { class: "error", role: "alert" });
    const rows = list.slice().reverse().map((c) => {
      const reset = el("button", { type: "button", class: "secondary", "data-action": "reset", disabled: !running, hidden: c.resettable === false }, "Reset to");
      const fork = el("button", { type: "button", class: "secondary", "data-action": "fork", disabled: c.forkable === false }, "Fork");
      reset.addEventListener("click", async () => {
        if (!confirm(`Reset ${runId} to checkpoint ${c.checkpoint_id} (superstep ${c.superstep})? Steps still running are cancelled.`)) return;
        error.textContent = "";
        try { await api(runUrl(runId, "reset"), { body: { checkpoint_id: c.checkpoint_id } }); toast("Reset accepted"); scheduleRefresh(); } catch (e) { error.textContent = e.message; }
      });
      fork.addEventListener("click", async () => {
        const newId = prompt("Workflow id of the new run", `${runId}-fork-${Date.now().toString(36)}`);
        if (!newId) return;
        error.textContent = "";
        try { const r = await api(runUrl(runId, "fork"), { body: { checkpoint_id: c.checkpoint_id, new_id: newId } }); location.hash = `#/run/${encodeURIComponent(r.started)}`; } catch (e) { error.textContent = e.message; }
      });
      return el("tr", { "data-checkpoint": c.checkpoint_id }, el("td", {}, c.superstep === null || c.superstep === undefined ? "" : String(c.superstep)), el("td", {}, c.label || ""),
        el("td", { class: "hide-narrow" }, when(c.created_at || c.timestamp)), el("td", {}, el("div", { class: "actions" }, reset, fork)));
    });
    checkpointsBox.replaceChildren(el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "Step"), el("th", {}, "Label"), el("th", { class: "hide-narrow" }, "Taken"), el("th", {}, ""))), el("tbody", {}, rows)), error);
  }

  // Live: events over SSE, in batches; the picture's states and the log follow them.
  const lines = [];
  function onEvent(e) {
    total++;
    switch (e.type) {
      case "started": case "reset": executorState.clear(); streams.clear(); streamBox.replaceChildren(); break;
      case "superstep_started":
        for (const [k, v] of executorState) if (v === "done") executorState.set(k, "idle");
        superstepText.textContent = `superstep ${e.superstep ?? ""}`;
        break;
      case "executor_invoked": setState(e.executor_id, "running"); break;
      case "executor_completed": setState(e.executor_id, "done"); break;
      case "executor_failed": setState(e.executor_id, "failed"); break;
      case "step_retry": setState(e.executor_id, "retrying"); break;
      case "llama_event":  // a LlamaIndex run: its steps light as LlamaIndex's StepStateChanged says they run
        if (e.event_type === "workflows.events.StepStateChanged" && e.data) {
          if (e.data.step_state === "running") setState(e.data.name, "running");
          else if (e.data.step_state === "not_running") { setState(e.data.name, "done"); scheduleRefresh(); }
        }
        break;
      case "llama_rest": scheduleRefresh(); break;
      default: break;
    }
    if (e.text && e.executor_id) {
      let s = streams.get(e.executor_id);
      if (!s) { s = el("div", { class: "stream", "data-stream": e.executor_id }); streams.set(e.executor_id, s); streamBox.append(el("div", { class: "muted" }, e.executor_id), s); }
      s.textContent += e.text;
    }
    if (["request_info", "status", "output", "reset", "superstep_completed", "failed", "warning", "executor_failed"].includes(e.type)) scheduleRefresh();
    let summary = e.type === "llama_event" ? e.name : e.type;
    if (e.type === "llama_event" && e.data !== undefined && e.data !== null) summary += ` ${JSON.stringify(e.data).slice(0, 200)}`;
    if (e.type === "llama_rest") summary = e.requests && e.requests.length ? `waiting for input (${e.requests.map((r) => r.request_id).join(", ")})` : "idle";
    if (e.executor_id) summary += ` ${e.executor_id}`;
    if (e.type === "status" && e.status) summary += `: ${e.status.replaceAll("_", " ")}${e.state === "IN_PROGRESS_PENDING_REQUESTS" ? " (a request is pending)" : ""}`;
    if (e.type === "executor_failed") summary += `: ${e.error_type}: ${e.error}`;
    if (e.type === "warning") summary += `: ${e.message}`;
    if (e.type === "output" && e.data !== undefined && !e.text) summary += ` ${stringify(e.data).slice(0, 200)}`;
    lines.push(summary);
  }
  function flushLog() {
    const keep = lines.slice(-300);
    lines.length = 0;
    const frag = document.createDocumentFragment();
    for (const text of keep) frag.append(el("div", {}, text));
    log.append(frag);
    while (log.childElementCount > 300) log.firstElementChild.remove();
    log.scrollTop = log.scrollHeight;
    setStreamNote(streamNote);
    eventsCount.setAttribute("data-count", String(total));
  }
  // The stream resumes where it was: each message's id is its stream position, which the browser sends back
  // (Last-Event-ID) when it reconnects by itself, and which a new connection asks for (?after=) when the
  // browser has given up (the console answered an error while it or Temporal was away).
  let source = null;
  let lastId = -1;
  let reconnects = 0;
  let reconnectTimer = null;
  let flushPending = false;
  let streamEnded = false;
  let streamNote = "";
  function setStreamNote(text) {
    streamNote = text;
    eventsCount.textContent = streamEnded ? `${total} events (run closed)` : `${total} events${text ? ` (${text})` : ""}`;
    eventsCount.setAttribute("data-stream", streamEnded ? "closed" : text ? "reconnecting" : "live");
  }
  function connect() {
    const url = runUrl(runId, "events", lastId >= 0 ? { after: String(lastId) } : {});
    source = new EventSource(url);
    source.addEventListener("open", () => { reconnects = 0; setStreamNote(""); });
    source.addEventListener("events", (msg) => {
      if (msg.lastEventId) lastId = Number(msg.lastEventId);
      for (const e of JSON.parse(msg.data)) onEvent(e);
      if (!eventsOnce) { eventsOnce = true; maybeReady(); }
      if (flushPending) return;  // the log is drawn once a frame, however many batches arrive in it
      flushPending = true;
      requestAnimationFrame(() => { flushPending = false; flushLog(); });
    });
    source.addEventListener("status", (msg) => {
      const st = JSON.parse(msg.data);
      if (st.temporal === "unreachable") { setBanner(`The console cannot reach Temporal (${st.message}): waiting for it to come back.`); setStreamNote("reconnecting"); }
      else { setBanner(""); setStreamNote(""); scheduleRefresh(); }
    });
    source.addEventListener("error", (msg) => {
      // The console's own report that the stream failed (a MessageEvent with data); it closes, the browser
      // reconnects, resuming after the last id. A connection error is an Event without data (below).
      if (msg.data) { lines.push(`stream: ${JSON.parse(msg.data).message}`); flushLog(); }
    });
    source.addEventListener("end", () => {
      source.close();
      streamEnded = true;
      setStreamNote("");
      flushLog();
      scheduleRefresh();
      if (!eventsOnce) { eventsOnce = true; maybeReady(); }
    });
    source.onerror = () => {
      if (streamEnded || closed) return;
      setStreamNote("reconnecting");
      if (source.readyState === EventSource.CLOSED) {  // the browser gave up: connect again, after the last id
        clearTimeout(reconnectTimer);
        reconnectTimer = setTimeout(() => { if (!closed && !streamEnded) connect(); }, Math.min(10000, 500 * 2 ** reconnects++));
        scheduleRefresh();
      }
    };
  }
  connect();
  refresh();
  const poll = setInterval(() => { if (!document.hidden) refresh(); }, 5000);
  leave = () => { closed = true; if (source) source.close(); clearInterval(poll); clearTimeout(refreshTimer); clearTimeout(reconnectTimer); clearTimeout(eventsWait); };
}

function legendColour(s) {
  return { idle: "#fff", running: "#dbeafe", done: "#dcfce7", failed: "#fee2e2", retrying: "#f3e8ff", waiting: "#fef3c7" }[s];
}

// -- start a run --------------------------------------------------------------------------------

function startView(params) {
  const graphs = info.graphs || [];
  if (!graphs.length) {
    main.replaceChildren(el("section", { class: "card" }, el("h1", {}, "Start a run"),
      el("p", { class: "muted" }, "This console knows no graph: start it with --workflow MODULE:ATTR.")));
    ready();
    return;
  }
  const sel = el("select", { name: "graph", "aria-label": "graph" }, graphs.map((g) => el("option", { value: g.name }, g.name)));
  sel.value = params.get("graph") || graphs[0].name;
  const idInput = el("input", { name: "id", placeholder: "(generated)" });
  const formBox = el("div");
  const error = el("p", { class: "error", role: "alert" });
  let form = null;
  function build() {
    const g = graphs.find((x) => x.name === sel.value);
    form = schemaForm(g.start_schema || {});
    formBox.replaceChildren(el("h2", {}, `Start message for ${g.start_executor}`), form.node);
  }
  sel.addEventListener("change", build);
  build();
  const submit = el("button", { type: "submit" }, "Start");
  const f = el("form", { novalidate: true }, el("label", {}, "Graph", sel), el("label", {}, "Workflow id", idInput), formBox, el("div", { class: "actions" }, submit), error);
  f.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    let read;
    try { read = form.read(); } catch (e) { error.textContent = `The page could not read the form: ${e.message}`; return; }
    if (read.errors) { error.textContent = "Fix the fields marked above."; return; }
    submit.disabled = true;
    try {
      const r = await api("/api/start", { body: { graph: sel.value, message: read.value, id: idInput.value.trim() || null } });
      location.hash = `#/run/${encodeURIComponent(r.started)}`;
    } catch (e) { error.textContent = e.message; }
    submit.disabled = false;
  });
  main.replaceChildren(el("section", { class: "card" }, el("h1", {}, "Start a run"), f));
  ready();
}

// -- routing ------------------------------------------------------------------------------------

function route() {
  leave();
  leave = () => {};
  notReady();
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  const params = new URLSearchParams(query || "");
  if (path.startsWith("/run/")) runView(decodeURIComponent(path.slice(5)));
  else if (path === "/start") startView(params);
  else runsView(params);
}

async function boot() {
  try { info = await api("/api/info"); } catch (e) {
    main.replaceChildren(el("p", { class: "error", id: "boot-error" }, `The console cannot reach Temporal: ${e.message}. Trying again…`));
    ready();
    setTimeout(boot, 3000);
    return;
  }
  document.getElementById("namespace").textContent = `namespace ${info.namespace}`;
  window.addEventListener("hashchange", route);
  route();
}
boot();
