#include "app/app.hpp"

#include <chrono>
#include <cstdio>
#include <string_view>
#include <utility>

#include <spool/queue/admin.hpp>

#include "app/guestbook.hpp"
#include "http/form.hpp"
#include "report_limit.hpp"

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

// While the store is down every guestbook request fails the same way: stderr gets one line a
// second with the latest reason and how many calls failed since the line before.
report_limit store_failure_reports(std::chrono::seconds(1));

// The 503 for a store call that failed; the page says what is known of the request's fate.
http::response store_failed(metrics& counters, const store::unavailable& e, std::string_view node,
                            bool post_had_key = false) {
  counters.store_error();
  if (const std::uint64_t failed = store_failure_reports.occurred(); failed != 0) {
    std::fprintf(stderr, "spoold: store: %s (calls failed since the last report: %llu)\n", e.what(),
                 static_cast<unsigned long long>(failed));
  }
  store_trouble trouble;
  trouble.node = node;
  trouble.post_had_key = post_had_key;
  if (dynamic_cast<const store::outcome_unknown*>(&e) != nullptr) {
    trouble.what = store_trouble::kind::outcome_unknown;
  } else if (dynamic_cast<const store::no_primary*>(&e) != nullptr) {
    trouble.what = store_trouble::kind::no_primary;
  } else if (dynamic_cast<const store::busy*>(&e) != nullptr) {
    trouble.what = store_trouble::kind::busy;
  }
  http::response resp;
  resp.status = 503;
  resp.body = render_store_down_page(e.what(), trouble);
  resp.add_header("Content-Type", "text/html; charset=utf-8");
  resp.add_header("Retry-After", "1");
  resp.add_header("Cache-Control", "no-store");
  return resp;
}

}  // namespace

app::app(static_files& files, store::store& store, metrics& counters, spool::pool& pool,
         std::string node_name)
    : files_(files),
      store_(store),
      metrics_(counters),
      pool_(pool),
      node_(std::move(node_name)),
      draining_(make_shared_mapping<std::atomic<bool>>("mmap (draining flag)")) {}

void app::start_draining() noexcept { draining_->store(true, std::memory_order_relaxed); }

bool app::draining() const noexcept { return draining_->load(std::memory_order_relaxed); }

handled app::handle(const http::request& r) {
  handled out = route(r);
  const bool head = r.verb == http::method::head;
  // Whatever the route answered (errors and redirects included), a HEAD gets no body, and
  // every answer names the node.
  const auto finish = [head, node = std::string_view(node_)](http::response& resp) {
    if (head) resp.head_only = true;
    if (!node.empty()) resp.add_header("Spoold-Node", node);
  };
  finish(out.response);
  if (out.blocking && (head || !node_.empty())) {
    out.blocking = [job = std::move(out.blocking), finish]() {
      http::response resp = job();
      finish(resp);
      return resp;
    };
  }
  return out;
}

handled app::guestbook(const http::request& r) {
  handled out;
  const bool head = r.verb == http::method::head;
  if (is_get_or_head(r.verb)) {
    out.blocking = [&st = store_, &counters = metrics_, node = std::string_view(node_), head]() {
      try {
        guestbook_limits lim;
        const std::string key = new_post_key();
        const store::page page = st.visit(lim.max_entries_shown);
        const std::string_view notice =
            page.from_replica ? "The guestbook's primary store cannot be reached right now, so "
                                "this page was read from a replica: the newest entries may be "
                                "missing, and this visit was not counted."
                              : "";
        http::response resp = text(200, render_guestbook_page(page, notice, lim, {node, key}),
                                   "text/html; charset=utf-8");
        resp.head_only = head;
        return resp;
      } catch (const store::unavailable& e) {
        http::response resp = store_failed(counters, e, node);
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
  guestbook_post post;
  guestbook_limits lim;
  form_error err = parse_guestbook_form(type ? type->value : std::string_view{}, r.body, lim, post);
  if (err != form_error::none) {
    out.response = http::error_response(err == form_error::not_a_form ? 415 : 400, describe(err));
    return out;
  }
  out.blocking = [&st = store_, &counters = metrics_, node = std::string_view(node_),
                  p = std::move(post)]() {
    try {
      // A replay is answered as a new post is: the entry is there (once), and durable.
      if (st.add_entry(p.entry, p.key) == store::added::replayed) counters.post_replayed();
      http::response resp;
      resp.status = 303;
      resp.add_header("Location", "/guestbook");
      resp.add_header("Cache-Control", "no-store");
      return resp;
    } catch (const store::unavailable& ex) {
      return store_failed(counters, ex, node, !p.key.empty());
    }
  };
  return out;
}

handled app::healthz(bool head, bool ask_store) {
  handled out;
  if (draining()) {
    // Answered at once: the balancer needs to see this, whatever the store does.
    std::string body = "draining\n";
    if (!node_.empty()) body += "node: " + node_ + "\n";
    out.response = text(503, std::move(body), "text/plain; charset=utf-8");
    out.response.head_only = head;
    return out;
  }
  if (!ask_store) {
    // A balancer's check of the node alone (static files need no store): never waits on one.
    std::string body = "ok\n";
    if (!node_.empty()) body += "node: " + node_ + "\n";
    out.response = text(200, std::move(body), "text/plain; charset=utf-8");
    out.response.head_only = head;
    return out;
  }
  // check() is a round trip to the store: it runs on the pool like every store call.
  out.blocking = [&st = store_, node = std::string_view(node_), head]() {
    const store::health h = st.check();
    // The server is healthy while it answers; static files do not need the store. The body
    // says whether the guestbook's store is reachable, and where it is or why not.
    std::string body = "ok\nstore: ";
    body += h.up ? "up" : "down";
    if (!h.detail.empty()) body += " (" + h.detail + ")";
    body += "\n";
    if (!node.empty()) body += "node: " + std::string(node) + "\n";
    http::response resp = text(200, std::move(body), "text/plain; charset=utf-8");
    resp.head_only = head;
    return resp;
  };
  return out;
}

// /api/queues and /api/queue?name=Q: JSON read from Redis, on the pool.
handled app::queue_api(const http::request& r, bool head) {
  handled out;
  if (queues_ == nullptr) {
    out.response = http::error_response(404,
                                        "No queue store: start spoold with --queue-store "
                                        "URL, or with a Redis --store.");
    return out;
  }
  std::string name;
  if (r.path == "/api/queue") {
    const auto fields = http::parse_form(r.query);
    if (fields) {
      for (const auto& [field, value] : *fields) {
        if (field == "name") name = value;
      }
    }
    if (name.empty()) {
      out.response = http::error_response(400, "Expected /api/queue?name=QUEUE.");
      return out;
    }
  }
  out.blocking = [&admin = *queues_, name, head]() {
    http::response resp;
    try {
      if (name.empty()) {
        std::string list = "{\"queues\":[";
        for (const std::string& q : admin.queues()) {
          list += (list.size() > 11 ? ",\"" : "\"") + q + "\"";
        }
        resp = text(200, list + "]}", "application/json");
      } else {
        resp = text(200, spool::queue::to_json(admin.stats(name)), "application/json");
      }
    } catch (const spool::queue::error& e) {
      const int status = e.value() == spool::queue::errc::invalid_argument ? 400 : 503;
      resp = http::error_response(status, e.what());
      resp.add_header("Cache-Control", "no-store");
    }
    resp.head_only = head;
    return resp;
  };
  return out;
}

handled app::route(const http::request& r) {
  handled out;
  const bool head = r.verb == http::method::head;
  const std::string_view path = r.path;

  if (path == "/guestbook") return guestbook(r);

  if (path == "/metrics" || path == "/api/stats" || path == "/healthz" || path == "/healthz/node") {
    if (!is_get_or_head(r.verb)) {
      out.response = method_not_allowed("GET, HEAD");
      return out;
    }
    if (path == "/healthz" || path == "/healthz/node") return healthz(head, path == "/healthz");
    const spool::stats pool_stats = pool_.statistics();
    out.response = path == "/metrics" ? text(200, metrics_.prometheus(pool_stats),
                                             "text/plain; version=0.0.4; charset=utf-8")
                                      : text(200, metrics_.json(pool_stats), "application/json");
    out.response.head_only = head;
    return out;
  }

  if (path == "/api/queues" || path == "/api/queue") {
    if (!is_get_or_head(r.verb)) {
      out.response = method_not_allowed("GET, HEAD");
      return out;
    }
    return queue_api(r, head);
  }

  if (path == "/dashboard" || path == "/queue") {
    // The pages are static files; these aliases keep the addresses short.
    http::request alias;
    alias.verb = r.verb;
    alias.path = path == "/queue" ? "/queue.html" : "/dashboard.html";
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
