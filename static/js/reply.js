// The co-pilot editor. While the agent edits the bot's draft, a word diff against it shows what
// changed: insertions in <ins>, deletions in <del>, each with words a screen reader says, in a
// polite live region. It measures the time from the editor's first focus to send, and Ctrl+Enter
// (or Cmd+Enter) sends. The server computes the diff it stores with go-diff; this one is only the
// agent's preview, so a plain token LCS (after trimming the common ends) is enough.
//
// Where the agent may not see a value, the draft holds a token, ⟦first name⟧. A token is edited
// as one character: Backspace or Delete next to it removes it whole, and typing inside it types
// after it. The preview shows what the customer gets, tokens marked, and names any token the
// agent damaged anyway; the server refuses those, so this is a help, not the rule.
(() => {
  "use strict";
  const form = document.querySelector("[data-reply-form]");
  if (!form) return;
  const text = form.querySelector("textarea[name=text]");
  const out = document.getElementById("reply-diff");
  const editing = form.querySelector("[data-editing-ms]");
  // draft is what the diff compares against: the package's draft, or the turn's once the agent
  // chose to use it.
  let draft = form.dataset.draft || "";
  const known = new Set(JSON.parse(form.dataset.tokens || "[]"));
  const preview = document.getElementById("reply-preview");
  let focusedAt = null;

  // tokenAt is the [start, end) of the token in the composer that holds offset i strictly inside
  // it, or touches it from the side given (-1: ends at i, +1: starts at i), or null.
  function tokenAt(i, side) {
    for (const m of text.value.matchAll(/⟦[^⟦⟧]*⟧/g)) {
      const start = m.index, end = m.index + m[0].length;
      if ((start < i && i < end) || (side < 0 && end === i) || (side > 0 && start === i)) return [start, end];
    }
    return null;
  }

  function renderPreview() {
    if (!preview) return;
    preview.replaceChildren();
    const damaged = [];
    let last = 0;
    for (const m of text.value.matchAll(/⟦[^⟦⟧]*⟧|[⟦⟧]/g)) {
      preview.append(text.value.slice(last, m.index));
      const el = document.createElement("mark");
      if (known.has(m[0])) {
        el.className = "rounded bg-violet-100 px-0.5 text-violet-900";
        el.textContent = m[0];
      } else {
        el.className = "rounded bg-red-100 px-0.5 text-red-900";
        el.textContent = m[0];
        damaged.push(m[0]);
      }
      preview.append(el);
      last = m.index + m[0].length;
    }
    preview.append(text.value.slice(last));
    if (damaged.length) {
      const warn = document.createElement("span");
      warn.className = "mt-1 block text-xs text-red-700";
      warn.dataset.testid = "reply-damaged";
      warn.textContent = "Damaged token: " + damaged.join(" ") + ". Put it back as it was or delete it.";
      preview.append(warn);
    }
  }

  function changed() {
    cancelAnimationFrame(pending);
    pending = requestAnimationFrame(() => { render(); renderPreview(); });
  }

  // tokens cuts text into runs of space and runs of non-space, as the server does.
  const tokens = (s) => s.match(/\s+|\S+/g) || [];

  // diff returns [op, text] segments: op is "=", "+" or "-".
  function diff(a, b) {
    let pre = 0;
    while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
    let suf = 0;
    while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;
    const x = a.slice(pre, a.length - suf), y = b.slice(pre, b.length - suf);
    // lcs[i][j]: the longest common subsequence of x[i:] and y[j:].
    const lcs = Array.from({ length: x.length + 1 }, () => new Uint16Array(y.length + 1));
    for (let i = x.length - 1; i >= 0; i--)
      for (let j = y.length - 1; j >= 0; j--)
        lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    const segs = [];
    const push = (op, t) => {
      const last = segs[segs.length - 1];
      if (last && last[0] === op) last[1] += t; else segs.push([op, t]);
    };
    if (pre) push("=", a.slice(0, pre).join(""));
    let i = 0, j = 0;
    while (i < x.length || j < y.length) {
      if (i < x.length && j < y.length && x[i] === y[j]) { push("=", x[i]); i++; j++; }
      else if (i < x.length && (j >= y.length || lcs[i + 1][j] >= lcs[i][j + 1])) { push("-", x[i]); i++; }
      else { push("+", y[j]); j++; }
    }
    if (suf) push("=", a.slice(a.length - suf).join(""));
    return segs;
  }

  function render() {
    out.replaceChildren();
    if (text.value === "") {
      out.textContent = "No text yet.";
      return;
    }
    const segs = diff(tokens(draft), tokens(text.value));
    if (!segs.some(([op]) => op !== "=")) {
      out.textContent = draft === "" ? "No text yet." : "No changes.";
      return;
    }
    for (const [op, t] of segs) {
      if (op === "=") { out.append(t); continue; }
      const el = document.createElement(op === "+" ? "ins" : "del");
      el.className = op === "+" ? "bg-emerald-100 text-emerald-900 no-underline" : "bg-red-100 text-red-900";
      const said = document.createElement("span");
      said.className = "sr-only";
      said.textContent = op === "+" ? " added: " : " removed: ";
      el.append(said, t);
      out.append(el);
    }
  }

  let pending = 0;
  text.addEventListener("input", changed);
  text.addEventListener("focus", () => { if (focusedAt === null) focusedAt = performance.now(); });
  text.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      form.requestSubmit();
      return;
    }
    if ((ev.key === "Backspace" || ev.key === "Delete") && text.selectionStart === text.selectionEnd) {
      const tok = tokenAt(text.selectionStart, ev.key === "Backspace" ? -1 : 1);
      if (tok) {
        ev.preventDefault();
        text.setRangeText("", tok[0], tok[1], "start");
        changed();
      }
    }
  });
  text.addEventListener("beforeinput", (ev) => {
    if (!ev.inputType.startsWith("insert") || text.selectionStart !== text.selectionEnd) return;
    const tok = tokenAt(text.selectionStart, 0);
    if (tok && ev.data != null) {
      ev.preventDefault();
      text.setRangeText(ev.data, tok[1], tok[1], "end");
      changed();
    }
  });
  form.querySelectorAll("[data-insert-token]").forEach((b) => b.addEventListener("click", () => {
    const at = tokenAt(text.selectionStart, 0)?.[1] ?? text.selectionStart;
    text.setRangeText(b.dataset.insertToken, at, at, "end");
    text.focus();
    changed();
  }));
  const start = form.querySelector("[data-start-draft]");
  if (start) start.addEventListener("click", () => {
    text.value = draft;
    start.remove();
    text.focus();
    changed();
  });
  // The bot's draft for the customer's turn is offered beside the composer, never put in it for
  // the agent: the socket replaces the offer as the customer writes, so the click is the form's.
  form.addEventListener("click", (ev) => {
    const use = ev.target.closest("[data-use-draft]");
    if (!use) return;
    const offer = use.closest("[data-draft-offer]");
    draft = offer.dataset.draftOffer;
    text.value = draft;
    if (start) start.remove();
    text.focus();
    changed();
  });
  // Saved replies: / at the start of a word opens the queue's list, what follows the / narrows it,
  // arrows choose, Enter (or a click) puts the one chosen in place of the / and what followed it,
  // Escape closes. The form says which one the reply started from.
  const list = document.getElementById("saved-replies");
  const savedField = form.querySelector("[data-saved-reply]");
  let slashAt = -1;
  const options = () => [...list.querySelectorAll("[role=option]")].filter((o) => !o.hidden);
  function closeList() {
    slashAt = -1;
    list.classList.add("hidden");
    text.removeAttribute("aria-activedescendant");
    text.removeAttribute("aria-controls");
  }
  function choose(o) {
    for (const other of list.querySelectorAll("[role=option]")) other.setAttribute("aria-selected", String(other === o));
    if (o) text.setAttribute("aria-activedescendant", o.id); else text.removeAttribute("aria-activedescendant");
  }
  function narrow() {
    const query = text.value.slice(slashAt + 1, text.selectionStart).toLowerCase();
    for (const o of list.querySelectorAll("[role=option]")) o.hidden = !o.textContent.toLowerCase().includes(query);
    const shown = options();
    if (!shown.length) { closeList(); return; }
    if (!shown.some((o) => o.getAttribute("aria-selected") === "true")) choose(shown[0]);
  }
  function insertSaved(o) {
    const at = slashAt;
    text.setRangeText(o.dataset.savedText, at, text.selectionStart, "end");
    savedField.value = o.dataset.savedId;
    // The diff shows the agent's edits of the saved reply, as it does of the bot's draft.
    draft = text.value;
    closeList();
    text.focus();
    changed();
  }
  if (list) {
    text.addEventListener("input", () => {
      const i = text.selectionStart;
      if (slashAt >= 0) {
        if (i <= slashAt || text.value[slashAt] !== "/") closeList(); else narrow();
        return;
      }
      if (text.value[i - 1] === "/" && (i === 1 || /\s/.test(text.value[i - 2]))) {
        slashAt = i - 1;
        list.classList.remove("hidden");
        text.setAttribute("aria-controls", "saved-replies");
        for (const o of list.querySelectorAll("[role=option]")) o.hidden = false;
        choose(options()[0]);
      }
    });
    text.addEventListener("keydown", (ev) => {
      if (slashAt < 0) return;
      const shown = options();
      const current = shown.findIndex((o) => o.getAttribute("aria-selected") === "true");
      if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
        ev.preventDefault();
        const next = (current + (ev.key === "ArrowDown" ? 1 : shown.length - 1)) % shown.length;
        choose(shown[next]);
        shown[next].scrollIntoView({ block: "nearest" });
      } else if (ev.key === "Enter" && !ev.ctrlKey && !ev.metaKey && current >= 0) {
        ev.preventDefault();
        ev.stopImmediatePropagation();
        insertSaved(shown[current]);
      } else if (ev.key === "Escape") {
        ev.preventDefault();
        closeList();
      }
    });
    text.addEventListener("blur", () => setTimeout(() => { if (document.activeElement !== text) closeList(); }, 0));
    // A click chooses without taking the focus from the composer.
    list.addEventListener("mousedown", (ev) => ev.preventDefault());
    list.addEventListener("click", (ev) => {
      const o = ev.target.closest("[role=option]");
      if (o && slashAt >= 0) insertSaved(o);
    });
  }

  // A send that fails before the desk answers with this page (a server error, a refused request,
  // a session that ran out and went through sign-in) would lose what the agent typed: this tab
  // keeps it from the submit on, and the next page of the package whose thread does not hold it
  // puts it back in the composer and says so. Found in the thread, it is forgotten.
  const keptKey = "desk.reply:" + form.getAttribute("action");
  const same = (a, b) => a.replace(/\s+/g, " ").trim() === b.replace(/\s+/g, " ").trim();
  function restoreKept() {
    const kept = sessionStorage.getItem(keptKey);
    if (kept === null) return;
    sessionStorage.removeItem(keptKey);
    const status = document.getElementById("reply-status");
    const sent = (status && (status.dataset.announce || "").startsWith("Your reply is in the conversation")) ||
      [...document.querySelectorAll("[data-testid=reply-final]")].some((p) => same(p.textContent, kept));
    if (sent || same(text.value, kept)) return;
    text.value = kept;
    if (status) status.textContent = "Your last reply was not sent: what you typed is back in the box.";
    text.dispatchEvent(new Event("input", { bubbles: true }));
  }

  form.addEventListener("submit", () => {
    if (focusedAt !== null) editing.value = String(Math.round(performance.now() - focusedAt));
    try { sessionStorage.setItem(keptKey, text.value); } catch (e) { /* storage refused: nothing kept */ }
  });
  restoreKept();
  render();
  renderPreview();
})();
