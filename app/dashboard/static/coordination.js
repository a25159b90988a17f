// A coordination's page, live: every event of its stream (a phase ended, a subtask
// started, a run made, the end) re-renders the live part as the server renders it, and so
// does an event of the tasks' stream that names its task or one of its subtasks.
"use strict";
(function () {
  const L = window.Loopwright;
  const page = document.querySelector(".coordination");
  if (!page) return;

  const live = document.getElementById("coordination-live");
  const state = page.querySelector(".stream-state");
  const refresh = L.coalesce(async () => {
    const text = await L.fragment(page.dataset.live);
    if (text !== null) live.replaceChildren(L.html(text));
  }, 150);

  // The tasks this page shows, as the last render named them (the subtasks appear with
  // the route phase, whose event re-renders the page first).
  function shown(taskId) {
    const head = live.querySelector("[data-tasks]");
    return Boolean(head && taskId && head.dataset.tasks.split(" ").includes(taskId));
  }

  L.follow(page.dataset.stream, JSON.parse(page.dataset.events), () => refresh("live"), state);
  L.follow(page.dataset.taskStream, JSON.parse(page.dataset.taskEvents), (type, data) => {
    if (shown(data.task && data.task.id)) refresh("live");
  });
})();
