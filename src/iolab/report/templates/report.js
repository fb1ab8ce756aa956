// Draws every chart of the report with vega-embed (inlined above) from the Vega-Lite spec in
// its figure's JSON block. Marks each figure data-rendered="yes"/"error" and the body
// data-charts="done" when all have settled, so a test (or a person) can tell.
(function () {
  "use strict";
  var options = {renderer: "svg", actions: {export: true, source: false, compiled: false, editor: false}};
  var pending = [];
  document.querySelectorAll("figure[data-chart]").forEach(function (figure) {
    var target = figure.querySelector(".chart");
    var spec = JSON.parse(figure.querySelector("script.vega-spec").textContent);
    pending.push(window.vegaEmbed(target, spec, options).then(function () {
      figure.dataset.rendered = "yes";
    }).catch(function (error) {
      figure.dataset.rendered = "error";
      var message = document.createElement("p");
      message.className = "chart-error";
      message.textContent = "This chart could not be drawn: " + error;
      target.appendChild(message);
    }));
  });
  Promise.all(pending).then(function () { document.body.dataset.charts = "done"; });
})();
