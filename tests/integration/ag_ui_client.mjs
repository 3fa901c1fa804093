// Drives an AG-UI endpoint with the real @ag-ui/client (npm), as a front end would.
//
//   node ag_ui_client.mjs plan.json
//
// Modes (plan.mode):
//   "turns":  HttpAgent.runAgent() for each turn of plan.turns ({message} or {resume: payload}); every
//             stream goes through the client's own pipeline (verifyEvents included); each turn's raw events
//             are verified again on their own with verifyEvents. Prints one JSON report line: REPORT {...}.
//   "stream": one turn read by hand (fetch), reconnecting with Last-Event-ID to the next of plan.urls when the
//             connection drops, printing "PROGRESS {...}" lines as text arrives (for the test to kill
//             processes); then the whole stream is given to an agent whose run() replays it, so the client's
//             verifyEvents and its own message building judge it. Prints REPORT {...}.
import { readFileSync } from "node:fs";
import { AbstractAgent, HttpAgent, buildResumeArray, verifyEvents } from "@ag-ui/client";
import { from, lastValueFrom, toArray } from "rxjs";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));

async function verified(events) {
  try {
    await lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
    return null;
  } catch (e) {
    return String(e && e.message ? e.message : e);
  }
}

class Recorder {
  constructor() {
    this.events = [];
  }
  onEvent({ event }) {
    this.events.push(event);
  }
}

async function turns() {
  const agent = new HttpAgent({ url: plan.url, headers: plan.headers || {}, threadId: plan.threadId });
  const report = [];
  let n = 0;
  for (const turn of plan.turns) {
    n += 1;
    const recorder = new Recorder();
    const runId = `${plan.threadId}-turn-${n}`;
    let error = null;
    let result = null;
    try {
      if (turn.message !== undefined) {
        agent.addMessage({ id: `${plan.threadId}-m${n}`, role: "user", content: turn.message });
        result = await agent.runAgent({ runId }, recorder);
      } else {
        const answers = Object.fromEntries(
          agent.pendingInterrupts.map((i) => [i.id, { status: turn.status || "resolved", payload: turn.resume }]),
        );
        result = await agent.runAgent({ runId, resume: buildResumeArray(agent.pendingInterrupts, answers) }, recorder);
      }
    } catch (e) {
      error = String(e && e.message ? e.message : e);
    }
    const finished = recorder.events.filter((e) => e.type === "RUN_FINISHED").pop();
    const runError = recorder.events.filter((e) => e.type === "RUN_ERROR").pop();
    report.push({
      runId,
      error,
      verify: await verified(recorder.events),
      types: recorder.events.map((e) => e.type),
      events: recorder.events,
      outcome: finished ? (finished.outcome || { type: "success" }) : null,
      result: result ? result.result ?? null : null,
      runError: runError || null,
      pendingInterrupts: agent.pendingInterrupts,
      messages: agent.messages,
      state: agent.state,
    });
  }
  return report;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function readOnce(url, body, lastId, onEvent) {
  const headers = { ...(plan.headers || {}), "Content-Type": "application/json", Accept: "text/event-stream" };
  if (lastId) headers["Last-Event-ID"] = lastId;
  const response = await fetch(url, { method: "POST", headers, body: JSON.stringify(body) });
  if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    const frames = buffer.split(/\n\n/); // as @ag-ui/client splits them
    buffer = frames.pop() || "";
    for (const frame of frames) {
      let id = null;
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("id:")) id = line.slice(3).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) onEvent(id, JSON.parse(data.join("\n")));
    }
  }
}

async function stream() {
  const body = plan.body;
  const events = [];
  const connections = [];
  let lastId = null;
  let texts = 0;
  let ended = false;
  let attempt = 0;
  const deadline = Date.now() + (plan.timeoutMs || 120000);
  while (!ended && Date.now() < deadline) {
    const url = plan.urls[Math.min(attempt, plan.urls.length - 1)];
    const seen = [];
    try {
      await readOnce(url, body, lastId, (id, event) => {
        seen.push({ id, type: event.type });
        events.push(event);
        if (id) lastId = id;
        if (event.type === "TEXT_MESSAGE_CONTENT") {
          texts += 1;
          console.log("PROGRESS " + JSON.stringify({ texts, lastId }));
        }
        if (event.type === "RUN_FINISHED" || event.type === "RUN_ERROR") ended = true;
      });
    } catch (e) {
      seen.push({ error: String(e && e.message ? e.message : e) });
    }
    connections.push({ url, lastEventId: attempt === 0 ? null : connections.at(-1)?.endedAt ?? null, seen, endedAt: lastId });
    if (!ended) {
      attempt += 1;
      await sleep(200);
    }
  }
  class Replay extends AbstractAgent {
    run() {
      return from(events);
    }
  }
  const agent = new Replay({ threadId: body.threadId, initialMessages: body.messages });
  let error = null;
  try {
    await agent.runAgent({ runId: body.runId });
  } catch (e) {
    error = String(e && e.message ? e.message : e);
  }
  return { ended, connections, verify: await verified(events), error, events, messages: agent.messages };
}

const report = plan.mode === "stream" ? await stream() : await turns();
console.log("REPORT " + JSON.stringify(report));
