// A sprint's page, live: an event of the sprints' stream about this sprint (its fields, its
// backlog, its status) or of the tasks' stream about one of its tasks re-renders the live
// part as the server renders it (the burn-up with it). The lifecycle's button moves the
// sprint one step through the API, guarded by the version the page shows: a page behind
// another client's move gets the API's refusal, next to the button.
"use strict";
(function () {
  const L = window.Loopwright;
  const page = document.querySelector(".sprint-page");
  if (!page) return;
  const sprintId = page.dataset.sprint;
  const live = document.getElementById("sprint-live");

  const refresh = L.coalesce(async () => {
    const text = await L.fragment(page.dataset.live);
    if (text !== null) live.replaceChildren(L.html(text));
  }, 150);

  // The tasks of its backlog, as the last render named them (a task joining comes with a
  // sprint event, which renders the page first).
  function inBacklog(taskId) {
    const head = live.querySelector("[data-tasks]");
    return Boolean(head && taskId && head.dataset.tasks.split(" ").includes(taskId));
  }

  page.addEventListener("click", async (event) => {
    const button = event.target.closest(".sprint-next button[data-to]");
    if (!button) return;
    const box = button.closest(".sprint-next");
    const problem = box.querySelector(".problem");
    const to = button.dataset.to;
    button.disabled = true;
    try {
      await L.callApi(`/v1/sprints/${encodeURIComponent(sprintId)}/transitions`, { to }, "POST",
        { "If-Match": `"${box.dataset.version}"` });
      L.toast("Moved to " + to.replace(/_/g, " ") + ".");
      refresh("live"); // the stream says so too
    } catch (error) {
      problem.textContent = error.message;
      problem.hidden = false;
      button.disabled = false;
    }
  });

  const state = page.querySelector(".stream-state");
  L.follow(page.dataset.stream, JSON.parse(page.dataset.events), (type, data) => {
    if (data.sprint && data.sprint.id === sprintId) refresh("live");
  }, state);
  L.follow(page.dataset.taskStream, JSON.parse(page.dataset.taskEvents), (type, data) => {
    if (inBacklog(data.task && data.task.id)) refresh("live");
  });
})();
