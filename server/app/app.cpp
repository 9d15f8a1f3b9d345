#include "app/app.hpp"

#include <string_view>
#include <utility>

#include "app/guestbook.hpp"

namespace spoold {
namespace {

bool is_get_or_head(http::method m) { return m == http::method::get || m == http::method::head; }

http::response text(int status, std::string body, std::string_view content_type) {
  http::response resp;
  resp.status = status;
  resp.body = std::move(body);
  resp.add_header("Content-Type", content_type);
  resp.add_header("Cache-Control", "no-store");
  return resp;
}

http::response method_not_allowed(std::string_view allow) {
  http::response resp = http::error_response(405, "This resource does not support that method.");
  resp.add_header("Allow", allow);
  return resp;
}

http::response store_down(metrics& counters, const store::unavailable& e) {
  counters.store_error();
  http::response resp;
  resp.status = 503;
  resp.body = render_store_down_page(e.what());
  resp.add_header("Content-Type", "text/html; charset=utf-8");
  resp.add_header("Retry-After", "1");
  resp.add_header("Cache-Control", "no-store");
  return resp;
}

}  // namespace

app::app(static_files& files, store::store& store, metrics& counters, spool::pool& pool)
    : files_(files), store_(store), metrics_(counters), pool_(pool) {}

handled app::handle(const http::request& r) {
  handled out = route(r);
  if (r.verb == http::method::head) {
    // Whatever the route answered (errors and redirects included), a HEAD gets no body.
    out.response.head_only = true;
    if (out.blocking) {
      out.blocking = [job = std::move(out.blocking)]() {
        http::response resp = job();
        resp.head_only = true;
        return resp;
      };
    }
  }
  return out;
}

handled app::route(const http::request& r) {
  handled out;
  const bool head = r.verb == http::method::head;
  const std::string_view path = r.path;

  if (path == "/guestbook") {
    if (is_get_or_head(r.verb)) {
      out.blocking = [&st = store_, &counters = metrics_, head]() {
        try {
          guestbook_limits lim;
          http::response resp = text(200, render_guestbook_page(st.visit(lim.max_entries_shown)),
                                     "text/html; charset=utf-8");
          resp.head_only = head;
          return resp;
        } catch (const store::unavailable& e) {
          http::response resp = store_down(counters, e);
          resp.head_only = head;
          return resp;
        }
      };
      return out;
    }
    if (r.verb != http::method::post) {
      out.response = method_not_allowed("GET, HEAD, POST");
      return out;
    }
    const http::header* type = r.find("Content-Type");
    store::entry entry;
    guestbook_limits lim;
    form_error err = parse_guestbook_form(type ? type->value : std::string_view{}, r.body, lim,
                                          entry);
    if (err != form_error::none) {
      out.response = http::error_response(err == form_error::not_a_form ? 415 : 400,
                                          describe(err));
      return out;
    }
    out.blocking = [&st = store_, &counters = metrics_, e = std::move(entry)]() {
      try {
        st.add_entry(e);
        http::response resp;
        resp.status = 303;
        resp.add_header("Location", "/guestbook");
        resp.add_header("Cache-Control", "no-store");
        return resp;
      } catch (const store::unavailable& ex) {
        return store_down(counters, ex);
      }
    };
    return out;
  }

  if (path == "/metrics" || path == "/api/stats" || path == "/healthz") {
    if (!is_get_or_head(r.verb)) {
      out.response = method_not_allowed("GET, HEAD");
      return out;
    }
    if (path == "/healthz") {
      // ping() is a round trip to the store: it runs on the pool like every store call.
      out.blocking = [&st = store_, head]() {
        bool up = st.ping();
        // The server is healthy while it answers; static files do not need the store. The
        // body says whether the guestbook's store is reachable.
        http::response resp = text(200, up ? "ok\nstore: up\n" : "ok\nstore: down\n",
                                   "text/plain; charset=utf-8");
        resp.head_only = head;
        return resp;
      };
      return out;
    }
    const spool::stats pool_stats = pool_.statistics();
    out.response = path == "/metrics"
                       ? text(200, metrics_.prometheus(pool_stats),
                              "text/plain; version=0.0.4; charset=utf-8")
                       : text(200, metrics_.json(pool_stats), "application/json");
    out.response.head_only = head;
    return out;
  }

  if (path == "/dashboard") {
    // The page is a static file; this alias keeps the address short.
    http::request alias;
    alias.verb = r.verb;
    alias.path = "/dashboard.html";
    alias.headers = r.headers;
    alias.version_minor = r.version_minor;
    if (!is_get_or_head(r.verb)) {
      out.response = method_not_allowed("GET, HEAD");
      return out;
    }
    out.response = files_.serve(alias);
    return out;
  }

  if (!is_get_or_head(r.verb)) {
    out.response = method_not_allowed("GET, HEAD");
    return out;
  }
  out.response = files_.serve(r);
  return out;
}

}  // namespace spoold
