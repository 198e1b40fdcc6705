// Draws the projection chart from the #chart-data table the server
// rendered (the page carries no inline script): one line per group of the
// first metric, or of the metric picked in the selector. What it plots is
// left on #chart as data-series, and the time axis's range as
// data-xrange, so tests can compare them with the API.
(function () {
  "use strict";
  // For one point uPlot's time axis runs a thousand days past it: an
  // hour either side reads better.
  // The pages give times in UTC; so do the axes.
  function utc(ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); }
  function xRange(u, min, max) {
    var xs = u.data[0];
    return xs && xs.length === 1 ? [xs[0] - 3600, xs[0] + 3600] : [min, max];
  }
  // A group's legend label, each field and value isolated (U+2068 ...
  // U+2069, as <bdi> in the table): a right-to-left override in one value
  // reordered the rest of the label.
  function legend(g) {
    var o;
    try { o = JSON.parse(g); } catch (e) { return "\u2068" + g + "\u2069"; }
    if (o === null || typeof o !== "object" || Array.isArray(o)) return "\u2068" + g + "\u2069";
    return Object.keys(o).map(function (k) {
      var v = typeof o[k] === "string" ? o[k] : JSON.stringify(o[k]);
      return "\u2068" + k + "\u2069: \u2068" + v + "\u2069";
    }).join(", ");
  }
  function draw() {
    var box = document.getElementById("chart");
    var table = document.getElementById("chart-data");
    if (!box || !table) return;
    if (typeof uPlot === "undefined") {
      // Loaded into a boosted page, the scripts run in any order.
      var lib = document.querySelector('script[src*="uPlot"]');
      if (lib) lib.addEventListener("load", draw, { once: true });
      return;
    }
    var metrics = [].map.call(table.querySelectorAll("thead th"), function (th) { return th.textContent; }).slice(2);
    var rows = [].slice.call(table.querySelectorAll("tbody tr[data-x]"));
    if (!metrics.length || !rows.length) return;
    var picker = document.getElementById("metric");
    if (!picker) {
      picker = document.createElement("select");
      picker.id = "metric";
      picker.setAttribute("aria-label", "Metric");
      metrics.forEach(function (m) { var o = document.createElement("option"); o.value = o.textContent = m; picker.appendChild(o); });
      picker.addEventListener("change", draw);
      box.parentNode.insertBefore(picker, box);
    }
    var metric = picker.value || metrics[0];
    var xs = [], groups = [];
    rows.forEach(function (tr) {
      var x = Number(tr.dataset.x) / 1000;
      if (xs.indexOf(x) < 0) xs.push(x);
      if (groups.indexOf(tr.dataset.group) < 0) groups.push(tr.dataset.group);
    });
    xs.sort(function (a, b) { return a - b; });
    var data = [xs].concat(groups.map(function () { return xs.map(function () { return null; }); }));
    rows.forEach(function (tr) {
      var cell = tr.querySelector('td[data-metric="' + metric + '"]');
      if (!cell || cell.textContent === "") return;
      data[1 + groups.indexOf(tr.dataset.group)][xs.indexOf(Number(tr.dataset.x) / 1000)] = Number(cell.textContent);
    });
    var colours = ["#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f"];
    var series = [{}].concat(groups.map(function (g, i) {
      return { label: g ? legend(g) : metric, stroke: colours[i % colours.length], width: 2, points: { show: true } };
    }));
    box.textContent = "";
    var u = new uPlot({ width: Math.min(box.clientWidth || 900, 1100), height: 320, series: series, scales: { x: { time: true, range: xRange } }, tzDate: utc,
        hooks: { setScale: [function (u, key) { if (key === "x") box.dataset.xrange = JSON.stringify([u.scales.x.min, u.scales.x.max]); }] } }, data, box);
    if (window.fitPlot) window.fitPlot(box, u);
    box.dataset.metric = metric;
    box.dataset.series = JSON.stringify({ groups: groups, data: data });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw); else draw();
})();
