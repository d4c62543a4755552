// The install picker without page reloads: when a choice changes, fetch the same page for the
// new choices and swap in its result and matrix. Without JavaScript the form's submit button
// does the same with a full page load.
"use strict";
(() => {
  const form = document.getElementById("picker-form");
  if (!form || !window.fetch || !window.DOMParser) return;
  let pending = null;
  async function update() {
    const params = new URLSearchParams(new FormData(form));
    const url = form.getAttribute("action").split("#")[0] + "?" + params.toString();
    const controller = new AbortController();
    if (pending) pending.abort();
    pending = controller;
    try {
      const response = await fetch(url, { signal: controller.signal, credentials: "same-origin" });
      if (!response.ok) return form.submit();
      const doc = new DOMParser().parseFromString(await response.text(), "text/html");
      for (const id of ["picker-form", "picker-result", "coverage", "picker-heading"]) {
        const fresh = doc.getElementById(id);
        const old = document.getElementById(id);
        if (fresh && old && id !== "picker-form") old.innerHTML = fresh.innerHTML;
      }
      // A new version can change the choices: take the fresh options, keep focus where it was.
      const freshForm = doc.getElementById("picker-form");
      if (freshForm) {
        for (const select of form.querySelectorAll("select")) {
          const other = freshForm.querySelector("#" + select.id);
          if (other && other.innerHTML !== select.innerHTML) select.innerHTML = other.innerHTML;
        }
      }
      history.replaceState(null, "", url + "#picker");
    } catch (e) {
      if (e.name !== "AbortError") form.submit();
    }
  }
  form.addEventListener("change", update);
})();
