// A project's Kanban board, live. It follows the tasks' stream: an event of one of the
// project's tasks (or of a card shown here) fetches the pieces it changed again as the
// server renders them: the column it left, the column it reached (or the tasks in no
// column). A card's buttons are the API's move route; a refusal (a full column's WIP
// limit, a move the state machine has no way for) is shown on the card. A column's form
// sets or removes its WIP limit through the API; a limit changed elsewhere comes on the
// same stream (`board.wip_limit_changed`).
"use strict";
(function () {
  const L = window.Loopwright;
  const page = document.querySelector(".kanban-page");
  if (!page) return;
  const project = page.dataset.project;
  const pieceOf = JSON.parse(page.dataset.pieces); // a task status: its column, or off_board
  const pieceUrl = `/ui/projects/${encodeURIComponent(project)}/board/`;
  const limitsUrl = `/v1/projects/${encodeURIComponent(project)}/wip-limits/`;

  function piece(name) {
    return page.querySelector(`[data-piece="${name}"]`);
  }

  // Whether a person is at work in a piece: in one of its fields, or having typed in one.
  function inUse(el) {
    const active = document.activeElement;
    if (active && el.contains(active) && active.matches("input, select, textarea")) return true;
    return Array.from(el.querySelectorAll("input")).some((f) => f.value !== f.defaultValue);
  }

  const refresh = L.coalesce(async (name) => {
    const current = piece(name);
    if (!current) return;
    if (inUse(current)) {
      setTimeout(() => refresh(name), 1000);
      return;
    }
    const text = await L.fragment(pieceUrl + name);
    if (text === null) return;
    const fresh = L.html(text).firstElementChild;
    // What the reader opened stays open, and a refusal stays next to its card.
    for (const open of current.querySelectorAll("details[open]")) {
      const again = fresh.querySelector(`details[data-key="${open.dataset.key}"]`);
      if (again) again.open = true;
    }
    for (const shown of current.querySelectorAll(".task-card .problem:not([hidden])")) {
      const card = fresh.querySelector(`#${shown.closest(".task-card").id} .problem`);
      if (card) { card.textContent = shown.textContent; card.hidden = false; }
    }
    piece(name).replaceWith(fresh);
  }, 150);

  async function move(button) {
    const card = button.closest(".task-card");
    const box = button.closest(".card-moves");
    const problem = box.querySelector(".problem");
    const body = { column: button.dataset.column, expected_version: Number(box.dataset.version) };
    for (const name of ["assigned_to", "reason"]) {
      const field = box.querySelector(`[name=${name}]`);
      if (field && field.value.trim()) body[name] = field.value.trim();
    }
    const buttons = Array.from(box.querySelectorAll("button"));
    buttons.forEach((b) => { b.disabled = true; });
    try {
      await L.callApi(`/v1/tasks/${encodeURIComponent(card.dataset.task)}/move`, body);
      box.querySelectorAll("input").forEach((field) => { field.value = ""; });
      problem.hidden = true;
      L.toast("Moved to " + button.dataset.column.replace(/_/g, " ") + ".");
      refresh(card.closest("[data-piece]").dataset.piece); // the stream says so too
      refresh(button.dataset.column);
    } catch (error) {
      problem.textContent = error.message;
      problem.hidden = false;
    } finally {
      buttons.forEach((b) => { b.disabled = false; });
    }
  }

  page.addEventListener("click", (event) => {
    const button = event.target.closest(".card-moves button[data-column]");
    if (button) move(button);
  });

  // The page that changes a limit shows it at once; other open boards hear it on the stream.
  page.addEventListener("submit", async (event) => {
    const form = event.target.closest("form.wip-form");
    if (!form) return;
    event.preventDefault();
    const column = form.dataset.column;
    const problem = form.querySelector(".problem");
    const remove = event.submitter && event.submitter.hasAttribute("data-remove");
    const buttons = Array.from(form.querySelectorAll("button"));
    buttons.forEach((b) => { b.disabled = true; });
    try {
      if (remove) {
        await L.callApi(limitsUrl + column, undefined, "DELETE");
      } else {
        const body = { limit: Number(form.elements.limit.value), mode: form.elements.mode.value };
        await L.callApi(limitsUrl + column, body, "PUT");
      }
      form.reset();
      form.closest("details").open = false; // done with it: the heading shows the limit
      problem.hidden = true;
      L.toast(remove ? "WIP limit removed." : "WIP limit set.");
      refresh(column);
    } catch (error) {
      problem.textContent = error.message;
      problem.hidden = false;
    } finally {
      buttons.forEach((b) => { b.disabled = false; });
    }
  });

  L.follow(page.dataset.stream, JSON.parse(page.dataset.events), (type, data) => {
    if (type === "board.wip_limit_changed") {
      if (data.project === project) refresh(data.column);
      return;
    }
    const task = data.task;
    if (!task) return;
    const names = new Set();
    const card = document.getElementById("task-" + task.id);
    if (card) names.add(card.closest("[data-piece]").dataset.piece);
    if (task.project === project) {
      names.add(pieceOf[task.status]);
      if (data.from) names.add(pieceOf[data.from]);
    }
    names.forEach((name) => refresh(name));
  }, page.querySelector(".stream-state"));
})();
