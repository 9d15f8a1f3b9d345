// The fault test's producer (tests/queue/queue_faults.py): submits jobs FROM .. FROM+COUNT-1 of
// a fixed plan in batches, each job under a unique key, at about RATE jobs per second, and
// prints "ACK INDEX ID" for every job acknowledged. A batch that fails (Redis down, a failover,
// replicas that do not confirm) is submitted again with the same keys until it is
// acknowledged, so a job is submitted once however often its batch is retried.
//
//   queue_fault_producer URL QUEUE FROM COUNT RATE REPLICAS
//
// The plan, by index i (job_plan): every 50th a sleep job of 100 to 900 ms; of the rest,
// every 13th a record job whose first attempt fails ("fail-first", 3 attempts); every 7th a
// record job delayed by 0.5 to 2 s; the others record jobs. Every job allows 20 takeovers.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "spool/queue.hpp"

namespace {

using namespace std::chrono_literals;
namespace q = spool::queue;

q::job_spec job_plan(long i) {
  q::job_spec j;
  j.options.key = "k" + std::to_string(i);
  j.options.takeovers = 20;
  j.options.result_ttl = std::chrono::hours(2);
  if (i % 50 == 0) {
    j.task = "sleep";
    j.payload = std::to_string(100 + (i * 37) % 800);
    return j;
  }
  j.task = "record";
  j.payload = "p" + std::to_string(i);
  if (i % 13 == 0) {
    j.payload = "fail-first p" + std::to_string(i);
    j.options.attempts = 3;
    j.options.backoff = 100ms;
  } else if (i % 7 == 0) {
    j.options.delay = std::chrono::milliseconds(500 * (1 + i % 4));
  }
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s URL QUEUE FROM COUNT RATE REPLICAS\n", argv[0]);
    return 2;
  }
  const std::string url = argv[1];
  const std::string queue = argv[2];
  const long from = std::atol(argv[3]);
  const long count = std::atol(argv[4]);
  const double rate = std::atof(argv[5]);
  q::producer_options options;
  options.replicas = static_cast<unsigned>(std::atoi(argv[6]));
  options.replica_timeout = 1000ms;
  options.connection.connect_timeout = 500ms;
  options.connection.command_timeout = 2000ms;
  q::producer p(url, options);

  constexpr long batch = 20;
  const auto period = std::chrono::duration<double>(batch / rate);
  auto next = std::chrono::steady_clock::now();
  long retries = 0;
  for (long start = from; start < from + count; start += batch) {
    std::vector<q::job_spec> jobs;
    for (long i = start; i < std::min(start + batch, from + count); ++i)
      jobs.push_back(job_plan(i));
    while (true) {
      try {
        const std::vector<q::submitted> acks = p.submit_bulk(queue, jobs);
        for (std::size_t k = 0; k < acks.size(); ++k) {
          std::printf("ACK %ld %s\n", start + static_cast<long>(k), acks[k].id.c_str());
        }
        std::fflush(stdout);
        break;
      } catch (const q::error& e) {
        ++retries;
        std::fprintf(stderr, "fault_producer: batch at %ld: %s (retrying)\n", start, e.what());
        std::this_thread::sleep_for(200ms);
      }
    }
    next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(period);
    std::this_thread::sleep_until(next);
  }
  std::printf("DONE %ld retries\n", retries);
  std::fflush(stdout);
  return 0;
}
