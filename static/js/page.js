// What every desk page does once loaded.
//
// A page rendered in answer to a form's POST (a refusal shown with the form as it was sent, a
// confirmation step, a secret shown once) names the page it shows in <meta name=desk-address>;
// that address replaces the form's in the address bar, so that a reload loads the page and sends
// nothing again.
//
// A notice of what the last action did, or why it was refused, shows on the page (data-announce).
// Screen readers announce a live region's changes, not what a page loads with, so once the page
// has loaded its notices go into the page's empty announcer, a polite live region of its own.
//
// Inside a CRM's frame, links to pages a CRM may not frame open in a tab of their own instead of
// leaving a broken box in the CRM: only the sidebar, its sign-in and "My work" may be framed.
(() => {
  "use strict";
  const address = document.querySelector('meta[name="desk-address"]');
  if (address && address.content) history.replaceState(history.state, "", address.content);

  const announcer = document.getElementById("announcer");
  const said = [...document.querySelectorAll("[data-announce]")].map((el) => el.dataset.announce).filter(Boolean);
  // Something the page said meanwhile (a ring declined in place) is newer, and is not overwritten.
  if (announcer && said.length) setTimeout(() => { if (!announcer.textContent) announcer.textContent = said.join(" "); }, 100);

  if (window.top === window.self) return;
  const framable = (url) => url.origin === location.origin && /^\/(sidebar\/|mine$|login$)/.test(url.pathname);
  document.addEventListener("click", (event) => {
    const link = event.target.closest && event.target.closest("a[href]");
    if (!link || link.target || link.getAttribute("href").startsWith("#")) return;
    if (!framable(new URL(link.href))) {
      link.target = "_blank";
      link.rel = "noopener";
    }
  });
})();
