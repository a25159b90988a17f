// The tasks board and a task's page, live. Both follow the tasks' stream: on the board
// each event re-renders its task's card (the server's own card template) and moves it to
// the column of its status; a task's page re-renders its detail (fields, the moves it can
// take now, audit trail, runs) when an event names it. A move is the API's transition
// route; its refusal is shown under the buttons.
"use strict";
(function () {
  const L = window.Loopwright;

  function taskOf(data) {
    return data.task && data.task.id;
  }

  const board = document.querySelector(".task-board");
  if (board) {
    const query = board.dataset.filters ? "?" + board.dataset.filters : "";
    const inserts = board.dataset.liveInserts === "true";

    function column(status) {
      return board.querySelector(`.task-column[data-status="${status}"]`);
    }

    // What a column's heading counts is what it shows ("50+" when it has more).
    function recount(col) {
      const shown = col.querySelector(".cards").children.length;
      col.querySelector(".count").textContent = shown + (col.dataset.more === "true" ? "+" : "");
      col.classList.toggle("is-empty", shown === 0);
    }

    // Newest first (ids sort by creation time). A task older than a full column's last
    // card is left to the column's "more" link, as it was when the page was rendered.
    function place(card) {
      const col = column(card.dataset.status);
      if (!col) return;
      const cards = col.querySelector(".cards");
      const id = card.dataset.task;
      const last = cards.lastElementChild;
      if (col.dataset.more === "true" && last && id < last.dataset.task) return;
      const after = Array.from(cards.children).find((c) => c.dataset.task < id);
      cards.insertBefore(card, after || null);
      recount(col);
    }

    const refresh = L.coalesce(async (taskId) => {
      const text = await L.fragment(`/ui/tasks/${encodeURIComponent(taskId)}/card${query}`);
      const existing = document.getElementById("task-" + taskId);
      const card = text === null ? null : L.html(text).firstElementChild;
      if (existing && card && existing.dataset.status === card.dataset.status) {
        existing.replaceWith(card);
        return;
      }
      if (existing) {
        const col = existing.closest(".task-column");
        existing.remove();
        recount(col);
      }
      if (card && (existing || inserts)) place(card);
    }, 150);

    L.follow(board.dataset.stream, JSON.parse(board.dataset.events), (type, data) => {
      const taskId = taskOf(data);
      if (taskId) refresh(taskId);
    }, document.querySelector(".stream-state"));
  }

  const page = document.querySelector(".task-page");
  if (page) {
    const taskId = page.dataset.task;
    const url = `/ui/tasks/${encodeURIComponent(taskId)}`;

    const refreshDetail = L.coalesce(async () => {
      const current = document.getElementById("task-detail");
      if (L.busy(current.querySelector(".transitions"))) { // someone is typing a reason
        setTimeout(() => refreshDetail("detail"), 1000);
        return;
      }
      const text = await L.fragment(url + "/detail");
      if (text === null) {
        page.querySelector(".gone").hidden = false;
        current.querySelectorAll("button[data-to]").forEach((b) => { b.disabled = true; });
        return;
      }
      document.getElementById("task-detail").replaceWith(L.html(text).firstElementChild);
    }, 150);

    async function move(button) {
      const box = button.closest(".transitions");
      const problem = box.querySelector(".problem");
      const to = button.dataset.to;
      const body = { to, expected_version: Number(box.dataset.version) };
      const reason = box.querySelector("[name=reason]").value.trim();
      if (reason) body.reason = reason;
      const assignee = box.querySelector("[name=assigned_to]");
      if (to === "assigned" && assignee && assignee.value.trim()) body.assigned_to = assignee.value.trim();
      const buttons = Array.from(box.querySelectorAll("button"));
      buttons.forEach((b) => { b.disabled = true; });
      try {
        await L.callApi(`/v1/tasks/${encodeURIComponent(taskId)}/transitions`, body);
        box.querySelectorAll("input").forEach((field) => { field.value = ""; });
        L.toast("Moved to " + to.replace(/_/g, " ") + ".");
        refreshDetail("detail");
      } catch (error) {
        problem.textContent = error.message;
        problem.hidden = false;
        buttons.forEach((b) => { b.disabled = false; });
      }
    }

    page.addEventListener("click", (event) => {
      const button = event.target.closest("button[data-to]");
      if (button) move(button);
    });

    L.follow(page.dataset.stream, JSON.parse(page.dataset.events), (type, data) => {
      if (taskOf(data) === taskId) refreshDetail("detail");
    }, document.querySelector(".stream-state"));
  }
})();
