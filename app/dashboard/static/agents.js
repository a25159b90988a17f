// The agent form: builds the JSON body from the fields (each named by its path in the
// body, `model.name`; `data-type` says how its text is read), sends it to the API (a new
// agent: POST; an edit: PATCH with If-Match, the version the page showed) and goes to the
// agent's page; a refusal's field errors are shown next to their fields. The provider's
// select shows the fields of that provider only (the others are disabled: not sent). A
// field with `data-with` is sent only along with the field it names (a fallback model's
// provider, with its name). Two controls may fill one list (`auto_approve`: the tools'
// checkboxes and the MCP tools' text).
"use strict";
(function () {
  const form = document.querySelector(".agent-form");
  if (!form) return;
  const provider = form.elements["model.provider"];
  const problem = form.querySelector(".form-end .problem");
  const submit = form.querySelector("button[type=submit]");

  function showProvider() {
    for (const set of form.querySelectorAll("fieldset[data-provider]")) {
      const off = set.dataset.provider !== provider.value;
      set.hidden = off;
      set.disabled = off;
    }
  }

  class FieldError extends Error {
    constructor(field, message) { super(message); this.field = field; }
  }

  // A field's value as the body has it; undefined leaves it out (the default applies).
  function read(control) {
    const partner = control.dataset.with ? form.elements[control.dataset.with] : null;
    if (partner && partner.value.trim() === "") return undefined;
    const type = control.dataset.type;
    const text = control.value;
    if (type === "bool") return control.checked;
    if (type === "string") return text;
    if (type === "list") return text.split(",").map((s) => s.trim()).filter(Boolean);
    if (text.trim() === "") return control.dataset.empty ? JSON.parse(control.dataset.empty) : undefined;
    if (control.type === "number") return Number(text);
    if (type === "json") {
      try { return JSON.parse(text); } catch (error) {
        throw new FieldError(control.name, "is not valid JSON: " + error.message);
      }
    }
    return text;
  }

  function put(body, path, value) {
    const keys = path.split(".");
    let at = body;
    for (const key of keys.slice(0, -1)) at = at[key] = at[key] || {};
    at[keys[keys.length - 1]] = value;
  }

  function build() {
    const body = {};
    for (const control of form.elements) {
      if (!control.name || control.matches(":disabled")) continue;
      if (control.type === "checkbox" && !control.dataset.type) { // one of a list's choices
        const chosen = body[control.name] = body[control.name] || []; // none: an empty list
        if (control.checked) chosen.push(control.value);
        continue;
      }
      const value = read(control);
      if (Array.isArray(value) && Array.isArray(body[control.name])) { // a list's other part
        body[control.name].push(...value);
        continue;
      }
      if (value !== undefined) put(body, control.name, value);
    }
    return body;
  }

  // Each error next to the field its path names (`model.script.0.text` by the script's
  // field), or, when no field matches, under the form.
  function slotFor(field) {
    let best = null;
    for (const slot of form.querySelectorAll("[data-errors-for]")) {
      const path = slot.dataset.errorsFor;
      const fits = field === path || field.startsWith(path + ".") || field.startsWith(path + "[");
      if (fits && (!best || path.length > best.dataset.errorsFor.length)) best = slot;
    }
    return best;
  }

  function clearErrors() {
    for (const slot of form.querySelectorAll("[data-errors-for], .form-end .problem")) {
      slot.textContent = "";
      slot.hidden = true;
    }
    form.querySelectorAll("[aria-invalid]").forEach((c) => c.removeAttribute("aria-invalid"));
  }

  function showError(field, message) {
    const slot = field ? slotFor(field) : null;
    const path = slot ? slot.dataset.errorsFor : "";
    let text = message;
    if (slot && field !== path) text = `${field.slice(path.length).replace(/^\./, "")}: ${message}`;
    else if (!slot && field) text = `${field}: ${message}`;
    const target = slot || problem;
    target.textContent = target.textContent ? `${target.textContent} ${text}` : text;
    target.hidden = false;
    const control = slot ? form.elements[path] : null;
    if (control instanceof HTMLElement) control.setAttribute("aria-invalid", "true");
  }

  function csrfToken() {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  }

  async function send(body) {
    const headers = { "Content-Type": "application/json", "X-CSRF-Token": csrfToken() };
    if (form.dataset.version) headers["If-Match"] = `"${form.dataset.version}"`;
    const response = await fetch(form.dataset.endpoint, {
      method: form.dataset.method,
      credentials: "same-origin",
      headers,
      body: JSON.stringify(body),
    });
    let data = null;
    try { data = await response.json(); } catch (_) { data = null; }
    if (response.status === 401) {
      location.assign("/ui/login?next=" + encodeURIComponent(location.pathname));
      return;
    }
    if (response.ok) {
      location.assign("/ui/agents/" + encodeURIComponent(data.id));
      return;
    }
    const errors = (data && data.errors) || [];
    if (errors.length) errors.forEach((e) => showError(e.field, e.message));
    else showError(null, (data && (data.detail || data.title)) || `refused (${response.status})`);
    const first = form.querySelector("[aria-invalid]");
    if (first) first.focus();
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors();
    submit.disabled = true;
    try {
      await send(build());
    } catch (error) {
      showError(error.field || null, error.message);
    } finally {
      submit.disabled = false;
    }
  });

  provider.addEventListener("change", showProvider);
  showProvider();
  submit.disabled = false;
})();
