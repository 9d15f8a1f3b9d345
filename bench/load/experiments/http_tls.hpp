// http_tls.hpp: `spool-load-bench http --tls`, spoold and nginx over TLS (http_tls.cpp).
#pragma once

#include "load_options.hpp"

namespace bench {

// Runs the TLS comparison and prints its table; exits through cannot_run() when it cannot.
void run_http_tls(const load_options& o);

}  // namespace bench
