// The driver contract's command lines, clock and reports for the Node driver (the Python
// drivers share ../contract.py, which this mirrors; the contract: ../README.md).
'use strict';

const { parseArgs } = require('node:util');

function fail(message) {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

function parse(options) {
  try {
    return parseArgs({ options, strict: true }).values;
  } catch (e) {
    fail(e.message);
  }
}

function positive(name, text) {
  const n = Number(text);
  if (!(n > 0)) fail(`--${name} must be a positive number, not ${text}`);
  return n;
}

function workerArgs() {
  const v = parse({
    redis: { type: 'string' }, queue: { type: 'string' }, concurrency: { type: 'string' },
  });
  if (!v.redis || !v.queue || !v.concurrency) {
    fail('usage: worker.js --redis URL --queue Q --concurrency C');
  }
  return { redis: v.redis, queue: v.queue, concurrency: positive('concurrency', v.concurrency) };
}

function producerArgs() {
  const v = parse({
    redis: { type: 'string' }, queue: { type: 'string' }, jobs: { type: 'string' },
    mode: { type: 'string' }, bulk: { type: 'string', default: '100' }, rate: { type: 'string' },
    timeout: { type: 'string', default: '120' },
  });
  if (!v.redis || !v.queue || !v.jobs || (v.mode === undefined) === (v.rate === undefined)) {
    fail('usage: producer.js --redis URL --queue Q --jobs N '
      + '(--mode single|bulk [--bulk B] | --rate R)');
  }
  if (v.mode !== undefined && v.mode !== 'single' && v.mode !== 'bulk') {
    fail(`unknown --mode ${v.mode}`);
  }
  return {
    redis: v.redis, queue: v.queue, jobs: positive('jobs', v.jobs), mode: v.mode,
    bulk: positive('bulk', v.bulk),
    rate: v.rate === undefined ? undefined : positive('rate', v.rate),
    timeout: positive('timeout', v.timeout),
  };
}

// ioredis options from redis://HOST:PORT/DB. maxRetriesPerRequest null: BullMQ requires it of
// the connections that block.
function connection(url) {
  const u = new URL(url);
  if (u.protocol !== 'redis:') fail(`not a redis:// URL: ${url}`);
  return {
    host: u.hostname, port: Number(u.port || 6379), db: Number(u.pathname.slice(1) || 0),
    maxRetriesPerRequest: null,
  };
}

// CLOCK_REALTIME in ns at microsecond precision: Date.now() has milliseconds only, so the
// monotonic clock is tied to it once, at the edge of a millisecond.
const clockOffset = (() => {
  const first = Date.now();
  let now;
  while ((now = Date.now()) === first);
  return BigInt(now) * 1000000n - process.hrtime.bigint();
})();
const wallNs = () => process.hrtime.bigint() + clockOffset;

function percentiles(values) {
  const v = [...values].sort((a, b) => a - b);
  const pick = (q) => v[Math.min(v.length - 1, Math.max(0, Math.round(q * v.length) - 1))];
  const us = (ns) => Math.round(ns / 100) / 10;
  return { p50: us(pick(0.5)), p99: us(pick(0.99)), max: us(v[v.length - 1]) };
}

module.exports = { fail, workerArgs, producerArgs, connection, wallNs, percentiles };
