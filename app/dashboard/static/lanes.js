// The lanes, live: an event of a run on a lane fetches that lane's card again (the
// server's own template), at most every few hundred ms per lane. A lane that goes idle
// leaves the list; a lane that gets busy joins it at its place (the list is in the order
// of each lane's oldest run), unless that place is on another page. A lane's own page
// follows that lane's stream and fetches its card with the whole queue.
"use strict";
(function () {
  const L = window.Loopwright;
  const section = document.querySelector(".lanes");
  if (!section) return;
  const cards = section.querySelector(".lane-cards");
  const empty = section.querySelector(".empty");
  const only = section.dataset.lane;  // a lane's own page
  const firstPage = section.dataset.firstPage !== "false";
  const lastPage = section.dataset.lastPage !== "false";

  function cardOf(lane) {
    return Array.from(cards.children).find((card) => card.dataset.lane === lane);
  }

  // Run ids sort by creation time, so the keys (oldest run ids) sort as the list does.
  function place(card) {
    const shown = Array.from(cards.children);
    const later = shown.find((other) => other.dataset.key > card.dataset.key);
    if (!later) {
      if (lastPage) cards.appendChild(card);
    } else if (later !== shown[0] || firstPage) {
      cards.insertBefore(card, later);
    }
  }

  const refresh = L.coalesce(async (lane) => {
    const query = new URLSearchParams({ lane });
    if (only !== undefined) query.set("full", "true");
    const text = await L.fragment(`/ui/lane-card?${query}`);
    const existing = cardOf(lane);
    if (existing) existing.remove();
    if (text !== null) place(L.html(text).firstElementChild);
    empty.hidden = cards.children.length > 0;
  }, 300);

  const names = JSON.parse(section.dataset.events);
  L.follow(section.dataset.stream, names, (type, data) => {
    const lane = only !== undefined ? only : data.lane;
    if (lane) refresh(lane);
  }, section.querySelector(".stream-state"));
})();
