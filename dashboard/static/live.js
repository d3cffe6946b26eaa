// depsd dashboard: refresh the live parts of a page without reloading it.
// An element with data-live-src is replaced, every 1.5 s while the page is
// visible, by the same element rendered anew by the server; it stops when
// the server marks it data-live-done (the chain ended). Focus stays on the
// link or control that had it.
(function () {
  "use strict";
  var PERIOD = 1500;

  function outermost(el) {
    return !el.parentElement || !el.parentElement.closest("[data-live-src]");
  }

  function keyOf(node) {
    if (!node || node === document.body) return null;
    if (node.id) return "#" + node.id;
    if (node.getAttribute && node.getAttribute("href")) return 'a[href="' + node.getAttribute("href") + '"]';
    return null;
  }

  function refresh(el) {
    var src = el.getAttribute("data-live-src");
    return fetch(src, { headers: { "Accept": "text/html" }, cache: "no-store" })
      .then(function (r) {
        if (!r.ok) throw new Error(src + ": " + r.status);
        return r.text();
      })
      .then(function (html) {
        var tpl = document.createElement("template");
        tpl.innerHTML = html.trim();
        var next = tpl.content.firstElementChild;
        if (!next || next.outerHTML === el.outerHTML) return el;
        var key = el.contains(document.activeElement) ? keyOf(document.activeElement) : null;
        el.replaceWith(next);
        if (key) {
          var again = next.querySelector(key);
          if (again) again.focus();
        }
        return next;
      });
  }

  function loop(el) {
    setTimeout(function () {
      if (document.hidden) return loop(el);
      refresh(el).then(function (cur) {
        if (!cur.hasAttribute("data-live-done")) loop(cur);
      }, function () {
        loop(el); // depsd restarting: try again
      });
    }, PERIOD);
  }

  document.querySelectorAll("[data-live-src]").forEach(function (el) {
    if (outermost(el)) loop(el);
  });
})();
