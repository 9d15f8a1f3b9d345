// The worker: checks the options, owns the pool (unless given one) and the three parts, and
// ties their lives together (start, stop, wait).
#include "spool/queue/worker.hpp"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <optional>
#include <random>
#include <thread>

#include "../names.hpp"
#include "dispatcher.hpp"
#include "lease_keeper.hpp"
#include "reporter.hpp"
#include "worker_core.hpp"

namespace spool::queue {
namespace detail {
namespace {

using namespace std::chrono_literals;

void check_options(const worker_options& o) {
  check_queue_name(o.queue);
  const auto refuse = [](const std::string& what) {
    throw error(errc::invalid_argument, "worker option " + what);
  };
  const auto range = [&](const char* name, std::chrono::milliseconds v,
                         std::chrono::milliseconds lo, std::chrono::milliseconds hi) {
    if (v < lo || v > hi) {
      refuse(std::string(name) + " = " + std::to_string(v.count()) + " ms: must be from " +
             std::to_string(lo.count()) + " to " + std::to_string(hi.count()) + " ms");
    }
  };
  range("lease", o.lease, 100ms, std::chrono::hours(24));
  range("check_interval", o.check_interval, 10ms, std::chrono::hours(1));
  if (o.check_interval > o.lease / 2) {
    refuse("check_interval = " + std::to_string(o.check_interval.count()) +
           " ms: must be at most lease / 2 (" + std::to_string(o.lease.count() / 2) + " ms)");
  }
  range("drain_timeout", o.drain_timeout, 0ms, std::chrono::hours(24));
  range("aging", o.aging, 0ms, std::chrono::hours(1));
  if (o.prefetch > 10000) refuse("prefetch = " + std::to_string(o.prefetch) + ": at most 10000");
  if (o.threads > 10000) refuse("threads = " + std::to_string(o.threads) + ": at most 10000");
  if (o.max_result < 1) refuse("max_result must be at least 1 byte");
  if (o.connection.connect_timeout < 1ms || o.connection.command_timeout < 1ms) {
    refuse("connection timeouts must be at least 1 ms");
  }
  if (!o.name.empty()) {
    for (char c : o.name) {
      if (c <= ' ' || c == 127) refuse("name: no spaces or control characters");
    }
  }
}

std::string default_name() {
  char host[256] = "host";
  gethostname(host, sizeof host - 1);
  std::random_device rd;
  char out[320];
  std::snprintf(out, sizeof out, "%s:%d:%04x", host, static_cast<int>(getpid()), rd() & 0xffff);
  return out;
}

}  // namespace

worker_core::worker_core(std::string_view url, worker_options o)
    : options((check_options(o), std::move(o))),
      target(std::make_shared<redis_target>(url, options.connection.connect_timeout)),
      name(options.name.empty() ? default_name() : options.name),
      lease_text(std::to_string(options.lease.count())),
      aging_text(std::to_string(options.aging.count())),
      listed_text(options.direct ? std::to_string(2 * options.check_interval.count()) : "0") {
  // A renewal (and each of the lease keeper's retries) must come well within the lease.
  options.connection.command_timeout =
      std::min(options.connection.command_timeout, options.lease / 3);
  options.connection.connect_timeout =
      std::min(options.connection.connect_timeout, options.lease / 3);
}

void worker_core::log(const std::string& line) {
  {
    std::lock_guard lock(log_mu_);
    const auto now = std::chrono::steady_clock::now();
    if (line == last_line_ && now - last_at_ < 1s) return;
    last_line_ = line;
    last_at_ = now;
  }
  if (options.on_log) {
    options.on_log(line);
  } else {
    std::fprintf(stderr, "spool-queue worker %s: %s\n", name.c_str(), line.c_str());
  }
}

}  // namespace detail

struct worker::impl {
  impl(std::string_view url, worker_options o) : core(url, std::move(o)) {}

  detail::worker_core core;
  std::optional<spool::pool> own_pool;
  std::unique_ptr<detail::reporter> report;
  std::unique_ptr<detail::lease_keeper> leases;
  std::unique_ptr<detail::dispatcher> dispatch;

  enum class run_state { idle, running, stopped };
  std::mutex mu;
  std::condition_variable cv;
  run_state state = run_state::idle;

  void stopped() {
    // On the dispatcher's thread, after the drain: the other parts stop too.
    leases->finish();
    report->finish();
    {
      std::lock_guard lock(mu);
      state = run_state::stopped;
    }
    cv.notify_all();
  }
};

worker::worker(std::string_view store_url, worker_options options)
    : impl_(std::make_unique<impl>(store_url, std::move(options))) {}

worker::~worker() {
  stop();
  if (impl_->dispatch) impl_->dispatch->join();
  // Handler tasks refer to the parts: wait for the last one (a handler that ignores its token
  // holds this up), then the parts go, then the pool of our own.
  impl_->core.wait_for_tasks();
  impl_->dispatch.reset();
  impl_->leases.reset();
  impl_->report.reset();
  impl_->own_pool.reset();
}

void worker::handle(std::string task, handler h) {
  detail::check_task_name(task);
  if (!h) throw error(errc::invalid_argument, "worker::handle: an empty handler");
  std::lock_guard lock(impl_->mu);
  if (impl_->state != impl::run_state::idle) {
    throw error(errc::wrong_order, "worker::handle after start()");
  }
  impl_->core.handlers.insert_or_assign(std::move(task), std::move(h));
}

void worker::start() {
  std::lock_guard lock(impl_->mu);
  if (impl_->state != impl::run_state::idle) {
    throw error(errc::wrong_order, "worker::start: started already");
  }
  detail::worker_core& core = impl_->core;
  spool::pool* pool = core.options.pool;
  unsigned threads = 0;
  if (pool == nullptr) {
    spool::config cfg;
    cfg.threads = core.options.threads != 0 ? core.options.threads
                                            : std::max(1u, std::thread::hardware_concurrency());
    cfg.name = "spool-q";
    pool = &impl_->own_pool.emplace(cfg);
    threads = cfg.threads;
  } else {
    // A pool of the caller's: as many jobs as it has threads now (an elastic pool may grow,
    // and the worker claims for what it has, not for what it may get).
    threads = std::max<unsigned>(1, static_cast<unsigned>(pool->thread_count()));
  }
  core.capacity = threads + core.options.prefetch;
  impl_->report = std::make_unique<detail::reporter>(core);
  impl_->leases = std::make_unique<detail::lease_keeper>(core, *impl_->report);
  impl_->dispatch = std::make_unique<detail::dispatcher>(core, *impl_->report, *pool);
  impl_->report->start();
  impl_->leases->start();
  impl_->dispatch->start([this] { impl_->stopped(); });
  impl_->state = impl::run_state::running;
}

void worker::request_stop() noexcept { impl_->core.request_stop(); }

void worker::wait() {
  std::unique_lock lock(impl_->mu);
  impl_->cv.wait(lock, [this] { return impl_->state != impl::run_state::running; });
}

void worker::stop() {
  request_stop();
  wait();
}

const std::string& worker::name() const noexcept { return impl_->core.name; }

worker_counters worker::counters() const {
  return impl_->core.metrics.snapshot(impl_->core.held.size());
}

std::string worker::prometheus() const {
  return impl_->core.metrics.prometheus(impl_->core.options.queue, impl_->core.name,
                                        impl_->core.held.size());
}

const std::vector<double>& worker::handler_time_bounds() {
  static const std::vector<double> b(detail::worker_metrics::bounds().begin(),
                                     detail::worker_metrics::bounds().end());
  return b;
}

}  // namespace spool::queue
