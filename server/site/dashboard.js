// The dashboard: polls /api/stats once a second and draws the last minute as SVG polylines
// (charts.js). No libraries; works offline. A failed poll marks the page "disconnected" and the
// next poll is still scheduled, so the page recovers by itself when the server comes back.
// Behind a load balancer the answers may come from another node (the one the page stuck to went
// down): the page shows which node answers (--node-name), and starts its charts afresh when it
// changes.
'use strict';

(function () {
  const POLL_MS = 1000;
  const {WINDOW_MS, byId, setText, formatNumber, setStatus, fetchJson, draw} = spoold;

  const history = [];  // {t, live, busy, queued, rate}; rate is null for the first sample
  let previous = null; // the last /api/stats document, to turn totals into rates
  let samples = 0;

  function formatUptime(seconds) {
    const s = Math.floor(seconds);
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    return (h > 0 ? h + 'h ' : '') + (h > 0 || m > 0 ? m + 'm ' : '') + (s % 60) + 's';
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

    draw('chart-threads', history, ['live', 'busy'], stats.time_ms);
    draw('chart-queue', history, ['queued'], stats.time_ms);
    draw('chart-rate', history, ['rate'], stats.time_ms);
  }

  async function poll() {
    try {
      accept(await fetchJson('/api/stats'));
      setStatus(true);
    } catch (e) {
      setStatus(false, String(e));
    } finally {
      setTimeout(poll, POLL_MS);
    }
  }

  poll();
})();
