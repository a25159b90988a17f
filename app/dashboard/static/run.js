// A run's page, live. Its stream (the run's events: its history replayed, then live)
// feeds the events timeline; the model's text previews (`message.delta`) grow a live
// bubble that the message replaces once it is recorded; new messages and the summary
// (status, what it waits for, actions) are fetched as the server renders them.
"use strict";
(function () {
  const L = window.Loopwright;
  const page = document.querySelector(".run-page");
  if (!page) return;
  const runId = encodeURIComponent(page.dataset.run);
  const transcript = document.getElementById("transcript");
  const emptyNote = document.querySelector(".transcript .empty");
  const bubble = document.getElementById("live-text");
  const bubbleText = bubble.querySelector(".text");
  const timeline = document.getElementById("timeline");
  const following = page.dataset.live === "true"; // showing the latest messages
  const TIMELINE_MAX = 500; // entries kept on the page; the history page has them all
  let lastPosition = Number(page.dataset.lastPosition);

  function clearBubble() {
    bubble.hidden = true;
    bubbleText.textContent = "";
  }

  const refreshSummary = L.coalesce(async () => {
    const current = document.getElementById("summary");
    if (L.busy(current)) { // someone is typing an answer: try again shortly
      setTimeout(() => refreshSummary("summary"), 1000);
      return;
    }
    const text = await L.fragment(`/ui/runs/${runId}/summary`);
    if (text !== null) document.getElementById("summary").replaceWith(L.html(text).firstElementChild);
  }, 200);

  const fetchMessages = L.coalesce(async () => {
    const text = await L.fragment(`/ui/runs/${runId}/messages?after=${lastPosition}`);
    if (text === null) return;
    let added = 0;
    for (const item of Array.from(L.html(text).children)) {
      const position = Number(item.dataset.position);
      if (position <= lastPosition) continue;
      transcript.appendChild(item);
      lastPosition = position;
      added += 1;
    }
    if (added) emptyNote.hidden = true;
  }, 50);

  function detail(type, data) {
    if (type === "message.created") return `${data.role} #${data.position}`;
    if (type === "tool_call.started") return data.tool || "";
    if (type === "tool_call.completed") {
      return `${data.is_error ? "failed" : "ok"}: ${(data.result || "").slice(0, 120)}`;
    }
    if (type.startsWith("agent_run.")) {
      const parts = [data.status, data.stop_reason, data.question, data.error && data.error.message];
      return parts.filter(Boolean).join(" · ");
    }
    const rest = Object.assign({}, data);
    for (const key of ["run_id", "status", "at"]) delete rest[key];
    return JSON.stringify(rest).slice(0, 160);
  }

  function record(type, data, id) {
    const item = document.createElement("li");
    item.className = "event event-" + type.split(".")[0];
    if (id) item.dataset.id = id;
    if (data.at) {
      const at = document.createElement("time");
      at.setAttribute("datetime", data.at);
      at.textContent = data.at;
      item.append(at, " ");
    }
    const name = document.createElement("code");
    name.textContent = type;
    item.append(name, " ", detail(type, data));
    L.localTimes(item);
    timeline.appendChild(item);
    while (timeline.children.length > TIMELINE_MAX) timeline.firstElementChild.remove();
  }

  function onEvent(type, data, id) {
    if (type === "message.delta") {
      if (!following) return;
      bubble.hidden = false;
      bubbleText.textContent += data.text || "";
      return;
    }
    record(type, data, id);
    if (type === "message.created") {
      if (data.role === "assistant") clearBubble();
      if (following && data.position > lastPosition) fetchMessages("messages");
    } else if (type.startsWith("agent_run.")) {
      clearBubble(); // the call it was writing ended (cancelled, failed, …)
    }
    refreshSummary("summary");
  }

  page.addEventListener("lw:done", () => refreshSummary("summary"));

  // Earlier messages, a window at a time, above the ones shown.
  const earlier = document.querySelector(".earlier a");
  if (earlier) {
    earlier.addEventListener("click", async (event) => {
      event.preventDefault();
      const text = await L.fragment(`/ui/runs/${runId}/messages?before=${earlier.dataset.before}`);
      if (text === null) return;
      const items = L.html(text);
      const first = items.firstElementChild;
      transcript.prepend(items);
      const start = first ? Number(first.dataset.position) : 0;
      earlier.dataset.before = String(start);
      earlier.href = `/ui/runs/${runId}?before=${start}#transcript-title`;
      if (start <= 0) earlier.parentElement.remove();
    });
  }

  L.follow(page.dataset.stream, JSON.parse(page.dataset.events), onEvent,
    document.querySelector(".stream-state"));
})();
