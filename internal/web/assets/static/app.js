// toolgate inbox: live updates (EventSource), countdowns and small form
// helpers. Plain JavaScript, no dependencies, no inline script (the CSP
// allows only this file). It never builds HTML from event data: it asks the
// server for freshly rendered (escaped) fragments instead.
"use strict";

(function () {
  const body = document.body;
  const serverNow = Date.parse(body.dataset.serverNow || "");
  // Countdowns follow the server's clock, not the browser's.
  const skew = isNaN(serverNow) ? 0 : serverNow - Date.now();
  const now = () => Date.now() + skew;

  // Event types of approvals (the stream's "event:" field).
  const approvalEvents = ["requested", "reviewed", "approved", "denied", "expired",
    "cancelled", "consumed", "invalidated", "dispatched"];
  // The notice a resumed stream sends first when retention pruned events
  // it had not read (api.EventsMissed): the page may be stale.
  const missedEvent = "events_missed";

  function formatLeft(ms) {
    if (ms <= 0) return "expired";
    const s = Math.floor(ms / 1000);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    const pad = (n) => String(n).padStart(2, "0");
    if (h > 0) return h + "h " + pad(m) + "m left";
    if (m > 0) return m + "m " + pad(sec) + "s left";
    return sec + "s left";
  }

  function formatAge(ms) {
    const s = Math.floor(ms / 1000);
    if (s < 5) return "just now";
    if (s < 60) return s + "s ago";
    if (s < 3600) return Math.floor(s / 60) + "m ago";
    if (s < 172800) return Math.floor(s / 3600) + "h ago";
    return Math.floor(s / 86400) + "d ago";
  }

  // tick updates every countdown and age; a request whose time is up has its
  // review buttons disabled at once (the server refuses a late review).
  function tick() {
    document.querySelectorAll("[data-expires]").forEach((el) => {
      const at = Date.parse(el.dataset.expires);
      if (isNaN(at)) return;
      const left = at - now();
      el.textContent = formatLeft(left);
      el.classList.toggle("urgent", left > 0 && left < 60000);
      if (left <= 0) {
        el.classList.add("lapsed");
        const holder = el.closest("[data-approval-id]");
        if (holder) {
          holder.classList.add("lapsed");
          holder.querySelectorAll("[data-action], input[name=approve], textarea").forEach((b) => { b.disabled = true; });
        }
      }
    });
    document.querySelectorAll("[data-age]").forEach((el) => {
      const at = Date.parse(el.dataset.age);
      if (!isNaN(at)) el.textContent = formatAge(now() - at);
    });
    updateBulk();
  }

  // Bulk approval: the button is enabled while something is selected.
  function updateBulk() {
    const btn = document.querySelector("[data-action=bulk-approve]");
    if (!btn) return;
    const n = document.querySelectorAll("input[name=approve]:checked:not(:disabled)").length;
    btn.disabled = n === 0;
    btn.textContent = n > 1 ? "Approve " + n + " selected" : "Approve selected";
  }
  document.addEventListener("change", (e) => {
    if (e.target && e.target.name === "approve") updateBulk();
  });

  // A deny needs a reason: say so before the server does.
  document.addEventListener("click", (e) => {
    const btn = e.target.closest && e.target.closest("[data-action=deny]");
    if (!btn) return;
    const form = btn.form;
    const reason = form && form.querySelector("textarea[name=reason]");
    if (reason && reason.value.trim() === "") {
      e.preventDefault();
      const note = form.querySelector("[data-note]");
      if (note) {
        note.textContent = "A deny needs a reason: the agent reads it.";
        note.hidden = false;
      }
      reason.focus();
    }
  });

  // refresh replaces a [data-fragment] region with the server's current
  // rendering of it, keeping checked boxes and typed text. A newer refresh
  // aborts an older one still loading; an aborted or failed load leaves the
  // region as it is (the next event or reload brings it up to date).
  let inflight = null;
  async function refresh(region, changedID) {
    if (!region) return;
    const url = region.dataset.fragment;
    if (inflight) inflight.abort();
    const ctl = new AbortController();
    inflight = ctl;
    let html;
    try {
      const res = await fetch(url, { credentials: "same-origin", signal: ctl.signal, headers: { "Accept": "text/html" } });
      if (res.status === 401) { window.location.reload(); return; }
      if (!res.ok) return;
      // Reading the body rejects too when the load is aborted meanwhile.
      html = await res.text();
    } catch (err) {
      return;
    }
    if (ctl.signal.aborted) return;
    const checked = new Set(Array.from(region.querySelectorAll("input[name=approve]:checked")).map((i) => i.value));
    const reasonBox = document.querySelector("input[form=bulk][name=reason]");
    const reasonText = reasonBox ? reasonBox.value : "";
    const before = new Set(Array.from(region.querySelectorAll("[data-approval-id]")).map((el) => el.dataset.approvalId));
    const doc = new DOMParser().parseFromString("<body>" + html + "</body>", "text/html");
    region.replaceChildren(...Array.from(doc.body.childNodes).map((n) => document.importNode(n, true)));
    region.querySelectorAll("input[name=approve]").forEach((i) => { if (checked.has(i.value)) i.checked = true; });
    const newReason = document.querySelector("input[form=bulk][name=reason]");
    if (newReason && reasonText) newReason.value = reasonText;
    region.querySelectorAll(".card[data-approval-id]").forEach((el) => {
      if (!before.has(el.dataset.approvalId)) el.classList.add("fresh");
    });
    tick();
  }

  let timer = null;
  function schedule(region, id) {
    clearTimeout(timer);
    timer = setTimeout(() => refresh(region, id), 80);
  }

  // Live updates over server-sent events.
  const live = document.getElementById("live");
  const inboxRegion = document.getElementById("inbox-list");
  const detailRegion = document.getElementById("detail");
  function setLive(on) {
    if (!live) return;
    live.dataset.live = on ? "on" : "off";
    live.textContent = on ? "live" : "reconnecting…";
  }
  function onEvent(e) {
    let ev;
    try { ev = JSON.parse(e.data); } catch (err) { return; }
    // events_missed (a resumed stream whose events retention pruned):
    // any approval may have changed, the one shown too.
    const id = ev.type === missedEvent ? (detailRegion && detailRegion.dataset.approval) : ev.approval_id;
    if (inboxRegion) schedule(inboxRegion, id);
    if (detailRegion && id === detailRegion.dataset.approval) {
      const reason = detailRegion.querySelector("textarea[name=reason]");
      const typing = Array.from(detailRegion.querySelectorAll("[data-grant] input, [data-grant] textarea")).some((el) => el.value.trim() !== "");
      if ((reason && reason.value.trim() !== "") || typing) {
        // Do not throw away what the approver is typing: say it changed.
        const note = detailRegion.querySelector("[data-note]");
        if (note) {
          note.textContent = "This request changed (" + ev.type + ") while you were writing: reload to see it.";
          note.hidden = false;
        }
      } else {
        schedule(detailRegion, id);
      }
    }
  }
  function connect() {
    if (!live || (!inboxRegion && !detailRegion)) {
      if (live) { live.dataset.live = "off"; live.textContent = ""; }
      return;
    }
    // Start after the change-feed cursor the page's data already
    // includes, so an event between the page and the stream is not missed.
    // A reconnect sends Last-Event-ID (the last event's cursor), which the
    // server prefers.
    const since = body.dataset.since || "";
    const es = new EventSource("/ui/events" + (since ? "?since=" + encodeURIComponent(since) : ""));
    es.addEventListener("open", () => setLive(true));
    approvalEvents.forEach((t) => es.addEventListener(t, onEvent));
    es.addEventListener(missedEvent, onEvent);
    es.addEventListener("error", async () => {
      setLive(false);
      if (es.readyState !== EventSource.CLOSED) return; // EventSource retries by itself
      // The server refused the stream; an EventSource does not say why,
      // so ask once with the same URL. Signed out (401): reload to the
      // sign-in. The page's position is not in this gateway's log (422,
      // e.g. the gateway now uses another store): retrying cannot help,
      // so stop and say so; a reload starts from the log's current end.
      // Anything else (unavailable, offline): start again after a pause.
      const status = await refusal(es.url);
      if (status === 401) { window.location.reload(); return; }
      if (status === 422) {
        if (live) {
          live.dataset.live = "refused";
          live.textContent = "this page's position is not in this gateway's log: reload";
        }
        return;
      }
      setTimeout(connect, 3000);
    });
  }
  // refusal is the status of a GET of url, 0 when it cannot be read; a
  // stream that opens (200) is closed at once.
  async function refusal(url) {
    const ctl = new AbortController();
    try {
      const res = await fetch(url, { credentials: "same-origin", signal: ctl.signal, headers: { Accept: "text/event-stream" } });
      ctl.abort();
      return res.status;
    } catch (err) {
      return 0;
    }
  }

  tick();
  setInterval(tick, 1000);
  connect();
})();
