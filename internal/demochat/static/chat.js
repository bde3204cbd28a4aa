// The demo customer chat: lines arrive over server-sent events (every line, the customer's own
// included, so that a reload or a second tab shows the same conversation), and the form sends
// what the customer types as JSON.
(function () {
  "use strict";
  var log = document.getElementById("lines");
  var form = document.getElementById("say");
  var input = document.getElementById("text");
  var status = document.getElementById("status");
  var names = { customer: "You", bot: "Demo bot", notice: "" };

  function show(line) {
    if (log.querySelector('[data-seq="' + line.seq + '"]')) {
      return; // a reconnect's catch-up overlaps what is shown
    }
    var li = document.createElement("li");
    li.className = "line " + line.who;
    li.dataset.seq = line.seq;
    li.dataset.who = line.who;
    li.dataset.testid = "line";
    var who = line.who === "agent" ? (line.author || "Support") : names[line.who];
    if (who) {
      var name = document.createElement("span");
      name.className = "who";
      name.textContent = who;
      li.appendChild(name);
    }
    var text = document.createElement("p");
    text.textContent = line.text;
    li.appendChild(text);
    log.appendChild(li);
    li.scrollIntoView({ block: "end" });
  }

  var events = new EventSource("/events");
  events.onmessage = function (e) {
    show(JSON.parse(e.data));
  };
  events.onopen = function () {
    document.body.dataset.live = "true";
  };

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var text = input.value.trim();
    if (!text) {
      return;
    }
    input.value = "";
    input.focus(); // the customer goes on typing, as in any chat
    status.textContent = "";
    fetch("/say", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ text: text }),
    }).then(function (r) {
      if (!r.ok) {
        return r.json().then(function (body) {
          status.textContent = body.error;
          input.value = text;
        });
      }
    }).catch(function () {
      status.textContent = "The chat is unreachable; your message was not sent.";
      input.value = text;
    });
  });
})();
