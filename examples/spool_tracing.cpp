// spool-tracing: a small profiler on the task hooks. Tasks are named with spool::named; the
// hooks (config::on_task_start/on_task_finish) keep, per name, how many ran, how many threw,
// and their total time, measured on the thread that ran each task. Unnamed tasks are counted
// under "(unnamed)". Without hooks a pool pays nothing for them.
//
//   spool-tracing [--tasks N]
#include <spool/spool.hpp>
#include <spool/task_group.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

class profiler {
 public:
  void start() { started_ = std::chrono::steady_clock::now(); }
  void finish(const spool::task_info& t, spool::task_end how) {
    const auto took = std::chrono::steady_clock::now() - started_;
    std::lock_guard lock(mu_);
    row& r = rows_[t.name != nullptr ? t.name : "(unnamed)"];
    ++r.runs;
    if (how == spool::task_end::failed) ++r.failures;
    r.time += took;
  }
  void print() {
    std::lock_guard lock(mu_);
    std::printf("%-12s %6s %8s %12s\n", "task", "runs", "threw", "total us");
    for (const auto& [name, r] : rows_) {
      std::printf("%-12s %6ld %8ld %12.1f\n", name.c_str(), r.runs, r.failures,
                  std::chrono::duration<double, std::micro>(r.time).count());
    }
  }
  long runs(const std::string& name) {
    std::lock_guard lock(mu_);
    return rows_[name].runs;
  }

 private:
  struct row {
    long runs = 0;
    long failures = 0;
    std::chrono::steady_clock::duration time{};
  };
  // The start time of the task this thread runs; nested starts (a waiting task helping) are
  // not told apart here, which is enough for this table.
  static thread_local std::chrono::steady_clock::time_point started_;
  std::mutex mu_;
  std::map<std::string, row> rows_;
};
thread_local std::chrono::steady_clock::time_point profiler::started_;

}  // namespace

int main(int argc, char** argv) {
  long tasks = 1000;
  if (argc == 3 && std::strcmp(argv[1], "--tasks") == 0) tasks = std::atol(argv[2]);
  if (tasks <= 0) {
    std::fprintf(stderr, "usage: %s [--tasks N]\n", argv[0]);
    return 2;
  }
  profiler prof;
  spool::config cfg{.threads = 2, .name = "traced"};
  cfg.on_task_start = [&prof](const spool::task_info&) { prof.start(); };
  cfg.on_task_finish = [&prof](const spool::task_info& t, spool::task_end how) {
    prof.finish(t, how);
  };
  cfg.on_exception = [](std::exception_ptr) {};  // the table counts them
  {
    spool::pool pool{cfg};
    std::vector<spool::future<long>> sums;
    for (long i = 0; i < tasks; ++i) {
      sums.push_back(pool.submit(spool::named("sum", [i] {
        long s = 0;
        for (long k = 0; k <= i; ++k) s += k;
        return s;
      })));
    }
    for (long i = 0; i < tasks / 10; ++i) {
      pool.post(spool::named("flaky", [i] {
        if (i % 3 == 0) throw std::runtime_error("flaky");
      }));
    }
    spool::task_group group(pool);
    for (int i = 0; i < 10; ++i) group.run(spool::named("group", [] {}));
    group.wait();
    auto report =
        pool.submit([] { return 1; }).then(spool::named("report", [](int x) { return x; }));
    report.get();
    for (auto& s : sums) s.get();
    pool.wait_idle();
  }
  prof.print();
  return prof.runs("sum") == tasks && prof.runs("group") == 10 && prof.runs("report") == 1 ? 0 : 1;
}
