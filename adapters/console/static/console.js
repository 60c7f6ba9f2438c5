// Progressive enhancement only: every flow works without this script. Live updates come as
// server-sent events from /console/events; the inbox refreshes its list in place, the inquiry page
// shows a reload notice (so nothing typed in a form is lost).
(function () {
  "use strict";
  if (!window.EventSource) return;
  var page = document.body.getAttribute("data-page");
  var live = document.getElementById("live");
  function announce(msg) { if (live) { live.textContent = msg; } }
  var url, mark;
  if (page === "inbox") {
    mark = document.getElementById("inbox-list");
    url = "/console/events?";
  } else if (page === "inquiry") {
    var m = location.pathname.match(/^\/console\/inquiries\/([^\/]+)$/);
    mark = document.getElementById("changed");
    if (!m || !mark) return;
    url = "/console/events?inquiry=" + m[1] + "&";
  } else {
    return;
  }
  // since: the state the page shows, so a change made before the stream connects is not missed.
  var es = new EventSource(url + "since=" + encodeURIComponent(mark ? mark.getAttribute("data-since") || "" : ""));
  es.addEventListener("signedout", function () { es.close(); });
  es.addEventListener("changed", function () {
    if (page === "inquiry") {
      var n = document.getElementById("changed");
      if (n) { n.hidden = false; }
      announce("This inquiry has changed. Reload to see it.");
      return;
    }
    fetch(location.href, { credentials: "same-origin" }).then(function (r) {
      return r.ok ? r.text() : null;
    }).then(function (html) {
      if (!html) return;
      var doc = new DOMParser().parseFromString(html, "text/html");
      var fresh = doc.getElementById("inbox-list");
      var cur = document.getElementById("inbox-list");
      if (fresh && cur && !cur.contains(document.activeElement)) {
        cur.replaceWith(fresh);
        var counts = doc.querySelector(".counts"), old = document.querySelector(".counts");
        if (counts && old && !old.contains(document.activeElement)) { old.replaceWith(counts); }
        announce("Inbox updated.");
      }
    });
  });
})();
