// The co-pilot editor. While the agent edits the bot's draft, a word diff against it shows what
// changed: insertions in <ins>, deletions in <del>, each with words a screen reader says, in a
// polite live region. It measures the time from the editor's first focus to send, and Ctrl+Enter
// (or Cmd+Enter) sends. The server computes the diff it stores with go-diff; this one is only the
// agent's preview, so a plain token LCS (after trimming the common ends) is enough.
(() => {
  "use strict";
  const form = document.querySelector("[data-reply-form]");
  if (!form) return;
  const text = form.querySelector("textarea[name=text]");
  const out = document.getElementById("reply-diff");
  const editing = form.querySelector("[data-editing-ms]");
  const draft = form.dataset.draft || "";
  let focusedAt = null;

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
    const segs = diff(tokens(draft), tokens(text.value));
    out.replaceChildren();
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
  text.addEventListener("input", () => {
    cancelAnimationFrame(pending);
    pending = requestAnimationFrame(render);
  });
  text.addEventListener("focus", () => { if (focusedAt === null) focusedAt = performance.now(); });
  text.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", () => {
    if (focusedAt !== null) editing.value = String(Math.round(performance.now() - focusedAt));
  });
  render();
})();
