// Draws each div.timechart from the table the server rendered (the page
// carries no inline script): data-table names the table, data-series the
// columns (td[data-series]) to plot against each row's data-x (ms). What
// it plots is left on the div as data-plotted, and the time axis's range
// as data-xrange, so tests can compare them with the API.
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
  function draw() {
    var boxes = document.querySelectorAll("div.timechart");
    if (!boxes.length) return;
    if (typeof uPlot === "undefined") {
      // Loaded into a boosted page, the scripts run in any order.
      var lib = document.querySelector('script[src*="uPlot"]');
      if (lib) lib.addEventListener("load", draw, { once: true });
      return;
    }
    var colours = ["#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f"];
    [].forEach.call(boxes, function (box) {
      var table = document.getElementById(box.dataset.table);
      if (!table) return;
      var names = JSON.parse(box.dataset.series || "[]") || [];
      var rows = [].slice.call(table.querySelectorAll("tbody tr[data-x]"));
      var data = [rows.map(function (tr) { return Number(tr.dataset.x) / 1000; })];
      names.forEach(function (n) {
        data.push(rows.map(function (tr) {
          var td = tr.querySelector('td[data-series="' + n + '"]');
          // A cell shows its number for people (a rounded percentage) and
          // may carry the exact value in data-value.
          var v = td ? (td.dataset.value !== undefined ? td.dataset.value : td.textContent) : "";
          return v === "" ? null : Number(v);
        }));
      });
      var series = [{}].concat(names.map(function (n, i) {
        return { label: n, stroke: colours[i % colours.length], width: 2, points: { show: true }, spanGaps: false };
      }));
      box.textContent = "";
      var u = new uPlot({ width: Math.min(box.clientWidth || 900, 1100), height: 260, series: series, scales: { x: { time: true, range: xRange } }, tzDate: utc,
        hooks: { setScale: [function (u, key) { if (key === "x") box.dataset.xrange = JSON.stringify([u.scales.x.min, u.scales.x.max]); }] } }, data, box);
      if (window.fitPlot) window.fitPlot(box, u);
      box.dataset.plotted = JSON.stringify({ series: names, data: data });
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw); else draw();
})();
