// Handoff Desk's live client. One websocket keeps the page current: the server sends fragments
// rendered by the same components as the page, the client puts them in place by id. After a
// disconnect it reconnects with the last mark it applied and the server sends what it missed, or
// tells it to reload when that cannot be done.
// It also drives the keyboard shortcuts, the SLA timers and the opt-in urgent notification.
(() => {
  "use strict";
  const root = document.getElementById("live");
  if (!root) return;
  const offline = document.getElementById("offline");
  let mark = root.dataset.mark || "";
  let retry = 250;
  // failing: the server sent an error frame, as it could not keep this page current. A
  // reconnect's catch-up may fail the same way, so the page stays offline, and the backoff keeps
  // growing, until a frame arrives.
  let failing = false;
  // stale: the server said this page cannot be brought up to date; it is not reconnected.
  let stale = false;
  // leaving: the page is on its way out (a form was sent). Frames still arrive until the next
  // page comes, and scrolling this one for them would hand its scroll to the next: Chrome keeps
  // the scroll of a page that leads back to its own address.
  let leaving = false;
  window.addEventListener("beforeunload", () => { leaving = true; });
  window.addEventListener("pageshow", () => { leaving = false; });

  function socketURL() {
    const u = new URL("/ws", location.href);
    u.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    if (root.dataset.queues) u.searchParams.set("queues", root.dataset.queues);
    if (root.dataset.handoff) u.searchParams.set("handoff", root.dataset.handoff);
    if (root.dataset.roster === "true") u.searchParams.set("roster", "true");
    if (root.dataset.approvals === "true") u.searchParams.set("approvals", "true");
    if (root.dataset.mine === "true") u.searchParams.set("mine", "true");
    if (root.dataset.summaries === "true") u.searchParams.set("summaries", "true");
    if (root.dataset.dashboard) {
      for (const [k, v] of new URLSearchParams(root.dataset.dashboard)) u.searchParams.set("dashboard_" + k, v);
    }
    if (mark) u.searchParams.set("since", mark);
    return u;
  }

  function online() {
    retry = 250;
    offline.classList.add("hidden");
    document.body.dataset.live = "online";
  }

  const accessChanged = 4001; // the server's closeAccessChanged
  let socket;
  // pageGone asks for the page itself after a socket was refused: a browser cannot read why an
  // upgrade failed, but the page answers with the login redirect, 403 or 404 when the session
  // ended or the queue or package went away while this page was offline. Reloaded, it shows that.
  async function pageGone() {
    try {
      const r = await fetch(location.href, { redirect: "manual", cache: "no-store" });
      if (r.type === "opaqueredirect" || [401, 403, 404].includes(r.status)) location.reload();
    } catch {
      // Offline or the desk is down: the reconnect backoff goes on.
    }
  }

  function connect() {
    let opened = false;
    socket = new WebSocket(socketURL());
    socket.onopen = () => {
      opened = true;
      if (!failing) online();
    };
    socket.onmessage = (ev) => apply(JSON.parse(ev.data));
    socket.onclose = (ev) => {
      // The user's access changed (a logout, a disabled account, a new role, a queue taken away):
      // this page was rendered for the access they had. Loaded again, it shows what they may see
      // now, or the login page.
      if (ev.code === accessChanged) {
        location.reload();
        return;
      }
      document.body.dataset.live = "offline";
      if (stale) return;
      if (!opened) pageGone();
      offline.classList.remove("hidden");
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }

  function fromHTML(html) {
    const t = document.createElement("template");
    t.innerHTML = html.trim();
    return t.content.firstElementChild;
  }

  // editing reports whether the agent is filling in a form inside el: a live refresh must not
  // throw their input away (the server checks the action anyway when it is sent).
  function editing(el) {
    if (el.contains(document.activeElement) && document.activeElement.matches("input, select, textarea")) return true;
    for (const f of el.querySelectorAll("input, textarea")) if (f.value !== f.defaultValue) return true;
    for (const s of el.querySelectorAll("select")) if (s.selectedIndex >= 0 && !s.options[s.selectedIndex].defaultSelected && s.selectedIndex !== 0) return true;
    return false;
  }

  // keepOpen opens in el, the fresh render of old, the menus and folds the agent had open in
  // old: a live refresh of the action panel must not close the menu they are choosing from.
  function keepOpen(old, el) {
    for (const d of old.querySelectorAll("details[open][id]")) {
      const same = el.querySelector("#" + CSS.escape(d.id));
      if (same) same.open = true;
    }
    return el;
  }

  function apply(frame) {
    // The server closes right after an error frame; closing from here as well reconnects even
    // if that close is lost. The mark stays at the last frame applied, so the catch-up resends.
    if (frame.type === "error") {
      failing = true;
      socket.close();
      return;
    }
    if (frame.type === "reload") {
      reload();
      return;
    }
    // A hello carries the server's mark; with a mark of our own, the catch-up frame that follows
    // moves it, so a drop during catch-up loses nothing.
    if (frame.type === "hello") {
      if (!mark) mark = frame.mark;
      return;
    }
    if (failing) {
      failing = false;
      online();
    }
    const focused = document.activeElement && document.activeElement.id;
    // The composer the agent is writing in stays where they see it while messages join the
    // thread above it: the page scrolls by what they added. A page nobody writes on is left as
    // it lies, at the top where its action bar is.
    const composer = document.querySelector("[data-reply-form]");
    const keep = !leaving && composer && editing(composer);
    const composerTop = keep && composer.getBoundingClientRect().top;
    const said = [];
    for (const f of frame.fragments || []) {
      const old = document.getElementById(f.target);
      if (f.op === "remove") {
        if (old) old.remove();
      } else if (f.op === "replace") {
        if (old && old.matches("[data-reply-slot]")) replySlot(old, fromHTML(f.html));
        else if (old && !editing(old)) old.replaceWith(keepOpen(old, fromHTML(f.html)));
      } else if (f.op === "upsert") {
        const list = document.getElementById(f.list);
        if (!list) continue;
        if (old) old.remove();
        const el = fromHTML(f.html);
        let before = null;
        for (const child of list.children) {
          if ((child.dataset.sort || "") > f.sort) { before = child; break; }
        }
        list.insertBefore(el, before);
        // A new message of a thread is said in the thread's polite live region.
        if (!old && el.dataset.messageAnnounce && list.dataset.announcer) said.push([list.dataset.announcer, el.dataset.messageAnnounce]);
      }
    }
    dropDeclined();
    if (keep && composer.isConnected) {
      const moved = composer.getBoundingClientRect().top - composerTop;
      if (moved) window.scrollBy(0, moved);
    }
    for (const [region, text] of said) {
      const live = document.getElementById(region);
      if (live) live.textContent = text;
    }
    if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
    mark = frame.mark || mark;
    document.body.dataset.mark = mark;
    const empty = document.getElementById("empty");
    const cards = document.getElementById("cards");
    if (empty && cards) empty.classList.toggle("hidden", cards.children.length > 0);
    titleCounts();
    tick();
    liveSwitch();
    localTimes();
    if (frame.urgent && frame.urgent.length) notifyUrgent(frame.urgent);
    if (frame.ring) announceRing();
  }

  // titleCounts leads the window's title with what waits for the viewer, as the top bar counts
  // it: the refund approvals a supervisor may decide, then the customer messages that wait for
  // the agent's answer. A tab in the background tells them.
  function titleCounts() {
    const approvals = document.getElementById("approvals-count");
    const mine = document.getElementById("mine-count");
    const a = approvals ? Number(approvals.dataset.count || 0) : 0;
    const u = mine ? Number(mine.dataset.unread || 0) : 0;
    const bare = document.title.replace(/^(\(\d+\) )+/, "");
    document.title = (a > 0 ? "(" + a + ") " : "") + (u > 0 ? "(" + u + ") " : "") + bare;
  }

  // replySlot puts in the reply's place as the server sent it. While the composer is still the
  // agent's it stays as it is, with what they typed and its editor. When the package left their
  // hands (a reassign, a bot's cancel), the page says so at once: the notice that it is theirs
  // goes, and what they typed moves into the kept box to copy, never lost.
  function replySlot(old, el) {
    const form = old.querySelector("[data-reply-form]");
    const fresh = el.querySelector("[data-reply-form]");
    if (form && fresh) {
      // Still theirs: untouched, the composer takes what the desk now offers (the reply that
      // tells the customer a refund's decision), in place, so reply.js keeps working on it.
      if (editing(old)) return;
      const text = form.querySelector("textarea[name=text]");
      text.value = text.defaultValue = fresh.querySelector("textarea[name=text]").defaultValue;
      for (const part of ["[data-reply-hints]", "[data-testid=send-bar]"]) form.querySelector(part).replaceWith(fresh.querySelector(part));
      text.dispatchEvent(new Event("input", { bubbles: true }));
      return;
    }
    if (editing(old) && !form) return; // nothing of the agent's there but what they are editing
    old.replaceWith(el);
    if (!form) return;
    for (const n of document.querySelectorAll("[data-testid=notice]")) n.remove();
    const kept = el.querySelector("[data-kept]");
    if (!kept) return;
    const typed = form.querySelector("textarea[name=text]").value;
    kept.hidden = false;
    if (typed.trim() !== "") {
      kept.querySelector("[data-kept-text]").value = typed;
      kept.querySelector("[data-kept-typed]").hidden = false;
    }
    const announcer = document.getElementById("announcer");
    if (announcer) announcer.textContent = kept.querySelector("[data-testid=kept-why]").textContent;
  }

  // Copy puts the kept text on the clipboard, and selects it where the clipboard is refused.
  document.addEventListener("click", (ev) => {
    const button = ev.target.closest("[data-copy-kept]");
    if (!button) return;
    const text = button.closest("[data-kept]").querySelector("[data-kept-text]");
    text.select();
    if (navigator.clipboard) navigator.clipboard.writeText(text.value).then(() => { button.textContent = "Copied"; }, () => {});
  });

  // reload loads the page afresh: the server could not catch it up (it was away too long, or the
  // database restarted). Input the agent has typed into the page is not thrown away for it: the
  // banner says the page is out of date and offers the reload instead.
  function reload() {
    stale = true;
    socket.close();
    if (!editing(document.body)) {
      location.reload();
      return;
    }
    const button = document.createElement("button");
    button.type = "button";
    button.className = "ml-2 underline";
    button.textContent = "Reload";
    button.addEventListener("click", () => location.reload());
    offline.textContent = "This page is out of date: it missed changes it could not catch up on.";
    offline.append(button);
    offline.dataset.stale = "true";
    offline.classList.remove("hidden");
  }

  // The availability switch in the header takes effect as soon as it is changed: no Set to press.
  // The socket replaces the switch when the desk sets the agent away, so the listener is the
  // document's and Set is hidden again after each frame.
  function liveSwitch() {
    for (const set of document.querySelectorAll("[data-availability-set]")) set.hidden = true;
  }
  document.addEventListener("change", (ev) => {
    if (ev.target.matches("[data-availability]")) ev.target.form.requestSubmit();
  });

  // Forms that come back to this page name it in a data-here field: a fragment the socket sent
  // was rendered without knowing the page. A decline is sent without leaving the page at all, so
  // that nothing the agent was doing here (a reply being typed, a scrolled list) is lost.
  document.addEventListener("submit", (ev) => {
    const form = ev.target;
    for (const here of form.querySelectorAll("[data-here]")) here.value = location.pathname + location.search;
    if (form.matches("[data-ring-decline-form]")) {
      ev.preventDefault();
      decline(form);
    }
  });
  // declined holds the rings this page declined. A frame rendered before a decline committed can
  // arrive after the decline's answer and bring its card back; the desk never rings an agent twice
  // for one package, so a declined ring's card is dropped from every frame for the page's life.
  const declined = new Set();
  function dropDeclined() {
    for (const id of declined) document.querySelector(`#ring [data-handoff="${CSS.escape(id)}"]`)?.remove();
  }
  async function decline(form) {
    const card = form.closest("[data-handoff]");
    const say = (text) => {
      const error = card && card.querySelector("[data-ring-error]");
      if (!error) return;
      error.textContent = text;
      error.hidden = false;
    };
    try {
      const r = await fetch(form.action, { method: "POST", body: new URLSearchParams(new FormData(form)), redirect: "manual", cache: "no-store" });
      // The desk answers a decline with a redirect: the ring is gone, and the socket's frame
      // brings the slot as it is now. The page stays, so it says what happened itself.
      if (r.type === "opaqueredirect") {
        if (card) declined.add(card.dataset.handoff);
        dropDeclined();
        const announcer = document.getElementById("announcer");
        if (announcer) announcer.textContent = form.dataset.done;
        return;
      }
      const page = new DOMParser().parseFromString(await r.text(), "text/html");
      const flash = page.querySelector("[data-testid=flash]");
      say(flash ? flash.textContent : "The decline failed (" + r.status + ").");
    } catch {
      say("The decline did not reach the desk: check the connection and try again.");
    }
  }

  // Times of day are rendered in UTC; the agent reads them in their own.
  function localTimes() {
    for (const el of document.querySelectorAll("time[data-local-time]")) {
      el.textContent = new Date(el.dateTime).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    }
  }

  function formatAge(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + "s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + "m";
    const h = Math.floor(m / 60);
    if (h < 24) return h + "h " + String(m % 60).padStart(2, "0") + "m";
    return Math.floor(h / 24) + "d " + (h % 24) + "h";
  }

  function tick() {
    const now = Date.now();
    // The ring's accept window counts down to the second; the server times it out.
    for (const el of document.querySelectorAll("#ring [data-until]")) {
      const left = Math.max(0, Math.ceil((Number(el.dataset.until) - now) / 1000));
      const countdown = el.querySelector("[data-countdown]");
      if (countdown) countdown.textContent = left + "s";
    }
    for (const el of document.querySelectorAll("[data-since]")) {
      const age = now - Number(el.dataset.since);
      el.textContent = formatAge(age);
      const late = age > Number(el.dataset.sla);
      el.classList.toggle("text-red-600", late);
      el.classList.toggle("font-semibold", late);
      el.classList.toggle("text-slate-500", !late);
    }
    for (const el of document.querySelectorAll("[data-age]")) el.textContent = formatAge(now - Number(el.dataset.age));
    // What is left of an SLA, and past it by how much it is over (views.FormatDue).
    for (const el of document.querySelectorAll("[data-due]")) {
      const left = Number(el.dataset.due) - now;
      el.textContent = left < 0 ? formatAge(-left) + " over" : formatAge(left) + " left";
      el.classList.toggle("text-red-600", left < 0);
      el.classList.toggle("font-semibold", left < 0);
      el.classList.toggle("text-slate-600", left >= 0);
    }
    // A quiet customer's badge shows once they are idle (views.CustomerIdleBadge); a customer who
    // writes again brings the package's row anew, without it.
    for (const el of document.querySelectorAll("[data-idle-at][hidden]")) {
      if (now >= Number(el.dataset.idleAt)) el.hidden = false;
    }
    // The roster's waiting packages, in the order their SLAs end, each shown once it is within its
    // warning of the end (views.SLAList): those shown are always the first rows.
    for (const list of document.querySelectorAll("[data-testid=sla-list]")) {
      let shown = false;
      for (const row of list.querySelectorAll("[data-sla-due]")) {
        row.hidden = Number(row.dataset.slaDue) - now > Number(row.dataset.warn);
        shown = shown || !row.hidden;
      }
      const none = list.querySelector("[data-sla-none]");
      if (none) none.hidden = shown;
    }
  }
  setInterval(tick, 1000);

  // Desktop notification and a short tone for new urgent packages, once the agent opts in.
  const optIn = document.querySelector("[data-notify-optin]");
  if (optIn) {
    optIn.addEventListener("click", async () => {
      if ("Notification" in window) await Notification.requestPermission();
      localStorage.setItem("desk.notify", "on");
      optIn.textContent = "Urgent notifications on";
    });
    if (localStorage.getItem("desk.notify") === "on") optIn.textContent = "Urgent notifications on";
  }
  function notifyUrgent(ids) {
    if (localStorage.getItem("desk.notify") !== "on") return;
    if ("Notification" in window && Notification.permission === "granted") {
      new Notification("Urgent handoff waiting", { body: ids.join(", "), tag: "desk-urgent" });
    }
    tone();
  }
  // announceRing sounds a warm package's ring once per package, when notifications are on.
  let rang = "";
  function announceRing() {
    const ring = document.querySelector("#ring [data-handoff]");
    if (!ring || ring.dataset.handoff === rang) return;
    rang = ring.dataset.handoff;
    if (localStorage.getItem("desk.notify") !== "on") return;
    if ("Notification" in window && Notification.permission === "granted") {
      new Notification("Warm transfer for you", { body: rang, tag: "desk-ring" });
    }
    tone();
  }
  function tone() {
    try {
      const audio = new AudioContext();
      const tone = audio.createOscillator();
      tone.frequency.value = 880;
      tone.connect(audio.destination);
      tone.start();
      tone.stop(audio.currentTime + 0.15);
    } catch (_) { /* no audio device: the notification is enough */ }
  }

  // Keyboard first. Keys act on the page's [data-key] controls and on the focused card; typing in
  // a field is never taken over, and Escape leaves the field.
  function cards() { return [...document.querySelectorAll("#cards > li")]; }
  function moveFocus(step) {
    const list = cards();
    if (!list.length) return;
    const at = list.indexOf(document.activeElement);
    list[Math.min(Math.max(at + step, 0), list.length - 1)].focus();
  }
  document.addEventListener("keydown", (ev) => {
    const target = ev.target;
    if (ev.key === "Escape" && target.matches("input, textarea, select")) { target.blur(); return; }
    if (ev.ctrlKey || ev.metaKey || ev.altKey || target.matches("input, textarea, select")) return;
    const key = ev.key.toLowerCase();
    // A ring takes A and X while it rings, whatever has the focus.
    const ring = document.querySelector("#ring [data-handoff]");
    if (ring && (key === "a" || key === "x")) {
      ring.querySelector(key === "a" ? "[data-ring-accept]" : "[data-ring-decline]")?.click();
      ev.preventDefault();
      return;
    }
    const card = target.closest && target.closest("#cards > li");
    if (key === "j") { moveFocus(1); ev.preventDefault(); return; }
    if (key === "k") { moveFocus(-1); ev.preventDefault(); return; }
    if (card && key === "a") { card.querySelector("[data-accept]")?.click(); ev.preventDefault(); return; }
    if (card && key === "enter") { card.querySelector("[data-open]")?.click(); ev.preventDefault(); return; }
    const control = document.querySelector(`[data-key="${CSS.escape(key)}"]`);
    if (!control) return;
    ev.preventDefault();
    // An action in the menu is folded away: its key opens the menu and the action first.
    for (let d = control.closest("details"); d; d = d.parentElement.closest("details")) d.open = true;
    if (control.matches("button")) control.click();
    else control.focus();
  });

  // Focus starts on the first card, so J/K/A work without a click.
  if (document.activeElement === document.body) cards()[0]?.focus();
  tick();
  liveSwitch();
  localTimes();
  announceRing();
  connect();
})();
