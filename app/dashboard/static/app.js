// The dashboard's shared helpers: local times, fragments, API calls, live streams.
// Plain JavaScript, no build step; each page's own script uses window.Loopwright.
"use strict";
(function () {
  const FRAGMENT_HEADERS = { "X-Loopwright-Fragment": "1" };

  function csrfToken() {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  }

  function toLogin() {
    const here = location.pathname + location.search;
    location.assign("/ui/login?next=" + encodeURIComponent(here));
  }

  // Every <time datetime> shown in the reader's own zone (the server writes UTC).
  function localTimes(root) {
    const scope = root || document;
    for (const el of scope.querySelectorAll("time[datetime]:not([data-local])")) {
      const at = new Date(el.getAttribute("datetime"));
      if (Number.isNaN(at.getTime())) continue;
      el.title = el.getAttribute("datetime");
      const options = {
        month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
      };
      if (at.getFullYear() !== new Date().getFullYear()) options.year = "numeric";
      el.textContent = at.toLocaleString(undefined, options);
      el.dataset.local = "1";
    }
  }

  // Parsed HTML (a template keeps table rows and list items as they are).
  function html(text) {
    const template = document.createElement("template");
    template.innerHTML = text.trim();
    localTimes(template.content);
    return template.content;
  }

  // A fragment of a page as the server renders it now; null when there is none (204, 404).
  async function fragment(url) {
    const response = await fetch(url, { headers: FRAGMENT_HEADERS, credentials: "same-origin" });
    if (response.status === 401) { toLogin(); return null; }
    if (response.status === 204 || response.status === 404) return null;
    if (!response.ok) throw new Error(`${url}: ${response.status}`);
    return response.text();
  }

  // A call to the API (a POST unless `method` says otherwise) with a JSON body, if any,
  // and more `headers` (an If-Match); the session's CSRF token goes with it. A refusal
  // throws the problem document's detail.
  async function callApi(url, body, method = "POST", headers = {}) {
    const response = await fetch(url, {
      method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrfToken(), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = null;
    try { data = await response.json(); } catch (_) { data = null; }
    if (response.status === 401) { toLogin(); throw new Error("log in again"); }
    if (!response.ok) {
      throw new Error((data && (data.detail || data.title)) || `refused (${response.status})`);
    }
    return data;
  }

  // A form's fields as a JSON body: numbers as numbers, empty fields left out.
  function formBody(form) {
    const body = {};
    for (const field of form.elements) {
      if (!field.name || field.disabled || field.value === "") continue;
      body[field.name] = field.type === "number" ? Number(field.value) : field.value;
    }
    return body;
  }

  let toastTimer = null;
  function toast(text) {
    const box = document.getElementById("toast");
    if (!box) return;
    box.textContent = text;
    box.classList.add("shown");
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => box.classList.remove("shown"), 3000);
  }

  // Whether a person is typing in `root`: a live refresh must not wipe what they wrote.
  function busy(root) {
    const fields = root.querySelectorAll("input:not([type=hidden]), textarea");
    return Array.from(fields).some((f) => f.value !== "" || f === document.activeElement);
  }

  // Calls fn(key) once per key within `ms`, however often it is asked for.
  function coalesce(fn, ms) {
    const pending = new Map();
    return (key) => {
      if (pending.has(key)) return;
      pending.set(key, setTimeout(() => {
        pending.delete(key);
        Promise.resolve(fn(key)).catch((error) => console.warn(error));
      }, ms));
    };
  }

  // Follows an SSE stream of the API: `names` are the event types to listen to (an
  // EventSource hands over only the types it was given), `onEvent(type, data, id)`.
  function follow(url, names, onEvent, stateEl) {
    const source = new EventSource(url);
    const state = (text) => { if (stateEl) stateEl.textContent = text; };
    for (const name of names) {
      source.addEventListener(name, (event) => {
        let data = {};
        try { data = JSON.parse(event.data); } catch (_) { data = {}; }
        onEvent(name, data, event.lastEventId);
      });
    }
    source.onopen = () => state("Live.");
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) {
        state("Disconnected: reload the page to follow again.");
      } else {
        state("Reconnecting…");
      }
    };
    return source;
  }

  // Forms with `data-api` post their fields to that API route. On success the form is
  // reset and dispatches `lw:done` (with the API's answer); `data-then="open-run"` opens
  // the run the answer names. A refusal is shown in the nearest `.problem`.
  document.addEventListener("submit", async (event) => {
    const form = event.target.closest("form[data-api]");
    if (!form) return;
    event.preventDefault();
    const holder = form.closest("article, section, details") || form;
    const problem = form.querySelector(".problem") || holder.querySelector(".problem");
    const buttons = Array.from(form.querySelectorAll("button"));
    buttons.forEach((b) => { b.disabled = true; });
    try {
      const answer = await callApi(form.dataset.api, formBody(form));
      if (problem) problem.hidden = true;
      form.reset();
      if (form.dataset.then === "open-run" && answer && answer.id) {
        location.assign("/ui/runs/" + encodeURIComponent(answer.id));
        return;
      }
      toast("Done.");
      form.dispatchEvent(new CustomEvent("lw:done", { bubbles: true, detail: answer }));
    } catch (error) {
      if (problem) { problem.textContent = error.message; problem.hidden = false; }
    } finally {
      buttons.forEach((b) => { b.disabled = false; });
    }
  });

  document.addEventListener("DOMContentLoaded", () => localTimes());

  window.Loopwright = { busy, callApi, coalesce, follow, fragment, html, localTimes, toast };
})();
