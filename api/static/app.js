// zksched UI: the live refresh of the task list. The filters live in the URL, so refreshing
// the rows of the same URL keeps them; only the table body is replaced, so the scroll
// position stays where the user left it. The pages work without this script.
(function () {
  "use strict";
  var body = document.querySelector("tbody[data-live]");
  var toggle = document.getElementById("live");
  if (!body || !toggle) {
    return;
  }
  var key = "zksched.live";
  toggle.checked = localStorage.getItem(key) !== "off";
  toggle.addEventListener("change", function () {
    localStorage.setItem(key, toggle.checked ? "on" : "off");
  });
  var busy = false;
  function refresh() {
    if (!toggle.checked || busy || document.hidden) {
      return;
    }
    busy = true;
    var url = new URL(window.location.href);
    url.searchParams.set("partial", "rows");
    fetch(url.toString(), { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) {
        if (r.redirected || !r.ok) {
          throw new Error("refresh: HTTP " + r.status);
        }
        return r.text();
      })
      .then(function (html) {
        body.innerHTML = html; // server-rendered by html/template: every value is escaped
      })
      .catch(function () {
        var stamp = document.getElementById("refreshed");
        if (stamp) {
          stamp.textContent = "refresh failed; retrying";
        }
      })
      .finally(function () {
        busy = false;
      });
  }
  setInterval(refresh, 3000);
})();
