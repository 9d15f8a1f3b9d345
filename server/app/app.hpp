// The application: routes a parsed request to static files, the guestbook, /metrics,
// /healthz, /api/stats and the dashboard. Every server model calls this one object, so the
// routes, limits and answers are the same whatever the architecture.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include <spool/spool.hpp>

#include "app/metrics.hpp"
#include "app/static_files.hpp"
#include "http/request.hpp"
#include "http/response.hpp"
#include "shared_mapping.hpp"
#include "store/store.hpp"

namespace spool::queue {
class admin;
}

namespace spoold {

// What handle() decided. Either `response` is the answer, or `blocking` is set: a job that may
// block (a store call) and returns the answer. It owns copies of whatever it needs from the
// request, so the connection's buffer may change meanwhile. The event-loop model runs it on the
// pool; thread-per-connection models may run it inline.
struct handled {
  http::response response;
  std::function<http::response()> blocking;
};

class app {
 public:
  // `node_name` ("" for none) names this server in a fleet: every answer the app makes carries
  // it in a Spoold-Node header, and the guestbook's pages show it.
  app(static_files& files, store::store& store, metrics& counters, spool::pool& pool,
      std::string node_name = {});

  // From now on /healthz and /healthz/node answer 503 "draining", so that a load balancer's
  // health check takes this server out of rotation, while every other route is served as
  // before. Seen by every process of a forking model, forked before or after (the flag is in
  // shared memory).
  void start_draining() noexcept;
  [[nodiscard]] bool draining() const noexcept;

  // The task queues of this Redis (libspool_queue) are shown at /queue; without it,
  // /api/queue* answer 404 (and the page says so). Call before serving; `queues` must outlive
  // the app.
  void show_queues(spool::queue::admin& queues) noexcept { queues_ = &queues; }

  // Never blocks. Routes:
  //   GET|HEAD /healthz      blocking: 200 "ok\n" (store state in the body: "store: up
  //                          (...)" or "store: down (why)"); 503 "draining\n" after
  //                          start_draining()
  //   GET|HEAD /healthz/node  the same without asking the store, answered at once
  //   GET|HEAD /metrics      Prometheus text
  //   GET|HEAD /api/stats    JSON for the dashboard
  //   GET|HEAD /queue        the queue page (queue.html); /api/queues: the queues' names,
  //                          /api/queue?name=Q: Q's figures (blocking: a round trip to Redis;
  //                          404 without show_queues, 400 for a bad name, 503 if Redis is down)
  //   GET|HEAD /guestbook    blocking: visit() -> page (503 if the store is unavailable)
  //   POST /guestbook        blocking: add_entry() -> 303 to /guestbook (400 for empty or
  //                          too long fields or a bad post key, 415 for a body that is not a
  //                          form, 503 if down or if the post's outcome is unknown)
  //   other methods on these routes: 405 with Allow
  //   GET|HEAD anything else: static files; other methods: 405 with "Allow: GET, HEAD"
  handled handle(const http::request& r);

 private:
  handled route(const http::request& r);
  handled guestbook(const http::request& r);
  // /healthz, and /healthz/node (`ask_store` false).
  handled healthz(bool head, bool ask_store);
  handled queue_api(const http::request& r, bool head);

  static_files& files_;
  store::store& store_;
  metrics& metrics_;
  spool::pool& pool_;
  std::string node_;
  shared_mapping<std::atomic<bool>> draining_;
  spool::queue::admin* queues_ = nullptr;
};

}  // namespace spoold
