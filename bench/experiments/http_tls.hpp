// http_tls.hpp: `spool-bench http --tls`, spoold and nginx over TLS (experiments/http_tls.cpp).
#pragma once

#include "options.hpp"

namespace bench {

// Runs the TLS comparison and prints its table; exits through cannot_run() when it cannot.
void run_http_tls(const options& o);

}  // namespace bench
