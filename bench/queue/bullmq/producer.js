// BullMQ producer of the queue benchmark (contract: ../README.md).
//
//   NODE_PATH=build/bench-queue/node/node_modules node producer.js --redis URL --queue Q \
//       --jobs N (--mode single|bulk [--bulk B] | --rate R)
//
// single: Queue.add per job, each awaited. bulk: Queue.addBulk of B jobs per batch (one
// pipeline of the add script, one round trip). Jobs carry removeOnComplete: true (BullMQ's
// advice for queues of many jobs: no completed set to grow and trim; the result travels in
// the completed event). Results: QueueEvents, BullMQ's listener on the queue's events stream,
// from the stream's last entry before the first submit; the events stream's cap is raised
// above the run's events so that a slow reader loses none.
'use strict';

const { Queue, QueueEvents } = require('bullmq');
const IORedis = require('ioredis');
const contract = require('./contract');

const EVENTS_PER_JOB = 8; // added, waiting, active, completed, and room to spare

async function lastEventId(conn, queue) {
  const redis = new IORedis(conn);
  const last = await redis.xrevrange(`bull:${queue}:events`, '+', '-', 'COUNT', 1);
  redis.disconnect();
  return last.length ? last[0][0] : '0-0';
}

async function main() {
  const a = contract.producerArgs();
  const conn = contract.connection(a.redis);
  const queue = new Queue(a.queue, {
    connection: conn,
    defaultJobOptions: { removeOnComplete: true, removeOnFail: false },
    streams: { events: { maxLen: Math.max(10000, EVENTS_PER_JOB * a.jobs) } },
  });
  await queue.waitUntilReady();

  const submitted = new Map(); // job id -> submit ns
  const seen = new Map(); // job id -> [start ns, seen ns]
  const failed = [];
  let onProgress = () => {};
  const events = new QueueEvents(a.queue, {
    connection: conn, lastEventId: await lastEventId(conn, a.queue),
  });
  events.on('completed', ({ jobId, returnvalue }) => {
    const now = contract.wallNs();
    if (typeof returnvalue !== 'string' || !/^\d+$/.test(returnvalue)) {
      failed.push([jobId, `a result that is not a time in ns: ${returnvalue}`]);
    } else if (!seen.has(jobId)) {
      seen.set(jobId, [BigInt(returnvalue), now]);
    }
    onProgress();
  });
  events.on('failed', ({ jobId, failedReason }) => {
    failed.push([jobId, failedReason]);
    onProgress();
  });
  await events.waitUntilReady();

  const allSeen = () => [...submitted.keys()].every((id) => seen.has(id));
  const waitAll = () => new Promise((resolve) => {
    const timer = setTimeout(() => {
      const missing = [...submitted.keys()].filter((id) => !seen.has(id));
      contract.fail(`producer: ${missing.length} of ${a.jobs} results missing after `
        + `${a.timeout} s, e.g. ${missing.slice(0, 5)}`);
    }, a.timeout * 1000);
    onProgress = () => {
      if (failed.length) {
        const some = JSON.stringify(failed.slice(0, 3));
        contract.fail(`producer: ${failed.length} jobs failed, e.g. ${some}`);
      }
      if (seen.size >= a.jobs && allSeen()) {
        clearTimeout(timer);
        resolve();
      }
    };
    onProgress();
  });

  const t0 = contract.wallNs();
  if (a.mode) {
    if (a.mode === 'single') {
      for (let i = 0; i < a.jobs; i++) {
        const ns = contract.wallNs();
        const job = await queue.add('noop', { submit_ns: ns.toString() });
        submitted.set(job.id, ns);
      }
    } else {
      for (let left = a.jobs; left > 0;) {
        const n = Math.min(a.bulk, left);
        const ns = contract.wallNs();
        const data = { submit_ns: ns.toString() };
        const batch = Array.from({ length: n }, () => ({ name: 'noop', data }));
        const jobs = await queue.addBulk(batch);
        for (const job of jobs) submitted.set(job.id, ns);
        left -= n;
      }
    }
    const submitS = Number(contract.wallNs() - t0) / 1e9;
    await waitAll();
    const last = [...seen.values()].reduce((m, [, s]) => (s > m ? s : m), 0n);
    const doneS = Number(last - t0) / 1e9;
    console.log(JSON.stringify({ jobs: a.jobs, submit_s: submitS, done_s: doneS }));
  } else {
    // Open loop: job i is sent at t0 + i/R whatever became of the others, without waiting
    // for the previous add to return (ioredis pipelines them on one connection). Timers have
    // millisecond granularity, so a send can be up to about 1 ms late (send_lag_us).
    const lag = [];
    const adds = [];
    const t0h = process.hrtime.bigint();
    for (let i = 0; i < a.jobs; i++) {
      const due = t0h + BigInt(Math.round((i * 1e9) / a.rate));
      const wait = Number(due - process.hrtime.bigint()) / 1e6;
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      lag.push(Math.max(0, Number(process.hrtime.bigint() - due)));
      const ns = contract.wallNs();
      const add = queue.add('noop', { submit_ns: ns.toString() });
      adds.push(add.then((job) => submitted.set(job.id, ns)));
    }
    await Promise.all(adds);
    await waitAll();
    const start = [], result = [];
    for (const [id, ns] of submitted) {
      const [s, r] = seen.get(id);
      start.push(Number(s - ns));
      result.push(Number(r - ns));
    }
    console.log(JSON.stringify({
      jobs: a.jobs, rate: a.rate, start_us: contract.percentiles(start),
      result_us: contract.percentiles(result), send_lag_us: contract.percentiles(lag),
    }));
  }
  await events.close();
  await queue.close();
  process.exit(0);
}

main().catch((e) => contract.fail(`producer: ${e.stack}`));
