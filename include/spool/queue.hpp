// spool/queue.hpp: libspool_queue, a durable task queue on Redis Streams whose workers run
// jobs on spool pools, on any number of machines. Link spool::queue (or spool::queue_static).
//
//   producer   submit jobs (options, keys, bulk), results as spool futures (producer.hpp)
//   worker     handlers by task name on a spool pool, leases, fencing (worker.hpp)
//   admin      status, statistics, cancel, pause, dead jobs (admin.hpp)
//
// The model, the delivery contract and the wire format for other languages: docs/queue.md.
#pragma once

#include "spool/queue/admin.hpp"
#include "spool/queue/connection.hpp"
#include "spool/queue/error.hpp"
#include "spool/queue/handler.hpp"
#include "spool/queue/job.hpp"
#include "spool/queue/producer.hpp"
#include "spool/queue/worker.hpp"
