// The runs board, live: each event of the board's stream re-renders its run's row (the
// server's own row template); a new run that fits the filters joins the first page.
"use strict";
(function () {
  const L = window.Loopwright;
  const board = document.querySelector(".board");
  if (!board) return;
  const rows = document.getElementById("runs");
  const empty = board.querySelector(".empty");
  const query = board.dataset.filters ? "?" + board.dataset.filters : "";
  const inserts = board.dataset.liveInserts === "true";

  // Newest first: ids sort by creation time.
  function place(row) {
    const id = row.dataset.run;
    const after = Array.from(rows.rows).find((r) => r.dataset.run < id);
    rows.insertBefore(row, after || null);
  }

  const refresh = L.coalesce(async (runId) => {
    const text = await L.fragment(`/ui/runs/${encodeURIComponent(runId)}/row${query}`);
    const existing = document.getElementById("run-" + runId);
    if (text === null) {
      if (existing) existing.remove();
    } else {
      const row = L.html(text).firstElementChild;
      if (existing) existing.replaceWith(row);
      else if (inserts) place(row);
    }
    empty.hidden = rows.rows.length > 0;
  }, 150);

  const names = JSON.parse(board.dataset.events);
  L.follow(board.dataset.stream, names, (type, data) => {
    if (data.run_id) refresh(data.run_id);
  }, document.querySelector(".stream-state"));
})();
