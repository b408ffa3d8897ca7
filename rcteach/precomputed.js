// The static view of an explorer (rcteach/precomputed.py): show the precomputed figure of the
// combination of control values chosen; disable a control that changes nothing at that setting.
(function () {
  var root = document.currentScript.parentElement;
  var spec = JSON.parse(root.querySelector("script.rcteach-static-data").textContent);
  var img = root.querySelector("img");
  var inputs = spec.controls.map(function (c) { return root.querySelector('[data-control="' + c.name + '"]'); });

  function positions() {
    return inputs.map(function (el) { return el.type === "checkbox" ? (el.checked ? 1 : 0) : Number(el.value); });
  }
  function image(pos) {  // row-major over the controls, as itertools.product
    var k = 0;
    spec.controls.forEach(function (c, i) { k = k * c.n + pos[i]; });
    return spec.index[k];
  }
  function show() {
    var pos = positions();
    img.src = "data:image/png;base64," + spec.images[image(pos)];
    spec.controls.forEach(function (c, i) {
      var seen = {};
      for (var j = 0; j < c.n; j++) {
        var p = pos.slice();
        p[i] = j;
        seen[image(p)] = true;
      }
      inputs[i].disabled = Object.keys(seen).length < 2;
      inputs[i].parentElement.querySelector("output").textContent = c.labels[pos[i]];
    });
  }
  inputs.forEach(function (el) {
    el.addEventListener("input", show);
    el.addEventListener("change", show);
  });
  show();
})();
