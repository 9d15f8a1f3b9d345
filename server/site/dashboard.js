// The dashboard: polls /api/stats once a second and draws the last minute as SVG polylines.
// No libraries; works offline. A failed poll marks the page "disconnected" and the next poll
// is still scheduled, so the page recovers by itself when the server comes back. Behind a load
// balancer the answers may come from another node (the one the page stuck to went down): the
// page shows which node answers (--node-name), and starts its charts afresh when it changes.
'use strict';

(function () {
  const POLL_MS = 1000;
  const TIMEOUT_MS = 3000;
  const WINDOW_MS = 60 * 1000;
  const WIDTH = 600;   // the charts' viewBox
  const HEIGHT = 150;

  const history = [];  // {t, live, busy, queued, rate}; rate is null for the first sample
  let previous = null; // the last /api/stats document, to turn totals into rates
  let samples = 0;

  const byId = (id) => document.getElementById(id);

  function formatNumber(value) {
    if (value === null || value === undefined || Number.isNaN(value)) return '\u2013';
    if (value >= 100 || Number.isInteger(value)) return Math.round(value).toLocaleString('en');
    return value.toFixed(1);
  }

  function formatUptime(seconds) {
    const s = Math.floor(seconds);
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    return (h > 0 ? h + 'h ' : '') + (h > 0 || m > 0 ? m + 'm ' : '') + (s % 60) + 's';
  }

  function setText(id, value) {
    const el = byId(id);
    if (el) el.textContent = value;
  }

  function setStatus(connected, detail) {
    const el = byId('status');
    el.textContent = connected ? 'connected' : 'disconnected';
    el.className = 'pill ' + (connected ? 'up' : 'down');
    el.title = detail || '';
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

  // Draws `keys` of the history into the chart's polylines (one per data-series attribute).
  function draw(chartId, keys, now) {
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

  function showNode(node) {
    const el = byId('node');
    if (!el) return;
    el.hidden = !node;
    el.textContent = node ? 'node ' + node : '';
  }

  function accept(stats) {
    const pool = stats.pool || {};
    let rate = null;
    const sameNode = !previous || previous.node === stats.node;
    if (!sameNode) history.length = 0;  // another node's figures do not continue these
    showNode(stats.node);
    // A restarted server (uptime or totals going backwards) starts the rate afresh.
    if (previous && sameNode && stats.time_ms > previous.time_ms &&
        stats.requests >= previous.requests && stats.uptime_s >= previous.uptime_s) {
      rate = ((stats.requests - previous.requests) * 1000) / (stats.time_ms - previous.time_ms);
    }
    previous = stats;
    history.push({
      t: stats.time_ms,
      live: pool.threads_live || 0,
      busy: pool.threads_busy || 0,
      queued: pool.queued || 0,
      rate: rate,
    });
    while (history.length > 0 && history[0].t < stats.time_ms - WINDOW_MS) history.shift();
    samples += 1;

    setText('samples', String(samples));
    setText('uptime', formatUptime(stats.uptime_s || 0));
    if (rate !== null) setText('rate-value', formatNumber(rate));
    setText('conn-open', formatNumber(stats.connections_open));
    setText('requests', formatNumber(stats.requests));
    setText('threads-live', formatNumber(pool.threads_live));
    setText('threads-busy', formatNumber(pool.threads_busy));
    setText('queued', formatNumber(pool.queued));
    setText('completed', formatNumber(pool.completed));
    setText('stolen', formatNumber(pool.stolen));
    setText('rejected', formatNumber(pool.rejected));

    draw('chart-threads', ['live', 'busy'], stats.time_ms);
    draw('chart-queue', ['queued'], stats.time_ms);
    draw('chart-rate', ['rate'], stats.time_ms);
  }

  async function poll() {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), TIMEOUT_MS);
    try {
      const response = await fetch('/api/stats', {cache: 'no-store', signal: controller.signal});
      if (!response.ok) throw new Error('HTTP ' + response.status);
      accept(await response.json());
      setStatus(true);
    } catch (e) {
      setStatus(false, String(e));
    } finally {
      clearTimeout(timer);
      setTimeout(poll, POLL_MS);
    }
  }

  poll();
})();
