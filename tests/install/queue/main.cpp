// Installed-package smoke test of libspool_queue: its headers compile outside the source tree,
// and its calls answer at the edges without a Redis (a malformed URL, nothing listening).
#include <spool/queue.hpp>

#include <cstdio>
#include <string>

int main() {
  try {
    spool::queue::admin bad("redis://");
    std::fprintf(stderr, "queue consumer: a malformed URL was accepted\n");
    return 1;
  } catch (const spool::queue::error& e) {
    if (e.code() != spool::queue::errc::invalid_argument) return 1;
  }
  spool::queue::producer p("redis://127.0.0.1:1");
  try {
    p.submit("q", "t", "payload");
    std::fprintf(stderr, "queue consumer: a submission to nothing was acknowledged\n");
    return 1;
  } catch (const spool::queue::error& e) {
    if (e.code() != spool::queue::errc::unavailable) {
      std::fprintf(stderr, "queue consumer: unexpected error: %s\n", e.what());
      return 1;
    }
  }
  spool::queue::worker_options o;
  o.queue = "q";
  o.threads = 1;
  spool::queue::worker w("redis://127.0.0.1:1", o);
  w.handle("t",
           [](const spool::queue::job_context&, std::string_view s) { return std::string(s); });
  std::puts("queue consumer: ok");
  return 0;
}
