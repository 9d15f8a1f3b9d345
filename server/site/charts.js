// What the dashboard and the queue page share: the connection pill, numbers as text, a JSON
// poll with a time limit, and the last-minute charts: each `figure.chart` holds an SVG whose
// polylines (one per data-series attribute) are redrawn from a history of samples, and whose
// grid lines are added here. Loaded before the page's own script. No libraries.
'use strict';

const spoold = (function () {
  const TIMEOUT_MS = 3000;
  const WINDOW_MS = 60 * 1000;
  const WIDTH = 600;   // the charts' viewBox
  const HEIGHT = 150;

  const byId = (id) => document.getElementById(id);

  function setText(id, value) {
    const el = byId(id);
    if (el) el.textContent = value;
  }

  function formatNumber(value) {
    if (value === null || value === undefined || Number.isNaN(value)) return '\u2013';
    if (value >= 100 || Number.isInteger(value)) return Math.round(value).toLocaleString('en');
    return value.toFixed(1);
  }

  function setStatus(connected, detail) {
    const el = byId('status');
    el.textContent = connected ? 'connected' : 'disconnected';
    el.className = 'pill ' + (connected ? 'up' : 'down');
    el.title = detail || '';
  }

  // The JSON at `url`; throws on a failed request, an error status or TIMEOUT_MS passing.
  async function fetchJson(url) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), TIMEOUT_MS);
    try {
      const r = await fetch(url, {cache: 'no-store', signal: controller.signal});
      if (!r.ok) throw new Error(r.status + ' ' + (await r.text()).slice(0, 200));
      return await r.json();
    } finally {
      clearTimeout(timer);
    }
  }

  // A "nice" top for the y axis: 1, 2 or 5 times a power of ten, at least `value`.
  function niceMax(value) {
    if (!(value > 0)) return 1;
    const power = Math.pow(10, Math.floor(Math.log10(value)));
    for (const step of [1, 2, 5, 10]) {
      if (step * power >= value) return step * power;
    }
    return 10 * power;
  }

  // Draws `keys` of `history` ({t, key: value or null}, oldest first) into the chart's
  // polylines, the newest sample (time `now`) at the right edge.
  function draw(chartId, history, keys, now) {
    const chart = byId(chartId);
    let top = 0;
    for (const sample of history) {
      for (const key of keys) {
        if (sample[key] !== null && sample[key] > top) top = sample[key];
      }
    }
    top = niceMax(top);
    for (const key of keys) {
      const line = chart.querySelector('polyline[data-series="' + key + '"]');
      const points = [];
      for (const sample of history) {
        if (sample[key] === null) continue;
        const x = WIDTH - ((now - sample.t) / WINDOW_MS) * WIDTH;
        const y = HEIGHT - (sample[key] / top) * HEIGHT;
        points.push(x.toFixed(1) + ',' + y.toFixed(1));
      }
      line.setAttribute('points', points.join(' '));
    }
    const scale = chart.querySelector('.scale-max');
    if (scale) scale.textContent = 'max ' + formatNumber(top);
  }

  // Every chart's grid: lines at the top, the middle and the bottom, behind the series.
  for (const svg of document.querySelectorAll('figure.chart svg')) {
    for (const y of [0, HEIGHT / 2, HEIGHT]) {
      const line = document.createElementNS('http://www.w3.org/2000/svg', 'line');
      line.setAttribute('class', 'grid');
      line.setAttribute('x1', '0');
      line.setAttribute('y1', String(y));
      line.setAttribute('x2', String(WIDTH));
      line.setAttribute('y2', String(y));
      svg.insertBefore(line, svg.querySelector('polyline'));
    }
  }

  return {WINDOW_MS, byId, setText, formatNumber, setStatus, fetchJson, draw};
})();
