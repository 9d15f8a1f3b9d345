// The application: routes a parsed request to static files, the guestbook, /metrics,
// /healthz, /api/stats and the dashboard. Every server model calls this one object, so the
// routes, limits and answers are the same whatever the architecture.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <spool/spool.hpp>

#include "app/metrics.hpp"
#include "app/static_files.hpp"
#include "http/request.hpp"
#include "http/response.hpp"
#include "store/store.hpp"

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
  app(static_files& files, store::store& store, metrics& counters, spool::pool& pool);

  // Never blocks. Routes:
  //   GET|HEAD /healthz      200 "ok\n" (store state in the body: "store: up|down")
  //   GET|HEAD /metrics      Prometheus text
  //   GET|HEAD /api/stats    JSON for the dashboard
  //   GET|HEAD /guestbook    blocking: visit() -> page (503 if the store is unavailable)
  //   POST /guestbook        blocking: add_entry() -> 303 to /guestbook (400 for empty or
  //                          too long fields, 415 for a body that is not a form, 503 if down)
  //   other methods on these routes: 405 with Allow
  //   GET|HEAD anything else: static files; other methods: 405 with "Allow: GET, HEAD"
  handled handle(const http::request& r);

 private:
  handled route(const http::request& r);

  static_files& files_;
  store::store& store_;
  metrics& metrics_;
  spool::pool& pool_;
};

}  // namespace spoold
