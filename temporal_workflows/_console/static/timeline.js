// The run page's timeline: supersteps by executors as bars (/api/run/timeline?id=<id>, so any id reaches its own run; read from the run's history).
// Each step's bar runs from when it was scheduled to when it ended; its darker part is its last attempt, and its
// label says how long it took, how many attempts, and which worker (<pid>@<host>) ran that attempt.
import { el } from "./form.js";

const OUTCOME = {
  completed: "done", failed: "failed", timed_out: "failed", canceled: "failed", running: "running", scheduled: "queued",
};

function seconds(ms) {
  if (ms === null || ms === undefined) return "";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

function pct(value, t0, span) {
  return `${Math.max(0, Math.min(100, ((value - t0) / span) * 100)).toFixed(3)}%`;
}

export function timelinePanel(runId, fetchJson) {
  const box = el("div", { id: "timeline" }, el("p", { class: "muted" }, "Loading the timeline…"));
  let busy = false;

  function row(step, t0, span, now) {
    const start = step.scheduled ?? step.started ?? now;
    const end = step.ended ?? now;
    const last = step.started ?? start;
    const state = OUTCOME[step.outcome] || "queued";
    const took = step.ended !== null && step.started !== null ? step.ended - step.started : null;
    const label = [
      step.executor,
      took !== null ? seconds(took) : step.outcome.replaceAll("_", " "),
      step.attempts > 1 ? `attempt ${step.attempts}` : null,
      step.worker ? `on ${step.worker}` : null,
    ].filter(Boolean).join(" · ");
    const title = [label, step.failure ? `before: ${step.failure}` : null].filter(Boolean).join("\n");
    return el("div", { class: "tl-row" },
      el("span", { class: "tl-name", title: step.activity_id }, step.executor),
      el("div", { class: "tl-track" },
        el("div", {
          class: `tl-bar tl-${state}`,
          style: `left:${pct(start, t0, span)};width:max(2px,calc(${pct(end, t0, span)} - ${pct(start, t0, span)}))`,
          title,
          "data-executor": step.executor,
          "data-attempts": String(step.attempts),
          "data-worker": step.worker || "",
          "data-outcome": step.outcome,
          "data-duration-ms": took === null ? "" : String(took),
        },
        el("div", {
          class: "tl-attempt",
          style: `left:${end > start ? ((last - start) / (end - start)) * 100 : 0}%`,
        })),
        el("span", { class: "tl-label" }, label)));
  }

  function render(t) {
    if (!t.supersteps.length) {
      box.replaceChildren(el("p", { class: "muted", id: "no-timeline" }, "No step has been scheduled yet."));
      return;
    }
    const now = Date.now();
    const t0 = Math.min(...t.supersteps.map((s) => s.start ?? now));
    const tEnd = Math.max(now > t0 && !t.end ? now : 0, ...t.supersteps.flatMap((s) => s.steps.map((x) => x.ended ?? x.started ?? x.scheduled ?? t0)));
    const span = Math.max(1, tEnd - t0);
    const groups = t.supersteps.map((s) => el("div", {
      class: "tl-superstep",
      "data-superstep": String(s.superstep),
      "data-segment": String(s.segment),
    },
    el("div", { class: "tl-head" },
      `superstep ${s.superstep}`,
      t.segments.length > 1 ? el("span", { class: "muted" }, ` · segment ${s.segment + 1}`) : null,
      el("span", { class: "muted" }, s.end !== null ? ` · ${seconds(s.end - s.start)}` : " · running")),
    s.steps.map((step) => row(step, t0, span, now))));
    const workers = t.workers.length
      ? el("p", { class: "muted tl-workers" }, `${t.workers.length} worker${t.workers.length === 1 ? "" : "s"}: ${t.workers.join(", ")}`)
      : null;
    const older = t.truncated ? el("p", { class: "muted" }, "Older segments of this run are not shown.") : null;
    box.replaceChildren(...groups, ...[workers, older].filter(Boolean));
  }

  async function refresh() {
    if (busy) return;
    busy = true;
    try { render(await fetchJson(`/api/run/timeline?${new URLSearchParams({ id: runId })}`)); } catch (e) {
      box.replaceChildren(el("p", { class: "error" }, `no timeline: ${e.message}`));
    } finally { busy = false; }
  }

  return { element: box, refresh };
}
