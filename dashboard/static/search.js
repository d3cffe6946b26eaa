// depsd dashboard: the graph page's project search on a large instance.
// The page leaves its datalist empty (data-src says where the options
// are) and this fills it the first time the search field is used, so that
// the page does not carry thousands of options it may never show.
(function () {
  "use strict";
  // Any of these means the field is being used.
  var EVENTS = ["focus", "pointerdown", "keydown", "input"];
  document.querySelectorAll("datalist[data-src]").forEach(function (list) {
    var input = document.querySelector('input[list="' + list.id + '"]');
    if (!input) return;
    function fill() {
      EVENTS.forEach(function (e) { input.removeEventListener(e, fill); });
      fetch(list.getAttribute("data-src"), { headers: { "Accept": "text/html" } })
        .then(function (r) {
          if (!r.ok) throw new Error(list.getAttribute("data-src") + ": " + r.status);
          return r.text();
        })
        .then(function (html) {
          list.innerHTML = html;
          list.setAttribute("data-loaded", "");
        }, function () {
          // depsd restarting: try again when the field is used again.
          EVENTS.forEach(function (e) { input.addEventListener(e, fill); });
        });
    }
    EVENTS.forEach(function (e) { input.addEventListener(e, fill); });
  });
})();
