// Single sign-on in a CRM's iframe. Identity providers refuse to be framed, so inside a frame
// "Sign in with SSO" opens the sign-in in a popup. The popup ends on the desk's own page with a
// one-time ticket, which it posts to the window that opened it, on the desk's origin only; that
// window checks the message came from its popup and its origin, and trades the ticket for a
// session of its own: its cookies are kept apart from the popup's, per embedding site.
(() => {
  "use strict";
  const MESSAGE = "handoff-desk-sso";

  // The end of the sign-in, in the popup.
  const done = document.querySelector("[data-sso-popup]");
  if (done) {
    if (window.opener && window.opener !== window) {
      window.opener.postMessage({ type: MESSAGE, ticket: done.dataset.ticket }, location.origin);
      window.close();
    }
    return; // without an opener, the page's own button signs in here
  }

  // The login page.
  const start = document.querySelector("[data-sso-start]");
  const complete = document.querySelector("form[data-sso-complete]");
  if (!start || !complete || window.top === window.self) return; // top level: the link navigates
  let popup = null;
  start.addEventListener("click", (event) => {
    event.preventDefault();
    const u = new URL(start.href);
    u.searchParams.set("popup", "1");
    popup = window.open(u.href, "handoff-desk-sso", "popup,width=520,height=680");
    // Blocked: the frame cannot go to the provider itself, which refuses to be framed.
    const blocked = document.querySelector("[data-sso-blocked]");
    if (blocked) blocked.hidden = !!popup;
  });
  window.addEventListener("message", (event) => {
    if (event.origin !== location.origin || !popup || event.source !== popup) return;
    const data = event.data;
    if (!data || data.type !== MESSAGE || typeof data.ticket !== "string") return;
    complete.elements.ticket.value = data.ticket;
    complete.submit();
  });
})();
