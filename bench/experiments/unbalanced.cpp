// unbalanced: Eff_ThreadPool's work-stealing scenario, scaled down. 200 tasks, every tenth
// spins 10 ms and the rest 0.1 ms; wall time against the ideal (total work / threads).
#include <chrono>
#include <cstdint>
#include <vector>

#include "experiments/experiments.hpp"
#include "peers/all_peers.hpp"
#include "workload/spin.hpp"
#include "workload/task_tally.hpp"

namespace bench {

namespace {

struct shape {
  std::uint64_t tasks;
  std::chrono::nanoseconds long_task, short_task;

  std::chrono::nanoseconds work(std::uint64_t i) const {
    return i % 10 == 0 ? long_task : short_task;
  }
  double total_s() const {
    double s = 0;
    for (std::uint64_t i = 0; i < tasks; ++i) s += std::chrono::duration<double>(work(i)).count();
    return s;
  }
};

// from_task: the tasks are posted by one task running on the pool, so they start out on one
// worker and only stealing (not a shared queue) can spread them.
template <class P>
sample run_once(P& peer, const shape& sh, unsigned threads, bool from_task) {
  task_tally::reset();
  auto post_all = [&] {
    for (std::uint64_t i = 0; i < sh.tasks; ++i)
      peer.post([d = sh.work(i)] {
        spin_for(d);
        task_tally::hit();
      });
  };
  const auto t0 = steady::now();
  peer.run_and_wait([&] {
    if (from_task)
      peer.post(post_all);
    else
      post_all();
  });
  const double wall = seconds_since(t0);
  check(task_tally::total() == sh.tasks, std::string(P::name) + ": unbalanced lost tasks");
  // Tasks spin on the clock, so a preempted task still ends on time: total / threads is
  // reachable even with more threads than cores.
  const double ideal = sh.total_s() / threads;
  return {ideal / wall, {{"wall_ms", wall * 1e3}, {"ideal_ms", ideal * 1e3}}};
}

void run(const options& o, results& out) {
  using ms = std::chrono::duration<double, std::milli>;
  const shape sh{o.tasks ? *o.tasks : o.by_size<std::uint64_t>(200, 200, 20),
                 std::chrono::duration_cast<std::chrono::nanoseconds>(
                     ms(o.long_ms ? *o.long_ms : o.by_size(10.0, 10.0, 2.0))),
                 std::chrono::duration_cast<std::chrono::nanoseconds>(
                     ms(o.short_ms ? *o.short_ms : o.by_size(0.1, 0.1, 0.05)))};
  check(sh.tasks >= 1, "unbalanced: --tasks must be at least 1");
  const metric m{"efficiency", "ideal/wall", true};
  for (unsigned threads : o.threads) {
    std::vector<contender> cs;
    for (bool from_task : {false, true}) {
      const std::string variant = std::string(from_task ? "from one task " : "from main ") +
                                  std::to_string(sh.tasks) + " tasks";
      append_peers(o, cs, [&]<class P>(std::type_identity<P>) {
        return contender{variant, std::string(P::name), {}, fresh_run<P>(threads, [=](P& p) {
                           return run_once(p, sh, threads, from_task);
                         })};
      });
    }
    out.add(measure_point("unbalanced", std::to_string(sh.tasks) + " tasks", threads, m,
                          std::move(cs), o.repeat));
  }
}

}  // namespace

const experiment& unbalanced_experiment() {
  static const experiment e{
      "unbalanced",
      "Work stealing: 200 tasks, every tenth spins 10 ms, the rest 0.1 ms; wall against ideal.",
      "Tasks busy-spin on steady_clock. Ideal = total work / threads; efficiency = ideal / wall\n"
      "(1.0 is perfect). Two variants: all tasks posted from the main thread, and all posted\n"
      "from inside one task (so they start on one worker and stealing must balance them).\n"
      "\n"
      "options:\n"
      "  --tasks K       tasks (default 200; --tiny 20); every tenth is long\n"
      "  --long-ms MS    a long task's spin (default 10; --tiny 2)\n"
      "  --short-ms MS   a short task's spin (default 0.1; --tiny 0.05)",
      {"--tasks", "--long-ms", "--short-ms"},
      run};
  return e;
}

}  // namespace bench
