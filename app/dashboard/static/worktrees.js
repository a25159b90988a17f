// The workspaces, worktrees and worktree pages, live: an event of the worktrees' stream
// re-renders the page's live part as the server renders it (a worktree's page: only for
// an event about that worktree). A refresh waits while a person types in a form of it.
"use strict";
(function () {
  const L = window.Loopwright;
  const page = document.querySelector(".worktrees-live");
  if (!page) return;

  const live = page.querySelector(".live-part");
  const state = page.querySelector(".stream-state");
  const only = page.dataset.worktree;
  const refresh = L.coalesce(async () => {
    if (L.busy(live)) { setTimeout(() => refresh("live"), 1000); return; }
    const text = await L.fragment(page.dataset.live);
    if (text !== null) live.replaceChildren(L.html(text));
  }, 150);

  // A decision or a merge made here: shown without waiting for its event.
  page.addEventListener("lw:done", () => refresh("live"));

  if (!page.dataset.live) return; // a later page of the list: not live
  L.follow(page.dataset.stream, JSON.parse(page.dataset.events), (type, data) => {
    const worktree = data.worktree || {};
    if (!only || worktree.id === only) refresh("live");
  }, state);
})();
