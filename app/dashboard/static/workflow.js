// Workflows: the editor saves through the API (POST, or PATCH guarded by the version it
// was opened on) and shows the API's problem document when it refuses; a definition's
// page activates it; the list page makes one from a template; an execution's page follows
// its stream and re-renders its graph.
"use strict";
(function () {
  const L = window.Loopwright;

  function csrfToken() {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  }

  // The refusal of a save: the problem's detail, or its title and each error it lists
  // (whose `field` names the node or edge: `nodes[review]`). Text only, never HTML.
  function showRefusal(box, problem) {
    const errors = (problem && problem.errors) || [];
    const heading = problem && (errors.length ? problem.title : problem.detail || problem.title);
    box.querySelector(".problem").textContent = heading || "The API refused it.";
    const list = box.querySelector(".wf-errors");
    list.replaceChildren();
    for (const error of errors) {
      const item = document.createElement("li");
      item.textContent = `${error.field}: ${error.message}`;
      list.appendChild(item);
    }
    box.hidden = false;
  }

  // callApi posts only, and keeps the problem's detail alone: saving sends the text as it
  // is (the API parses it), with PATCH for an existing definition, and shows it all.
  const editor = document.querySelector("form.wf-editor");
  if (editor) {
    const refusal = editor.querySelector(".wf-refusal");
    editor.querySelector(".wf-save").addEventListener("click", async (event) => {
      const button = event.currentTarget;
      const headers = { "Content-Type": "application/json", "X-CSRF-Token": csrfToken() };
      if (editor.dataset.version) headers["If-Match"] = `"${editor.dataset.version}"`;
      button.disabled = true;
      try {
        const response = await fetch(editor.dataset.save, {
          method: editor.dataset.method,
          credentials: "same-origin",
          headers,
          body: editor.elements.definition.value,
        });
        let answer = null;
        try { answer = await response.json(); } catch (_) { answer = null; }
        if (response.ok && answer && answer.id) {
          location.assign("/ui/workflows/" + encodeURIComponent(answer.id));
          return;
        }
        showRefusal(refusal, answer);
      } catch (error) {
        showRefusal(refusal, { detail: error.message });
      } finally {
        button.disabled = false;
      }
    });
  }

  // The context is JSON (what the conditions read), so this form is not a `data-api` one.
  const activate = document.querySelector("form[data-activate]");
  if (activate) {
    activate.addEventListener("submit", async (event) => {
      event.preventDefault();
      const problem = activate.querySelector(".problem");
      const button = activate.querySelector("button");
      button.disabled = true;
      try {
        let context;
        try {
          context = JSON.parse(activate.elements.context.value || "{}");
        } catch (error) {
          throw new Error("The context is not JSON: " + error.message);
        }
        const body = { context };
        if (activate.elements.project.value) body.project = activate.elements.project.value;
        const execution = await L.callApi(activate.dataset.activate, body);
        location.assign("/ui/workflow-executions/" + encodeURIComponent(execution.id));
      } catch (error) {
        problem.textContent = error.message;
        problem.hidden = false;
        button.disabled = false;
      }
    });
  }

  // The list page's template forms: the definition made goes to its own page.
  for (const form of document.querySelectorAll("form[data-instantiate]")) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const problem = form.querySelector(".problem");
      const button = form.querySelector("button");
      button.disabled = true;
      try {
        const body = { variables: {} };
        for (const field of ["name", "project"]) {
          if (form.elements[field].value) body[field] = form.elements[field].value;
        }
        for (const input of form.querySelectorAll("[data-variable]")) {
          body.variables[input.dataset.variable] =
            input.type === "number" ? Number(input.value) : input.value;
        }
        const workflow = await L.callApi(form.dataset.instantiate, body);
        location.assign("/ui/workflows/" + encodeURIComponent(workflow.id));
      } catch (error) {
        problem.textContent = error.message;
        problem.hidden = false;
        button.disabled = false;
      }
    });
  }

  // Every event of the execution's stream may change a node: the live part (status, graph,
  // table) is fetched again, once however many events arrive together.
  const execution = document.querySelector(".wf-execution");
  if (execution) {
    const live = document.getElementById("execution-live");
    const refresh = L.coalesce(async () => {
      const text = await L.fragment(execution.dataset.live);
      if (text !== null) live.replaceChildren(L.html(text));
    }, 150);
    const names = JSON.parse(execution.dataset.events);
    L.follow(execution.dataset.stream, names, () => refresh("execution"),
      execution.querySelector(".stream-state"));
  }
})();
