// The jobs a worker holds: claimed in Redis under an attempt of this worker, and not yet
// recorded, handed back or lost. The dispatcher adds them, the lease keeper renews them, the
// reporter and the drain remove them.
//
// A held job's phase is one atomic field, and every transition is a compare-and-swap from the
// phase it must be in, so that of two threads racing for a job (a handler starting and the
// drain handing it back; a handler returning and the lease keeper finding its time limit
// passed) exactly one wins:
//
//   waiting --(handler starts)--> running --(handler returns)--> reporting --> removed
//      |                            |  \--(time limit)--> expired --(failure recorded)--> removed
//      |                            \--(drain gives up on it)--> handing_back --> removed
//      \--(drain, before it starts)--> handing_back --> removed
//   any phase --(Redis says the lease is lost, or the job cancelled)--> lost --> removed
//
// A handler whose job left `running` by another path still runs to its end; what it returns
// is dropped (the attempt no longer holds the job, so Redis would refuse it anyway).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "spool/task_group.hpp"

namespace spool::queue::detail {

enum class phase : unsigned char { waiting, running, reporting, expired, handing_back, lost };

struct held_job {
  std::string id;      // "QUEUE/N"
  std::string number;  // "N"
  std::uint64_t attempt = 0;
  std::string entry;  // its stream entry (pending under this worker's consumer)
  int level = 1;      // which stream: 0 low, 1 normal, 2 high
  std::string task;
  std::string payload;
  std::string key;
  std::chrono::milliseconds limit{0};                      // per attempt; 0 = none
  std::atomic<std::chrono::steady_clock::rep> started{0};  // when the handler started
  std::atomic<phase> state{phase::waiting};
  // Gives the handler its cancellation token; cancel() fires it. It runs no task, so
  // destroying it never waits (the handler runs as a plain pool task).
  std::unique_ptr<spool::task_group> group;

  bool move(phase from, phase to) noexcept {
    return state.compare_exchange_strong(from, to, std::memory_order_acq_rel);
  }
  // Moves to `lost` from whatever phase; returns the phase it left.
  phase lose() noexcept { return state.exchange(phase::lost, std::memory_order_acq_rel); }
  void fire_token() noexcept {
    if (group) group->cancel();
  }
};

class held_jobs {
 public:
  // Adds a job. If a job of the same number is held (Redis gave this worker the same job
  // again, after a failover lost the record of its earlier claim), the earlier one is lost
  // and returned, for the caller to stop.
  std::shared_ptr<held_job> add(std::shared_ptr<held_job> job);
  // Removes the job, if the table still holds this very one.
  void remove(const held_job& job);
  [[nodiscard]] std::vector<std::shared_ptr<held_job>> snapshot() const;
  [[nodiscard]] std::vector<std::string> numbers() const;
  [[nodiscard]] std::size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<held_job>> jobs_;
};

}  // namespace spool::queue::detail
