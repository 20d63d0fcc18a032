/* The search of a site opened from disk (file://), without a network.
 *
 * A page opened from disk cannot start a Web Worker, and Material's search runs in one; its
 * offline plugin therefore loads a shim from the internet (https://unpkg.com/iframe-worker/shim)
 * that runs the worker in a hidden iframe instead.  Offline, that shim never arrives and the
 * page has no search.  This file is that shim, shipped with the site (mkdocs.yml names it under
 * extra.polyfills, so the plugin adds no internet one): on file:// pages, `new Worker(url)`
 * loads the worker's script into a hidden iframe and passes messages both ways.
 */
(function () {
  "use strict";
  if (location.protocol !== "file:") {
    return;
  }

  class IFrameWorker extends EventTarget {
    constructor(url) {
      super();
      this.onmessage = null;
      this.onerror = null;
      this.queue = [];
      this.ready = false;
      const iframe = document.createElement("iframe");
      iframe.setAttribute("aria-hidden", "true");
      iframe.tabIndex = -1;
      iframe.style.display = "none";
      (document.body || document.documentElement).appendChild(iframe);
      this.iframe = iframe;
      const scope = iframe.contentWindow;
      const doc = scope.document;
      doc.open();
      doc.write("<!DOCTYPE html><html><head></head><body></body></html>");
      doc.close();
      const worker = this;
      scope.postMessage = function (data) {            // the worker's postMessage: to the page
        setTimeout(function () {
          worker.emit(new MessageEvent("message", { data: data }));
        });
      };
      scope.importScripts = function () {              // a worker's importScripts, as script tags
        for (const src of arguments) {
          const script = doc.createElement("script");
          script.src = new URL(src, url).href;
          doc.head.appendChild(script);
        }
      };
      const script = doc.createElement("script");
      script.src = new URL(url, location.href).href;
      script.onload = function () {
        worker.ready = true;
        for (const data of worker.queue.splice(0)) {
          worker.postMessage(data);
        }
      };
      script.onerror = function () {
        worker.emit(new Event("error"));
      };
      doc.head.appendChild(script);
    }

    emit(event) {
      this.dispatchEvent(event);
      const handler = event.type === "message" ? this.onmessage : this.onerror;
      if (typeof handler === "function") {
        handler.call(this, event);
      }
    }

    postMessage(data) {                                // the page's postMessage: to the worker
      if (!this.ready) {
        this.queue.push(data);
        return;
      }
      const scope = this.iframe.contentWindow;
      setTimeout(function () {
        scope.dispatchEvent(new scope.MessageEvent("message", { data: data }));
      });
    }

    terminate() {
      this.iframe.remove();
    }
  }

  window.Worker = IFrameWorker;
})();
