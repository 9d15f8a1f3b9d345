// api/pool.cpp: spool::pool, the C++ face of detail::core.
#include <cstdio>
#include <exception>
#include <string>

#include "api/default_pool.hpp"
#include "core.hpp"
#include "lifetime/lifetime.hpp"
#include "spool/spool.hpp"

namespace spool {

// NOLINTNEXTLINE(performance-unnecessary-value-param): the public signature; one copy per pool
pool::pool(config cfg) : core_(detail::create_core(cfg)), stamp_(core_->ref().stamp) {
  core_->set_face(this);
}

pool::pool(borrowed_core, detail::core* c) noexcept
    : core_(c), stamp_(c->ref().stamp), owns_core_(false) {
  core_->set_face(this);
}

pool::~pool() {
  if (!owns_core_) return;
  if (core_->is_own_worker() || core_->runs_own_task_here()) {
    std::fputs("spool: a pool was destroyed by one of its own tasks; that cannot finish\n", stderr);
    std::terminate();
  }
  core_->shutdown(shutdown_mode::drain, nullptr);
  detail::destroy_core(core_);
}

std::error_code pool::enqueue(detail::work_item* t, priority p) noexcept {
  return core_->submit(t, p);
}

detail::pool_ref detail::ref_of(pool& p) noexcept { return pool_access::of(p).ref(); }

bulk_result pool::enqueue_bulk(std::size_t n, detail::work_item* (*make)(void*, std::size_t),
                               void* context) noexcept {
  return core_->submit_bulk(n, make, context);
}

bool pool::takes_ranges() const noexcept { return core_->takes_ranges(); }

bulk_result pool::enqueue_range(detail::range_job* job) noexcept {
  return core_->submit_range(job);
}

void pool::throw_if_partial(const bulk_result& r) {
  if (!r.error) return;
  throw error(static_cast<errc>(r.error.value()),
              "spool: bulk submission stopped after " + std::to_string(r.accepted) + " tasks");
}

void pool::wait_idle() { throw_if_error(core_->wait_idle()); }

void pool::refuse_if_default() const {
  if (detail::is_default_core(core_)) {
    throw error(errc::invalid_argument, "spool: the default pool ends only at exit");
  }
}

void pool::close() {
  refuse_if_default();
  core_->close();
}

std::size_t pool::shutdown(shutdown_mode mode) {
  refuse_if_default();
  std::size_t dropped = 0;
  throw_if_error(core_->shutdown(mode, &dropped));
  return dropped;
}

shutdown_report pool::shutdown_until(std::chrono::steady_clock::time_point deadline) {
  refuse_if_default();
  shutdown_report report;
  throw_if_error(core_->shutdown(shutdown_mode::drain, &deadline, &report));
  return report;
}

std::stop_token pool::get_stop_token() const noexcept { return core_->stop_token(); }

stats pool::statistics() const noexcept { return core_->snapshot(); }

std::size_t pool::thread_count() const noexcept { return core_->thread_count(); }

bool pool::is_worker() const noexcept { return core_->is_own_worker(); }

void pool::resize(unsigned min_threads, unsigned max_threads) {
  throw_if_error(core_->resize(min_threads, max_threads));
}

void pool::pause() { throw_if_error(core_->pause()); }

void pool::resume() noexcept { core_->resume(); }

bool pool::paused() const noexcept { return core_->paused(); }

bool pool::wait_idle_for(std::chrono::nanoseconds timeout) {
  bool idle = false;
  const auto now = std::chrono::steady_clock::now();
  // Clamp: a huge timeout waits for good rather than overflowing the deadline.
  const auto deadline =
      timeout >= std::chrono::steady_clock::time_point::max() - now
          ? std::chrono::steady_clock::time_point::max()
          : now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
  throw_if_error(core_->wait_idle_until(deadline, &idle));
  return idle;
}

int this_worker_index() noexcept {
  detail::worker* w = detail::current_worker();
  return w != nullptr ? static_cast<int>(w->index) : -1;
}

pool* this_pool() noexcept {
  if (const detail::worker* w = detail::current_worker()) return w->owner.face();
  if (const detail::core* c = detail::core::running_outside()) return c->face();
  return nullptr;
}

blocking_region::blocking_region() noexcept : worker_(detail::blocking_begin()) {}

blocking_region::~blocking_region() {
  if (worker_ != nullptr) detail::blocking_end();
}

}  // namespace spool
