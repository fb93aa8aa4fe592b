// Neens pages: the one script, and only an enhancement. Everything works without it.
// A region marked data-live-src (a run that is still going) is fetched again every 1.5 s
// and swapped in place, keeping open rows and keyboard focus, until it says it is terminal.
"use strict";

(function () {
  const PERIOD_MS = 1500;

  function openDetails(root) {
    return Array.from(root.querySelectorAll("details[open][id]"), (d) => d.id);
  }

  async function refresh(region) {
    let response;
    try {
      response = await fetch(region.dataset.liveSrc, {
        credentials: "same-origin",
        headers: { Accept: "text/html" },
      });
    } catch (_) {
      return region; // offline for a moment: try again at the next tick
    }
    if (response.redirected || response.status === 401) {
      window.location.reload(); // signed out: the page itself leads to sign-in
      return null;
    }
    if (!response.ok) return region;
    const doc = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = doc.getElementById(region.id);
    if (!fresh) return region;
    const open = openDetails(region);
    const active = document.activeElement;
    let focused = null; // [id of the element, or of the details whose summary had focus]
    if (active && region.contains(active)) {
      const holder = active.closest("details[id]");
      if (active.id) focused = [active.id, false];
      else if (holder && active.tagName === "SUMMARY") focused = [holder.id, true];
    }
    region.replaceWith(fresh);
    for (const id of open) {
      const d = document.getElementById(id);
      if (d) d.open = true;
    }
    if (focused) {
      const el = document.getElementById(focused[0]);
      const target = el && focused[1] ? el.querySelector("summary") : el;
      if (target) target.focus();
    }
    return fresh;
  }

  function follow(region) {
    if (region.dataset.terminal === "true") return;
    window.setTimeout(async () => {
      const next = await refresh(region);
      if (next) follow(next);
    }, PERIOD_MS);
  }

  document.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll("[data-live-src]").forEach(follow);
  });
})();
