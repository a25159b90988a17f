// The approvals inbox, live: an approval asked for joins the list, one settled leaves it.
"use strict";
(function () {
  const L = window.Loopwright;
  const inbox = document.querySelector(".inbox");
  if (!inbox) return;
  const list = document.getElementById("approvals");
  const empty = inbox.querySelector(".empty");
  const inserts = inbox.dataset.liveInserts === "true";

  const refresh = L.coalesce(async (id) => {
    const text = await L.fragment(`/ui/approvals/${encodeURIComponent(id)}/item`);
    const existing = document.getElementById("approval-" + id);
    if (text === null) {
      if (existing) existing.remove();
    } else if (existing) {
      if (!L.busy(existing)) existing.replaceWith(L.html(text).firstElementChild);
    } else if (inserts) {
      list.appendChild(L.html(text).firstElementChild);
    }
    empty.hidden = list.children.length > 0;
  }, 100);

  document.addEventListener("lw:done", (event) => {
    const item = event.target.closest(".approval");
    if (item) refresh(item.dataset.approval);
  });

  const names = JSON.parse(inbox.dataset.events);
  L.follow(inbox.dataset.stream, names, (type, data) => {
    if (data.approval_id) refresh(data.approval_id);
  }, document.querySelector(".stream-state"));
})();
