#include "models/serve_connection.hpp"

#include <poll.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <limits>

#include "event/poll_set.hpp"
#include "limits/worker_pressure.hpp"

namespace spoold {

void serve_connection(server_context& ctx, const stop_signal& stop, accepted&& a,
                      serve_options opts) {
  inline_driver driver(stop);
  auto now = steady_clock::now();
  connection c(ctx, driver, std::move(a), now);
  bool stop_seen = false;
  // One per thread, so that a thread serving connection after connection (prethreaded, queue)
  // allocates its set once, not per connection. A thread serves one connection at a time.
  thread_local poll_set set;
  while (!c.closed()) {
    if (c.has_ready_work()) c.serve(std::numeric_limits<int>::max(), now);
    if (c.closed()) break;
    // Every turn goes through poll(), without waiting if there is more to serve, so that the
    // stop and the deadlines are seen whatever the connection does.
    const bool ready = c.has_ready_work();
    steady_clock::time_point wake = c.deadline();
    if (opts.pressure != nullptr && !ready) {
      if (const auto since = c.waiting_on_client_since()) {
        const auto shed_at = *since + shed_after;
        if (now >= shed_at && opts.pressure->on()) {
          c.shed(now);
          break;
        }
        wake = std::min(wake, std::max(shed_at, now + pressure_check_interval));
      }
    }
    const short interest = c.interest();
    if (opts.flush_log_when_idle && ctx.log && interest == POLLIN && !ready) ctx.log->flush();
    // Once the stop is seen its descriptor stays readable: leave it out of the set.
    set.clear();
    const std::size_t conn_index = set.add(c.fd(), interest);
    const std::size_t stop_index = stop_seen ? 0 : set.add(stop.fd(), POLLIN);  // 0: unused
    if (!set.wait(ready ? now : wake, now)) {
      std::perror("spoold: poll");
      break;  // the connection's destructor closes the socket
    }
    now = steady_clock::now();
    if (!stop_seen && set.revents(stop_index) != 0) {
      stop_seen = true;
      c.on_stop(now, stop.raised_at() + ctx.opts.grace);
    }
    if (const short revents = set.revents(conn_index); revents != 0) c.on_poll(revents, now);
    c.on_deadline(now);
  }
  if (opts.flush_log_when_idle && ctx.log) ctx.log->flush();
}

}  // namespace spoold
