// spool-resume-where: choosing where each step runs.
//  - then(pool, f): a step that reads runs on an "io" pool, the step that computes on a
//    "compute" pool, the step that formats back on "io"; spool::this_pool() tells each step
//    where it is.
//  - then(priority::high, f): a step that must not wait behind queued work.
//  - then_inline(f): a step too small for a trip through a queue runs on the completing thread.
//  - co_await: a coroutine on "compute" awaits a future of "io" and resumes on "compute".
//
//   spool-resume-where
#include <spool/coro.hpp>
#include <spool/spool.hpp>

#include <cstdio>
#include <string>

namespace {

spool::pool* io_pool = nullptr;
spool::pool* compute_pool = nullptr;

const char* where() {
  spool::pool* p = spool::this_pool();
  return p == io_pool ? "io" : p == compute_pool ? "compute" : "outside";
}

spool::task<std::string> summarise(spool::future<int> reading) {
  const int v = co_await std::move(reading);  // the future belongs to io; we resume on compute
  co_return std::string("summary of ") + std::to_string(v) + " made on " + where();
}

}  // namespace

int main() {
  spool::pool io{spool::config{.threads = 1, .name = "io"}};
  spool::pool compute{spool::config{.threads = 2, .name = "compute"}};
  io_pool = &io;
  compute_pool = &compute;
  int status = 0;

  auto page = io.submit([] {
                  std::printf("read on %s\n", where());
                  return 20;
                })
                  .then(compute,
                        [](int raw) {
                          std::printf("compute on %s\n", where());
                          return raw * 2 + 2;
                        })
                  .then(io, [](int v) {
                    std::printf("format on %s\n", where());
                    return "<p>" + std::to_string(v) + "</p>";
                  });
  const std::string html = page.get();
  status |= html == "<p>42</p>" ? 0 : 1;

  auto urgent =
      compute.submit([] { return 1; }).then(spool::priority::high, [](int x) { return x + 1; });
  status |= urgent.get() == 2 ? 0 : 1;

  spool::promise<int> signal(io);
  auto quick = signal.get_future().then_inline([](int x) {
    std::printf("inline step on %s (the thread that set the promise)\n", where());
    return x;
  });
  signal.set_value(5);
  status |= quick.get() == 5 ? 0 : 1;

  const std::string s = spool::start(compute, summarise(io.submit([] { return 9; }))).get();
  std::printf("%s\n", s.c_str());
  status |= s == "summary of 9 made on compute" ? 0 : 1;
  std::printf("html: %s\n", html.c_str());
  return status;
}
