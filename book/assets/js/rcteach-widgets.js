// Loaded on pages with saved ipywidgets state, after require.js and before embed-amd.js
// (see nb_ipywidgets_js in _config.yml).  Two fixes for an offline book:
// 1. embed-amd.js finds its font files from its AMD module path
//    "@jupyter-widgets/html-manager/dist/"; map that path to this folder (_static/js/).
// 2. ipywidgets typesets labels with the MathJax 2 call MathJax.Hub.Queue(["Typeset", Hub, el]);
//    the book loads MathJax 3, so provide Hub.Queue on top of MathJax 3's typesetPromise.
(function () {
  var here = document.currentScript.src.split("?")[0].replace(/[^\/]*$/, "");
  require.config({ paths: { "@jupyter-widgets/html-manager/dist": here.replace(/\/$/, "") } });

  function queue(job) {
    var mj = window.MathJax, el = job && job[2];
    if (mj && typeof mj.typesetPromise === "function") {
      mj.typesetPromise(el ? [el] : undefined).catch(function (err) { console.warn(err); });
    }  // before MathJax 3 has loaded, its first typesetting pass covers the page anyway
  }
  var config = (window.MathJax = window.MathJax || {});
  config.Hub = { Queue: queue };
  config.startup = config.startup || {};
  var ready = config.startup.ready;
  config.startup.ready = function () {
    if (ready) { ready(); } else { window.MathJax.startup.defaultReady(); }
    window.MathJax.Hub = { Queue: queue };
  };
})();
