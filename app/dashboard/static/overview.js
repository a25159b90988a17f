// The overview, live: an event on the runs stream fetches the figures again, at most every
// 1.5 s however busy the stream is.
"use strict";
(function () {
  const L = window.Loopwright;
  const section = document.querySelector(".overview");
  if (!section) return;

  const refresh = L.coalesce(async () => {
    const text = await L.fragment("/ui/overview/live");
    if (text === null) return;
    document.getElementById("figures").replaceWith(L.html(text).firstElementChild);
  }, 1500);

  const names = JSON.parse(section.dataset.events);
  L.follow(section.dataset.stream, names, () => refresh("figures"),
    section.querySelector(".stream-state"));
})();
