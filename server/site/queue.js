// The queue page: polls /api/queue?name=Q once a second (Q from the page's ?name=, else the
// first queue /api/queues lists) and draws the last minute as SVG polylines. No libraries. A
// failed poll marks the page "disconnected"; the next poll is still scheduled, so the page
// recovers by itself (a failover of Redis, a restart of spoold).
'use strict';

(function () {
  const POLL_MS = 1000;
  const TIMEOUT_MS = 3000;
  const WINDOW_MS = 60 * 1000;
  const WIDTH = 600;
  const HEIGHT = 150;

  const history = [];  // {t, queued, running, rate}
  let previous = null; // {t, done}
  let name = new URLSearchParams(window.location.search).get('name');

  const byId = (id) => document.getElementById(id);
  const setText = (id, value) => { const el = byId(id); if (el) el.textContent = value; };
  const format = (v) => (v === null || v === undefined || Number.isNaN(v)) ? '\u2013'
    : (Number.isInteger(v) ? v.toLocaleString('en') : v.toFixed(1));

  function setStatus(connected, detail) {
    const el = byId('status');
    el.textContent = connected ? 'connected' : 'disconnected';
    el.className = 'pill ' + (connected ? 'up' : 'down');
    el.title = detail || '';
  }

  function niceMax(value) {
    if (!(value > 0)) return 1;
    const power = Math.pow(10, Math.floor(Math.log10(value)));
    for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power;
    return 10 * power;
  }

  function draw(chartId, keys, now) {
    const chart = byId(chartId);
    let top = 0;
    for (const s of history) for (const k of keys) if (s[k] !== null && s[k] > top) top = s[k];
    top = niceMax(top);
    for (const k of keys) {
      const points = history.filter((s) => s[k] !== null).map((s) => {
        const x = WIDTH - ((now - s.t) / WINDOW_MS) * WIDTH;
        const y = HEIGHT - (s[k] / top) * HEIGHT;
        return x.toFixed(1) + ',' + y.toFixed(1);
      });
      chart.querySelector('[data-series="' + k + '"]').setAttribute('points', points.join(' '));
    }
    chart.querySelector('.scale-max').textContent = 'max ' + format(top);
  }

  async function fetchJson(url) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), TIMEOUT_MS);
    try {
      const r = await fetch(url, { cache: 'no-store', signal: controller.signal });
      if (!r.ok) throw new Error(r.status + ' ' + (await r.text()).slice(0, 200));
      return await r.json();
    } finally {
      clearTimeout(timer);
    }
  }

  function showWorkers(workers) {
    const body = byId('workers');
    body.textContent = '';
    if (workers.length === 0) {
      const row = body.insertRow();
      const cell = row.insertCell();
      cell.colSpan = 3;
      cell.textContent = 'none';
      return;
    }
    for (const w of workers) {
      const row = body.insertRow();
      row.insertCell().textContent = w.name;
      row.insertCell().textContent = format(w.pending);
      row.insertCell().textContent = format(w.idle_ms);
    }
  }

  async function poll() {
    try {
      const list = await fetchJson('/api/queues');
      setText('queues', list.queues.length ? list.queues.join(', ') : 'none yet');
      if (!name && list.queues.length) name = list.queues[0];
      if (name) {
        const s = await fetchJson('/api/queue?name=' + encodeURIComponent(name));
        const now = Date.now();
        setText('queue-name', s.queue + (s.paused ? ' (paused)' : ''));
        byId('api-link').href = '/api/queue?name=' + encodeURIComponent(name);
        byId('api-link').textContent = '/api/queue?name=' + name;
        for (const k of ['queued', 'delayed', 'running', 'done', 'failed', 'dead', 'takeovers']) {
          setText(k, format(s[k]));
        }
        setText('lag', format(s.lag_ms));
        showWorkers(s.workers);
        const rate = previous ? Math.max(0, (s.done - previous.done) * 1000 / (now - previous.t)) : null;
        previous = { t: now, done: s.done };
        history.push({ t: now, queued: s.queued, running: s.running, rate: rate });
        while (history.length && now - history[0].t > WINDOW_MS) history.shift();
        draw('chart-jobs', ['queued', 'running'], now);
        draw('chart-rate', ['rate'], now);
      }
      setStatus(true);
    } catch (e) {
      setStatus(false, String(e));
    }
    setTimeout(poll, POLL_MS);
  }

  poll();
})();
