// Signing in from a CRM's iframe. A frame is the wrong place to type a password into, and
// identity providers refuse to be framed, so the frame's "Sign in" opens the desk's login (or the
// single sign-on) in a popup. The popup ends on the desk's own page with a one-time ticket, which
// it posts to the window that opened it, on the desk's origin only; that window checks the
// message came from its popup and its origin, and trades the ticket for a session of its own
// (POST /login/complete): its cookies are kept apart from the popup's, per embedding site.
(() => {
  "use strict";
  const MESSAGE = "handoff-desk-signin";

  // The end of the sign-in, in the popup.
  const done = document.querySelector("[data-signin-popup]");
  if (done) {
    if (window.opener && window.opener !== window) {
      window.opener.postMessage({ type: MESSAGE, ticket: done.dataset.ticket }, location.origin);
      window.close();
    }
    return; // without an opener, the page's own button signs in here
  }

  // The sign-in page in the frame.
  const complete = document.querySelector("form[data-signin-complete]");
  if (!complete) return;
  let popup = null;
  for (const start of document.querySelectorAll("[data-popup-signin]")) {
    start.addEventListener("click", (event) => {
      event.preventDefault();
      popup = window.open(start.href, "handoff-desk-signin", "popup,width=520,height=680");
      const blocked = document.querySelector("[data-signin-blocked]");
      if (blocked) blocked.hidden = !!popup;
    });
  }
  window.addEventListener("message", (event) => {
    if (event.origin !== location.origin || !popup || event.source !== popup) return;
    const data = event.data;
    if (!data || data.type !== MESSAGE || typeof data.ticket !== "string") return;
    complete.elements.ticket.value = data.ticket;
    complete.submit();
  });
})();
