// What every desk page does once loaded.
//
// A page rendered in answer to a form's POST (a refusal shown with the form as it was sent, a
// confirmation step, a secret shown once) names the page it shows in <meta name=desk-address>;
// that address replaces the form's in the address bar, so that a reload loads the page and sends
// nothing again.
//
// A notice of what the last action did, or why it was refused, is in a live region
// (data-announce). Screen readers announce a live region's changes, not what a page loads with,
// so the text goes in again once the page has loaded.
//
// Inside a CRM's frame, links to pages a CRM may not frame open in a tab of their own instead of
// leaving a broken box in the CRM: only the sidebar, its sign-in and "My work" may be framed.
(() => {
  "use strict";
  const address = document.querySelector('meta[name="desk-address"]');
  if (address && address.content) history.replaceState(history.state, "", address.content);

  for (const region of document.querySelectorAll("[data-announce]")) {
    const text = region.dataset.announce;
    if (!text) continue;
    region.textContent = "";
    setTimeout(() => { region.textContent = text; }, 100);
  }

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
