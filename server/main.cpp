// spoold: start, serve until SIGTERM/SIGINT, shut down gracefully. SIGHUP reloads the TLS
// certificate and key (tls.hpp); without TLS it is ignored.
//
// Shutdown order (each step needs the one before it):
//   0. with --drain-delay, /healthz fails for that long while everything else is served, so a
//      load balancer takes the node out of rotation before it stops accepting (a second
//      signal cuts the delay short);
//   1. the model stops accepting and lets in-flight requests finish (bounded by --grace);
//   2. the pool drains: store calls already handed to it complete, their answers go nowhere
//      if the grace period closed their connection;
//   3. the model's loops are destroyed (nothing can post to them any more);
//   4. the access log is flushed and the CPU time printed.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include <spool/queue/admin.hpp>
#include <spool/spool.hpp>

#include "app/access_log.hpp"
#include "app/app.hpp"
#include "app/metrics.hpp"
#include "app/static_files.hpp"
#include "conn/tls.hpp"
#include "limits/client_limits.hpp"
#include "limits/refusals.hpp"
#include "models/memory_trim.hpp"
#include "models/model.hpp"
#include "net.hpp"
#include "options.hpp"
#include "store/store.hpp"

namespace {

double seconds(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

void print_cpu_time() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) == 0) {
    std::printf("spoold: cpu user %.3f s, system %.3f s\n", seconds(usage.ru_utime),
                seconds(usage.ru_stime));
  }
}

// Blocks SIGTERM, SIGINT and SIGHUP in this thread and (by inheritance) in every thread started
// after it; the main thread takes them synchronously with sigwait, so no handler runs in a loop.
sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return set;
}

const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }  // the stops

// Waits for `delay`, or until another stop signal arrives.
void drain_for(const sigset_t& stop_signals, std::chrono::milliseconds delay) {
  using clock = std::chrono::steady_clock;
  const clock::time_point end = clock::now() + delay;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(end - clock::now());
    if (left.count() <= 0) return;
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(left.count() / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(left.count() % 1'000'000'000);
    const int sig = sigtimedwait(&stop_signals, nullptr, &ts);
    if (sig == SIGHUP) continue;  // no reloading while draining: the stop is under way
    if (sig > 0) {
      std::printf("spoold: %s: draining cut short\n", signal_name(sig));
      return;
    }
    if (errno != EINTR && errno != EAGAIN) return;
  }
}

int serve(const spoold::options& opts, const sigset_t& stop_signals) {
  spoold::raise_fd_limit();
  if (!spoold::make_freed_memory_trimmable()) {
    std::fprintf(stderr,
                 "spoold: mallopt(M_MXFAST, 0) failed: memory freed by threads other "
                 "than the main one may not be given back after a wave\n");
  }

  std::unique_ptr<spoold::store::store> store =
      spoold::store::open_store(opts.store, {.replicas = opts.store_replicas,
                                             .replica_timeout = opts.store_replicas_timeout,
                                             .connections = opts.store_connections});
  spoold::static_files files({.root = opts.root});
  spoold::metrics counters;
  counters.set_node_name(opts.node_name);
  std::unique_ptr<spoold::access_log> log;
  if (!opts.access_log.empty()) log = spoold::access_log::open(opts.access_log);

  spool::config cfg;
  cfg.min_threads = opts.min_threads;
  cfg.max_threads = opts.max_threads;
  cfg.name = "spoold-pool";
  // Store calls wait on disk or network: a worker that blocks in one is replaced by the
  // monitor, up to max_threads. A full queue answers 503 rather than stalling an event loop.
  cfg.queue_capacity = 16 * 1024;
  cfg.on_full = spool::full_policy::reject;
  // The event loops need the cores; pool workers sleep at once rather than poll.
  cfg.spin_rounds = 0;
  spool::pool pool(cfg);

  spoold::app application(files, *store, counters, pool, opts.node_name);
  // /queue shows the task queues of --queue-store, or of the store if it is Redis.
  std::optional<spool::queue::admin> queues;
  const std::string queue_store =
      !opts.queue_store.empty() ? opts.queue_store
                                : (spoold::store::is_redis_spec(opts.store) ? opts.store : "");
  if (!queue_store.empty()) application.show_queues(queues.emplace(queue_store));
  spoold::server_context ctx{opts, application, counters, pool, log.get()};
  std::optional<spoold::client_table> clients;
  if (opts.max_connections_per_client > 0 || opts.rate_limit > 0) {
    clients.emplace(opts.max_connections_per_client, opts.rate_limit, opts.rate_burst);
    ctx.clients = &*clients;
  }
  spoold::refusals refused(ctx);  // outlives the model, whose threads hand it connections
  ctx.refused = &refused;
  std::optional<spoold::tls_context> tls;
  if (opts.tls_port || opts.tls_only) {
    tls.emplace(opts.tls_cert, opts.tls_key);
    ctx.tls = &*tls;
  }
  std::unique_ptr<spoold::server_model> model = spoold::make_model(opts.model, ctx);
  const std::uint16_t port = model->start();

  std::printf(
      "spoold: listening on %s://%s:%u/ (model %s, store %s, %u loops, pool %u..%u "
      "threads, root %s%s%s)\n",
      opts.tls_only ? "https" : "http", spoold::url_host(opts.bind).c_str(),
      static_cast<unsigned>(port), opts.model.c_str(), store->describe().c_str(), opts.loops,
      opts.min_threads, opts.max_threads, opts.root.c_str(),
      opts.node_name.empty() ? "" : ", node ", opts.node_name.c_str());
  if (tls) {
    std::printf("spoold: TLS on https://%s:%u/ (certificate %s)\n",
                spoold::url_host(opts.bind).c_str(), static_cast<unsigned>(ctx.tls_port),
                opts.tls_cert.c_str());
  }
  std::fflush(stdout);

  int sig = 0;
  for (;;) {
    if (sigwait(&stop_signals, &sig) != 0) continue;
    if (sig != SIGHUP) break;
    if (!tls) continue;
    const std::string failed = tls->reload();
    if (failed.empty()) {
      std::printf("spoold: SIGHUP: TLS certificate reloaded from %s\n", opts.tls_cert.c_str());
      std::fflush(stdout);
    } else {
      std::fprintf(stderr,
                   "spoold: SIGHUP: TLS reload failed, keeping the current certificate: %s\n",
                   failed.c_str());
    }
  }
  if (opts.drain_delay.count() > 0) {
    std::printf("spoold: %s: draining (/healthz answers 503 for %.1f s)\n", signal_name(sig),
                static_cast<double>(opts.drain_delay.count()) / 1000.0);
    std::fflush(stdout);
    application.start_draining();
    drain_for(stop_signals, opts.drain_delay);
  }
  std::printf("spoold: %s: shutting down (grace %.1f s)\n", signal_name(sig),
              static_cast<double>(opts.grace.count()) / 1000.0);
  std::fflush(stdout);

  model->stop();
  model->wait();
  pool.shutdown(spool::shutdown_mode::drain);
  model.reset();
  if (log) log->flush();
  print_cpu_time();
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const sigset_t stop_signals = block_stop_signals();
  spoold::parsed_options parsed = spoold::parse_options(argc, argv);
  switch (parsed.outcome) {
    case spoold::parse_outcome::help:
    case spoold::parse_outcome::version:
      std::fputs(parsed.message.c_str(), stdout);
      return 0;
    case spoold::parse_outcome::error:
      std::fprintf(stderr, "spoold: %s (try --help)\n", parsed.message.c_str());
      return 2;
    case spoold::parse_outcome::run:
      break;
  }
  try {
    return serve(parsed.opts, stop_signals);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spoold: cannot start: %s\n", e.what());
    return 1;
  }
}
