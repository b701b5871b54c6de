// nightowl dashboard: the whole script (no build step). Two jobs:
// 1. the login link `nightowl dashboard-url` prints carries the token after "#token="
//    (a fragment never reaches a server or its logs): fill it in, clear it, send;
// 2. a page marked data-refresh="N" asks for itself as JSON every N seconds while it is
//    visible and puts its live_* parts in place, except one the operator is typing in.
(function () {
  "use strict";
  var login = document.getElementById("login");
  if (login && location.hash.indexOf("#token=") === 0) {
    login.elements.token.value = decodeURIComponent(location.hash.slice(7));
    history.replaceState(null, "", location.pathname + location.search);
    login.submit();
    return;
  }
  var main = document.querySelector("main[data-refresh]");
  if (!main) return;
  var seconds = Number(main.getAttribute("data-refresh")) || 5;
  var busy = false;
  function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    fetch(location.href, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) {
        if (response.status === 401) { location.reload(); return null; }
        return response.ok ? response.json() : null;
      })
      .then(function (body) {
        main.classList.remove("stale");
        if (!body) return;
        Object.keys(body.fragments).forEach(function (name) {
          var target = document.getElementById(name);
          if (!target || target.contains(document.activeElement)) return;
          var open = Array.prototype.map.call(target.querySelectorAll("details"), function (d) { return d.open; });
          target.innerHTML = body.fragments[name];
          target.querySelectorAll("details").forEach(function (d, i) { if (open[i]) d.open = true; });
        });
        document.dispatchEvent(new CustomEvent("nightowl:refreshed"));
      })
      .catch(function () { main.classList.add("stale"); })
      .then(function () { busy = false; });
  }
  setInterval(refresh, seconds * 1000);
  document.addEventListener("visibilitychange", function () { if (!document.hidden) refresh(); });
})();
