// Follows a running job's log: reads the streamed /jobs/<id>/log?follow=1 answer as it grows and
// appends it, then shows the final state. Without JavaScript the page refreshes itself instead.
"use strict";
(() => {
  const log = document.getElementById("log");
  if (!log || log.dataset.terminal === "1" || !window.fetch || !window.TextDecoder) return;
  const status = document.getElementById("log-status");
  const job = log.dataset.job;
  let offset = Number(log.dataset.offset || 0);
  const decoder = new TextDecoder();
  const badge = document.getElementById("job-state");
  let ended = false;

  function setState(state) {
    if (!state || badge.dataset.state === state) return;
    badge.textContent = state;
    badge.dataset.state = state;
    badge.className = "state state-" + state;
  }

  // The stream carries the log only: ask for the state beside it (HEAD answers carry it in
  // X-Job-State; an offset past the end reads nothing).
  async function pollState() {
    while (!ended) {
      await new Promise((resolve) => setTimeout(resolve, 1500));
      try {
        const response = await fetch(`/jobs/${job}/log?offset=${Number.MAX_SAFE_INTEGER}`,
          { method: "HEAD", credentials: "same-origin" });
        const state = response.headers.get("X-Job-State");
        // A final state comes with the end of the stream, which reloads the page.
        if (!ended && !["succeeded", "failed", "cancelled"].includes(state)) setState(state);
      } catch {
        // The follow request reports failures.
      }
    }
  }

  function append(text) {
    const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 8;
    log.append(document.createTextNode(text));
    if (atBottom) log.scrollTop = log.scrollHeight;
  }

  async function follow() {
    const response = await fetch(`/jobs/${job}/log?follow=1&offset=${offset}`, { credentials: "same-origin" });
    if (!response.ok || !response.body) throw new Error("log: " + response.status);
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      offset += value.length;
      append(decoder.decode(value, { stream: true }));
    }
  }

  async function finalState() {
    const response = await fetch(`/jobs/${job}/log?offset=${offset}`, { credentials: "same-origin" });
    append(await response.text());
    return response.headers.get("X-Job-State") || "unknown";
  }

  pollState();
  (async () => {
    try {
      await follow();
      const state = await finalState();
      ended = true;
      if (state === "succeeded" || state === "failed" || state === "cancelled") {
        // The server renders the final page (durations, wheel, buttons).
        window.location.reload();
        return;
      }
      setState(state);
      status.textContent = "The log stopped; reload the page to follow it again.";
    } catch (e) {
      ended = true;
      status.textContent = "Following the log failed (" + e.message + "); reload the page to try again.";
    }
  })();
})();
