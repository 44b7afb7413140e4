// Search from disk. A page opened as file:// cannot start a Web Worker, and
// Material runs its search in one. There, this stands in for `Worker`: the
// worker's script runs in a hidden frame of the page (same origin), messages
// are handed across by hand, asynchronously as a worker's are. Served over
// http(s) it does nothing. The index itself comes from search/search_index.js,
// written by scripts/mkdocs_hooks.py.
(function () {
  "use strict";
  if (location.protocol !== "file:") return;

  function FrameWorker(url) {
    var outer = this;
    var listeners = {};
    var pending = [];
    var frame = document.createElement("iframe");
    frame.style.display = "none";
    frame.setAttribute("aria-hidden", "true");
    frame.setAttribute("tabindex", "-1");
    (document.body || document.documentElement).appendChild(frame);
    var inner = frame.contentWindow;
    var loaded = false;

    // What the worker posts comes out as this object's "message" events.
    inner.postMessage = function (data) {
      setTimeout(function () { outer._emit(data); }, 0);
    };
    inner.importScripts = function () {
      throw new Error("importScripts is not available to the search worker from disk");
    };

    this._emit = function (data) {
      var event = { data: data, type: "message", target: outer };
      if (typeof outer.onmessage === "function") outer.onmessage(event);
      (listeners.message || []).slice().forEach(function (fn) { fn.call(outer, event); });
    };

    function deliver(data) {
      var event = new inner.MessageEvent("message", { data: data });
      inner.dispatchEvent(event);
    }

    this.postMessage = function (data) {
      if (!loaded) { pending.push(data); return; }
      setTimeout(function () { deliver(data); }, 0);
    };
    this.addEventListener = function (type, fn) {
      (listeners[type] = listeners[type] || []).push(fn);
    };
    this.removeEventListener = function (type, fn) {
      listeners[type] = (listeners[type] || []).filter(function (f) { return f !== fn; });
    };
    this.terminate = function () { frame.remove(); };

    var script = inner.document.createElement("script");
    script.src = new URL(String(url), location.href).href;
    script.onload = function () {
      loaded = true;
      pending.splice(0).forEach(function (data) { setTimeout(function () { deliver(data); }, 0); });
    };
    script.onerror = function () {
      var event = { type: "error", message: "cannot load " + script.src };
      (listeners.error || []).forEach(function (fn) { fn.call(outer, event); });
    };
    (inner.document.head || inner.document.documentElement).appendChild(script);
  }

  window.Worker = function (url) { return new FrameWorker(url); };
})();
