// Neens pages: the one script, and only an enhancement. Everything works without it.
// A region marked data-live-src (a run that is still going) is fetched again every 1.5 s
// and swapped in place, keeping open rows and keyboard focus, until it says it is terminal.
"use strict";

(function () {
  const PERIOD_MS = 1500;

  function openDetails(root) {
    return Array.from(root.querySelectorAll("details[open][id]"), (d) => d.id);
  }

  // Where the keyboard focus is inside `region`, in a form that finds the same control in the
  // fresh copy: its id, the id of the details whose summary it is, or a link's href (and which
  // of the links with that href it is). Null when the focus is elsewhere.
  function focusKey(region, active) {
    if (!active || !region.contains(active)) return null;
    if (active.id) return { id: active.id };
    const holder = active.closest("details[id]");
    if (holder && active.tagName === "SUMMARY") return { summaryOf: holder.id };
    const href = active.getAttribute("href");
    if (href !== null) return { href, nth: linksTo(region, href).indexOf(active) };
    return null;
  }

  function linksTo(root, href) {
    return Array.from(root.querySelectorAll("a[href]")).filter((a) => a.getAttribute("href") === href);
  }

  function focusTarget(region, key) {
    if (key.href !== undefined) return linksTo(region, key.href)[key.nth] || null;
    if (key.id) return document.getElementById(key.id);
    const holder = document.getElementById(key.summaryOf);
    return holder && holder.querySelector("summary");
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
    const focused = focusKey(region, document.activeElement);
    region.replaceWith(fresh);
    for (const id of open) {
      const d = document.getElementById(id);
      if (d) d.open = true;
    }
    const target = focused && focusTarget(fresh, focused);
    if (target) target.focus();
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
