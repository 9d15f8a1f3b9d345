// The queue page: polls /api/queue?name=Q once a second (Q from the page's ?name=, else the
// first queue /api/queues lists) and draws the last minute as SVG polylines (charts.js). A
// failed poll marks the page "disconnected"; the next poll is still scheduled, so the page
// recovers by itself (a failover of Redis, a restart of spoold).
'use strict';

(function () {
  const POLL_MS = 1000;
  const {WINDOW_MS, byId, setText, formatNumber: format, setStatus, fetchJson, draw} = spoold;

  const history = [];  // {t, queued, running, rate}
  let previous = null; // {t, done}
  let name = new URLSearchParams(window.location.search).get('name');

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
        draw('chart-jobs', history, ['queued', 'running'], now);
        draw('chart-rate', history, ['rate'], now);
      }
      setStatus(true);
    } catch (e) {
      setStatus(false, String(e));
    }
    setTimeout(poll, POLL_MS);
  }

  poll();
})();
