#include "options.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <thread>

#include "net.hpp"
#include "store/store.hpp"

namespace spoold {
namespace {

constexpr std::string_view help_text =
    "usage: spoold [options]   (each option also as SPOOLD_<NAME>, e.g. SPOOLD_PORT=9000)\n"
    "  --port N              TCP port, 0 = any free one (default 8080)\n"
    "  --bind ADDR           IPv4 or IPv6 address: 127.0.0.1 (default), 0.0.0.0, ::1,\n"
    "                        [::1], :: (dual-stack: IPv4 clients too)\n"
    "  --root DIR            static files (default: the demo site)\n"
    "  --threads MIN[:MAX]   pool threads for blocking work (default 2:64)\n"
    "  --loops N             event loops (default: one per core)\n"
    "  --loop-slice US       an event loop that has held its core this many microseconds\n"
    "                        without a context switch yields it to other runnable threads\n"
    "                        (model epoll; default 100; 0: never; at most 1000000)\n"
    "  --store SPEC          sqlite:PATH, redis://HOST[:PORT] or\n"
    "                        redis-sentinel://HOST[:PORT][,HOST[:PORT]...]/MASTER\n"
    "                        (default sqlite:./spoold.db)\n"
    "  --queue-store URL     the Redis whose task queues /queue shows, redis:// or\n"
    "                        redis-sentinel:// (default: --store, if it is Redis)\n"
    "  --store-connections N  Redis: connections shared by all threads' calls (a call\n"
    "                        waits up to 1 s for one); SQLite: connections of exited threads\n"
    "                        kept for new ones (default 64; Redis 1 to 100000)\n"
    "  --store-replicas K    acknowledge a post once K Redis replicas have it (default 0)\n"
    "  --store-replicas-timeout S  how long a post waits for them; then 503 (default 1)\n"
    "  --model NAME          server architecture: epoll (default), iterative, forking,\n"
    "                        preforked, threaded, prethreaded, queue, poll\n"
    "  --workers N           processes (preforked, default 2 per core) or threads\n"
    "                        (prethreaded, default 100)\n"
    "  --accept-lock on|off  prethreaded: one thread at a time in accept() (default on)\n"
    "  --access-log FILE|-   Common Log Format access log (default off)\n"
    "  --max-connections N   open connections; past it: 503 (default 10000)\n"
    "  --max-connections-per-client N  open connections per client address; past\n"
    "                        it: 429 (default 0: no limit)\n"
    "  --rate-limit R        requests per client address: N or N/s per second, N/m per\n"
    "                        minute; past it: 429\n"
    "                        (default 0: no limit)\n"
    "  --rate-burst B        requests a client may send at once (default: R)\n"
    "  --trust ADDR[/PREFIX][,...]  peers exempt from the limits (a load balancer); their\n"
    "                        requests are limited by X-Forwarded-For's last address\n"
    "  --proxy-protocol      --trust peers start each connection with a PROXY header (v1\n"
    "                        or v2) naming the client; X-Forwarded-For is then ignored\n"
    "  --header-timeout S    seconds to send a request head (default 10)\n"
    "  --idle-timeout S      seconds a keep-alive connection may idle (default 15)\n"
    "  --trust-idle-timeout S  the same for connections from --trust peers; 0: until\n"
    "                        the peer closes it (default: --idle-timeout)\n"
    "  --write-timeout S     seconds a client may read nothing (default 30)\n"
    "  --grace S             seconds in-flight requests get at shutdown (default 10)\n"
    "  --drain-delay S       on SIGTERM, seconds /healthz fails before shutdown (default 0)\n"
    "  --node-name NAME      this server's name in a fleet (header, pages, metrics)\n"
    "  --max-body BYTES      largest request body (default 65536)\n"
    "  --tls-cert FILE       TLS certificate chain (PEM); reloaded on SIGHUP\n"
    "  --tls-key FILE        its private key (PEM); reloaded on SIGHUP\n"
    "  --tls-port N          serve TLS on port N beside plain HTTP on --port (models\n"
    "                        epoll and poll), 0 = any free one\n"
    "  --tls-only on|off     serve TLS instead of plain HTTP on --port (default off)\n"
    "  --help, --version\n";

bool parse_unsigned(std::string_view text, std::uint64_t max, std::uint64_t& out) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty() || value > max) {
    return false;
  }
  out = value;
  return true;
}

// Seconds, possibly fractional ("0.5"), to milliseconds.
bool parse_seconds(std::string_view text, std::chrono::milliseconds& out) {
  std::uint64_t whole = 0;
  std::uint64_t millis = 0;
  auto dot = text.find('.');
  if (!parse_unsigned(text.substr(0, dot), 86'400 * 365, whole)) return false;
  if (dot != std::string_view::npos) {
    auto frac = text.substr(dot + 1);
    if (frac.empty() || frac.size() > 3 || !parse_unsigned(frac, 999, millis)) return false;
    for (auto n = frac.size(); n < 3; ++n) millis *= 10;
  }
  out = std::chrono::milliseconds(whole * 1000 + millis);
  return true;
}

// Applies one setting; false with `error` set when the value is bad or the name unknown.
bool apply(options& o, std::string_view name, std::string_view value, std::string& error) {
  std::uint64_t n = 0;
  auto bad = [&] {
    error = "bad value for --" + std::string(name) + ": '" + std::string(value) + "'";
    return false;
  };
  if (name == "port") {
    if (!parse_unsigned(value, 65535, n)) return bad();
    o.port = static_cast<std::uint16_t>(n);
  } else if (name == "bind") {
    if (!is_bind_address(value)) {
      error = "bad value for --bind: '" + std::string(value) +
              "' (an IPv4 or IPv6 address: 127.0.0.1, 0.0.0.0, ::1, [::1], ::)";
      return false;
    }
    o.bind = value;
  } else if (name == "root") {
    if (value.empty()) return bad();
    o.root = value;
  } else if (name == "threads") {
    auto colon = value.find(':');
    std::uint64_t lo = 0;
    std::uint64_t hi = 0;
    if (!parse_unsigned(value.substr(0, colon), 4096, lo) || lo == 0) return bad();
    hi = lo;
    if (colon != std::string_view::npos &&
        (!parse_unsigned(value.substr(colon + 1), 4096, hi) || hi < lo)) {
      return bad();
    }
    o.min_threads = static_cast<unsigned>(lo);
    o.max_threads = static_cast<unsigned>(hi);
  } else if (name == "loops") {
    if (!parse_unsigned(value, 1024, n) || n == 0) return bad();
    o.loops = static_cast<unsigned>(n);
  } else if (name == "loop-slice") {
    if (!parse_unsigned(value, 1'000'000, n)) return bad();
    o.loop_slice = std::chrono::microseconds(n);
  } else if (name == "store") {
    if (value.empty()) return bad();
    o.store = value;
  } else if (name == "model") {
    if (value.empty()) return bad();
    o.model = value;
  } else if (name == "workers") {
    if (!parse_unsigned(value, 100'000, n) || n == 0) return bad();
    o.workers = static_cast<unsigned>(n);
  } else if (name == "accept-lock") {
    if (value == "on") {
      o.accept_lock = true;
    } else if (value == "off") {
      o.accept_lock = false;
    } else {
      return bad();
    }
  } else if (name == "access-log") {
    o.access_log = value;
  } else if (name == "max-connections") {
    if (!parse_unsigned(value, 10'000'000, n) || n == 0) return bad();
    o.max_connections = n;
  } else if (name == "max-connections-per-client") {
    if (!parse_unsigned(value, 10'000'000, n)) return bad();
    o.max_connections_per_client = n;
  } else if (name == "rate-limit") {
    // N, N/s (per second) or N/m (per minute).
    double per_second = 1;
    auto slash = value.find('/');
    if (slash != std::string_view::npos) {
      const auto unit = value.substr(slash + 1);
      if (unit == "m") {
        per_second = 1.0 / 60;
      } else if (unit != "s") {
        return bad();
      }
      value = value.substr(0, slash);
    }
    if (!parse_unsigned(value, 1'000'000, n)) return bad();
    o.rate_limit = static_cast<double>(n) * per_second;
  } else if (name == "rate-burst") {
    if (!parse_unsigned(value, 1'000'000, n) || n == 0) return bad();
    o.rate_burst = static_cast<std::uint32_t>(n);
  } else if (name == "trust") {
    // Repeatable, and each value a comma-separated list: the ranges add up.
    for (std::size_t start = 0; start <= value.size();) {
      auto comma = value.find(',', start);
      if (comma == std::string_view::npos) comma = value.size();
      auto range = parse_ip_range(value.substr(start, comma - start));
      if (!range) {
        error = "bad value for --trust: '" + std::string(value) +
                "' (ADDR or ADDR/PREFIX, IPv4 or IPv6, comma-separated)";
        return false;
      }
      o.trust.push_back(*range);
      start = comma + 1;
    }
  } else if (name == "proxy-protocol") {
    if (value == "on" || value == "1") {
      o.proxy_protocol = true;
    } else if (value == "off" || value == "0") {
      o.proxy_protocol = false;
    } else {
      return bad();
    }
  } else if (name == "header-timeout") {
    if (!parse_seconds(value, o.header_timeout) || o.header_timeout.count() == 0) return bad();
  } else if (name == "idle-timeout") {
    if (!parse_seconds(value, o.idle_timeout) || o.idle_timeout.count() == 0) return bad();
  } else if (name == "trust-idle-timeout") {
    std::chrono::milliseconds t{};
    if (!parse_seconds(value, t)) return bad();
    o.trust_idle_timeout = t;
  } else if (name == "write-timeout") {
    if (!parse_seconds(value, o.write_timeout) || o.write_timeout.count() == 0) return bad();
  } else if (name == "grace") {
    if (!parse_seconds(value, o.grace)) return bad();
  } else if (name == "drain-delay") {
    if (!parse_seconds(value, o.drain_delay)) return bad();
  } else if (name == "queue-store") {
    if (!store::is_redis_spec(value)) {
      error = "bad value for --queue-store: '" + std::string(value) +
              "' (redis://HOST[:PORT] or redis-sentinel://HOST[:PORT][,HOST[:PORT]...]/MASTER)";
      return false;
    }
    o.queue_store = value;
  } else if (name == "node-name") {
    // It goes unescaped into a header, a Prometheus label and JSON.
    const auto allowed = [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '-' || c == '_' || c == '.';
    };
    if (value.empty() || value.size() > 64 || !std::all_of(value.begin(), value.end(), allowed)) {
      error = "bad value for --node-name: '" + std::string(value) +
              "' (1 to 64 letters, digits, '-', '_' or '.')";
      return false;
    }
    o.node_name = value;
  } else if (name == "store-connections") {
    if (!parse_unsigned(value, 100'000, n)) return bad();
    o.store_connections = static_cast<std::size_t>(n);
  } else if (name == "store-replicas") {
    if (!parse_unsigned(value, 100, n)) return bad();
    o.store_replicas = static_cast<unsigned>(n);
  } else if (name == "store-replicas-timeout") {
    if (!parse_seconds(value, o.store_replicas_timeout) || o.store_replicas_timeout.count() == 0) {
      return bad();
    }
  } else if (name == "max-body") {
    if (!parse_unsigned(value, std::uint64_t{1} << 40, n)) return bad();
    o.limits.max_body = n;
  } else if (name == "tls-cert") {
    if (value.empty()) return bad();
    o.tls_cert = value;
  } else if (name == "tls-key") {
    if (value.empty()) return bad();
    o.tls_key = value;
  } else if (name == "tls-port") {
    if (!parse_unsigned(value, 65535, n)) return bad();
    o.tls_port = static_cast<std::uint16_t>(n);
  } else if (name == "tls-only") {
    if (value == "on") {
      o.tls_only = true;
    } else if (value == "off") {
      o.tls_only = false;
    } else {
      return bad();
    }
  } else {
    error = "unknown option --" + std::string(name);
    return false;
  }
  return true;
}

constexpr std::string_view option_names[] = {"port",
                                             "bind",
                                             "root",
                                             "threads",
                                             "loops",
                                             "loop-slice",
                                             "store",
                                             "model",
                                             "access-log",
                                             "max-connections",
                                             "header-timeout",
                                             "idle-timeout",
                                             "write-timeout",
                                             "grace",
                                             "max-body",
                                             "workers",
                                             "accept-lock",
                                             "drain-delay",
                                             "node-name",
                                             "store-connections",
                                             "store-replicas",
                                             "store-replicas-timeout",
                                             "max-connections-per-client",
                                             "rate-limit",
                                             "rate-burst",
                                             "trust",
                                             "proxy-protocol",
                                             "tls-cert",
                                             "tls-key",
                                             "tls-port",
                                             "tls-only",
                                             "queue-store",
                                             "trust-idle-timeout"};

std::string env_name(std::string_view option) {
  std::string env = "SPOOLD_";
  for (char c : option)
    env += c == '-' ? '_' : static_cast<char>(c - ('a' <= c && c <= 'z' ? 32 : 0));
  return env;
}

}  // namespace

parsed_options parse_options(int argc, char** argv) {
  parsed_options result;
  options& o = result.opts;
#ifdef SPOOLD_DEFAULT_ROOT
  o.root = SPOOLD_DEFAULT_ROOT;
#endif
  auto fail = [&](std::string message) {
    result.outcome = parse_outcome::error;
    result.message = std::move(message);
    return result;
  };

  for (auto name : option_names) {
    if (const char* value = std::getenv(env_name(name).c_str())) {
      if (!apply(o, name, value, result.message)) {
        return fail(env_name(name) + ": " + result.message);
      }
    }
  }
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      result.outcome = parse_outcome::help;
      result.message = help_text;
      return result;
    }
    if (arg == "--version") {
      result.outcome = parse_outcome::version;
      result.message = "spoold " SPOOLD_VERSION "\n";
      return result;
    }
    if (!arg.starts_with("--")) return fail("unexpected argument '" + std::string(arg) + "'");
    arg.remove_prefix(2);
    std::string_view value;
    if (auto eq = arg.find('='); eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (arg == "proxy-protocol") {
      value = "on";  // a switch: --proxy-protocol alone (or =on/=off, or the variable)
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return fail("--" + std::string(arg) + " needs a value");
    }
    if (!apply(o, arg, value, result.message)) return fail(result.message);
  }
  if (o.rate_burst != 0 && o.rate_limit == 0) return fail("--rate-burst needs --rate-limit");
  if (o.proxy_protocol && o.trust.empty()) {
    return fail("--proxy-protocol needs --trust: the proxies whose connections carry the header");
  }
  const bool tls_wanted = o.tls_port.has_value() || o.tls_only;
  if (o.tls_only && o.tls_port) return fail("--tls-only and --tls-port exclude each other");
  if (tls_wanted && (o.tls_cert.empty() || o.tls_key.empty())) {
    return fail(o.tls_only ? "--tls-only needs --tls-cert and --tls-key"
                           : "--tls-port needs --tls-cert and --tls-key");
  }
  if (!tls_wanted && (!o.tls_cert.empty() || !o.tls_key.empty())) {
    return fail("--tls-cert and --tls-key need --tls-port or --tls-only");
  }
  if (o.proxy_protocol && o.tls_only && o.model == "queue") {
    // The queue model's handshake stage reads the first bytes as TLS before any connection
    // state exists, so a PROXY header in front of the handshake would fail it.
    return fail("--proxy-protocol with --tls-only needs a model other than queue");
  }
  if (o.tls_port && o.model != "epoll" && o.model != "poll") {
    return fail("--tls-port needs --model epoll or poll (model " + o.model +
                " accepts on one listening socket; use --tls-only)");
  }
  // Default: a second's worth of requests, at least one.
  if (o.rate_burst == 0 && o.rate_limit > 0) {
    o.rate_burst = static_cast<std::uint32_t>(std::max(1.0, std::ceil(o.rate_limit)));
  }
  if (o.loops == 0) o.loops = std::max(1u, std::thread::hardware_concurrency());
  return result;
}

}  // namespace spoold
