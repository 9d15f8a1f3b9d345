// BullMQ worker of the queue benchmark (contract: ../README.md).
//
//   NODE_PATH=build/bench-queue/node/node_modules \
//     node worker.js --redis URL --queue Q --concurrency C
//
// One Node process with one BullMQ Worker whose `concurrency` option is C: up to C jobs in
// flight at once on the process's event loop (BullMQ's way for jobs that wait; for CPU-bound
// handlers it advises more processes, which is what 3 worker processes are). The rest is
// BullMQ's defaults (lock renewal, stalled-job checks, events). Prints `ready` once the
// Worker's connection is up and it fetches; SIGTERM closes the Worker, which waits for the
// jobs in flight.
'use strict';

const { Worker } = require('bullmq');
const contract = require('./contract');

async function main() {
  const a = contract.workerArgs();
  const worker = new Worker(
    a.queue,
    async (job) => {
      const start = contract.wallNs();
      if (job.name !== 'noop') throw new Error(`unknown task ${job.name}`);
      return start.toString();
    },
    { connection: contract.connection(a.redis), concurrency: a.concurrency },
  );
  worker.on('error', (e) => process.stderr.write(`worker: ${e.message}\n`));
  process.on('SIGTERM', async () => {
    await worker.close();
    process.exit(0);
  });
  await worker.waitUntilReady();
  process.stdout.write('ready\n');
}

main().catch((e) => contract.fail(`worker: ${e.stack}`));
