// Gale console: the terminal page. xterm.js shows the device's shell; the WebSocket carries
// keystrokes and output as binary messages and window sizes as {"type":"resize"} text.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var el = document.getElementById("terminal");
    var status = document.getElementById("terminal-status");
    if (!el || !window.Terminal) return;
    var term = new window.Terminal({ cursorBlink: true, fontFamily: "ui-monospace, Menlo, Consolas, monospace", fontSize: 14,
      theme: { background: "#0d1117", foreground: "#e6edf3" } });
    var fit = new window.FitAddon.FitAddon();
    term.loadAddon(fit);
    term.open(el);
    fit.fit();
    var scheme = location.protocol === "https:" ? "wss:" : "ws:";
    var url = scheme + "//" + location.host + el.getAttribute("data-socket") + "&cols=" + term.cols + "&rows=" + term.rows;
    var ws = new WebSocket(url);
    ws.binaryType = "arraybuffer";
    var encoder = new TextEncoder();
    function setStatus(text, cls) { status.textContent = text; status.className = "badge " + cls; }
    ws.onopen = function () { setStatus("connected", "status-online"); term.focus(); };
    ws.onmessage = function (e) { term.write(new Uint8Array(e.data)); };
    ws.onclose = function (e) { setStatus(e.reason ? "ended: " + e.reason : "ended", "status-offline"); };
    term.onData(function (d) { if (ws.readyState === WebSocket.OPEN) ws.send(encoder.encode(d)); });
    term.onResize(function (s) {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "resize", cols: s.cols, rows: s.rows }));
    });
    window.addEventListener("resize", function () { fit.fit(); });
  });
})();
