// Gale console: the little a browser needs beyond htmx. Live changes from the server (an
// EventSource on /live) make the page's live regions fetch themselves again; the theme
// toggle; keyboard shortcuts; forms that submit on change; upload progress.
(function () {
  "use strict";

  var root = document.documentElement;
  var saved = localStorage.getItem("gale-theme");
  if (saved) root.setAttribute("data-theme", saved);

  function toggleTheme() {
    var dark = root.getAttribute("data-theme") === "dark" ||
      (!root.getAttribute("data-theme") && window.matchMedia("(prefers-color-scheme: dark)").matches);
    var next = dark ? "light" : "dark";
    root.setAttribute("data-theme", next);
    localStorage.setItem("gale-theme", next);
  }

  function refresh(kind) {
    document.querySelectorAll("[data-live]").forEach(function (el) {
      // A list with a selection waits: refreshing it would drop what the user ticked.
      if (el.querySelector("input[name=ids]:checked")) return;
      if (el.getAttribute("data-live").split(" ").indexOf(kind) >= 0 && window.htmx) {
        window.htmx.trigger(el, "live");
      }
    });
  }

  function listen() {
    var url = document.body.getAttribute("data-live-url");
    if (!url || !window.EventSource) return;
    var source = new EventSource(url);
    source.addEventListener("device", function () { refresh("device"); });
    source.addEventListener("alert", function () { refresh("alert"); });
    source.addEventListener("signedout", function () {
      source.close();
      window.location.assign("/signin?reason=" + encodeURIComponent("Your session ended: sign in again."));
    });
  }

  // A command's output panel follows its stream until the command ends.
  function follow(root) {
    root.querySelectorAll("[data-stream]:not([data-following])").forEach(function (panel) {
      panel.setAttribute("data-following", "");
      var out = panel.querySelector("[data-output]");
      var badge = panel.querySelector("[data-run-status]");
      var source = new EventSource(panel.getAttribute("data-stream"));
      source.addEventListener("output", function (e) {
        var d = JSON.parse(e.data);
        if (d.replace) {
          out.querySelectorAll(".out-" + d.stream).forEach(function (n) { n.remove(); });
        }
        var span = document.createElement("span");
        span.className = "out-" + d.stream;
        span.textContent = d.text;
        out.appendChild(span);
        out.scrollTop = out.scrollHeight;
      });
      source.addEventListener("done", function (e) {
        var d = JSON.parse(e.data);
        source.close();
        badge.textContent = d.status + (d.exitCode !== null && d.exitCode !== undefined ? " (exit " + d.exitCode + ")" : "");
        badge.className = "badge " + (d.status === "completed" && d.exitCode === 0 ? "status-online" : "status-offline");
        if (d.error) {
          var err = document.createElement("span");
          err.className = "out-stderr";
          err.textContent = "\n" + d.error;
          out.appendChild(err);
        }
      });
      source.onerror = function () { if (source.readyState === EventSource.CLOSED) badge.textContent = "disconnected"; };
    });
  }

  document.addEventListener("htmx:afterSwap", function () { follow(document); });

  // An upload sent by htmx shows how much of the file has gone.
  document.addEventListener("htmx:xhr:progress", function (e) {
    var bar = e.target.querySelector && e.target.querySelector("[data-upload-progress]");
    if (!bar || !e.detail.lengthComputable || !e.detail.total) return;
    var pct = Math.floor(100 * e.detail.loaded / e.detail.total);
    bar.value = pct;
    var label = e.target.querySelector("[data-upload-percent]");
    if (label) label.textContent = pct + "%";
  });

  // Metrics charts: the data is in the element's data-chart, as percentages per Unix second.
  function charts() {
    if (!window.uPlot) return;
    var style = getComputedStyle(document.documentElement);
    var colour = function (name) { return style.getPropertyValue(name).trim(); };
    document.querySelectorAll("[data-chart]").forEach(function (el) {
      var d = JSON.parse(el.getAttribute("data-chart"));
      var series = [{}, { label: "CPU %", stroke: colour("--link"), width: 2 },
        { label: "Memory %", stroke: colour("--ok"), width: 2 }, { label: "Disk %", stroke: colour("--warn"), width: 2 }];
      var axis = { stroke: colour("--muted"), grid: { stroke: colour("--border") }, ticks: { stroke: colour("--border") } };
      new window.uPlot({ width: el.clientWidth || 600, height: 220, series: series,
        scales: { y: { range: [0, 100] } }, axes: [axis, axis] }, [d.t, d.cpu, d.ram, d.disk], el);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    listen();
    follow(document);
    charts();
    document.querySelectorAll("[data-theme-toggle]").forEach(function (b) { b.addEventListener("click", toggleTheme); });
    document.querySelectorAll("form[data-autosubmit] select").forEach(function (s) {
      s.addEventListener("change", function () { s.form.submit(); });
    });
  });

  document.addEventListener("click", function (e) {
    var t = e.target.closest("[data-dismiss]");
    if (t) t.parentElement.remove();
    var copy = e.target.closest("[data-copy]");
    if (copy && navigator.clipboard) {
      navigator.clipboard.writeText(document.getElementById(copy.getAttribute("data-copy")).textContent).then(function () {
        copy.textContent = "Copied";
      });
    }
  });

  // A "select all" box ticks the boxes of its name in its form.
  document.addEventListener("change", function (e) {
    var all = e.target.closest("[data-check-all]");
    if (!all) return;
    all.form.querySelectorAll('input[type=checkbox][name="' + all.getAttribute("data-check-all") + '"]').forEach(function (b) {
      b.checked = all.checked;
    });
  });

  // "/" focuses the search of the page (or the global one), as in most consoles.
  document.addEventListener("keydown", function (e) {
    if (e.key !== "/" || e.ctrlKey || e.metaKey || e.altKey) return;
    var tag = (e.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "textarea" || tag === "select" || e.target.isContentEditable) return;
    var box = document.getElementById("device-search") || document.getElementById("global-search");
    if (box) { e.preventDefault(); box.focus(); box.select(); }
  });
})();
