// The C API (spool/queue.h) over the C++ one: each call catches what the C++ call throws and
// returns its code, keeping the message for spool_queue_last_error().
#include "spool/queue.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "spool/queue.hpp"

struct spool_queue_producer {
  spool::queue::producer cpp;
  spool::queue::admin control;
};

struct spool_queue_worker {
  spool::queue::worker cpp;
};

struct spool_queue_reply {
  std::string bytes;
};

static_assert(SPOOL_QUEUE_EVERSION == static_cast<int>(spool::queue::errc::other_version));
static_assert(SPOOL_QUEUE_EFAILED == static_cast<int>(spool::queue::errc::job_failed));

namespace {

thread_local std::string last_error;

int ok() {
  last_error.clear();
  return SPOOL_QUEUE_OK;
}

int failed(int code, const std::string& what) {
  last_error = what;
  return code;
}

// Runs f() and turns what it throws into a code.
template <class F>
int guarded(F&& f) {
  try {
    return f();
  } catch (const spool::queue::error& e) {
    return failed(static_cast<int>(e.value()), e.what());
  } catch (const spool::task_cancelled& e) {
    return failed(SPOOL_QUEUE_ECANCELED, e.what());
  } catch (const std::bad_alloc&) {
    return failed(SPOOL_QUEUE_ENOMEM, "out of memory");
  } catch (const std::exception& e) {
    return failed(SPOOL_QUEUE_EREDIS, e.what());
  }
}

int null_argument(const char* what) {
  return failed(SPOOL_QUEUE_EINVAL, std::string(what) + " is NULL");
}

int fill(spool_queue_result* out, const std::string& bytes) {
  char* data = static_cast<char*>(std::malloc(bytes.size() + 1));
  if (data == nullptr) return failed(SPOOL_QUEUE_ENOMEM, "out of memory");
  std::memcpy(data, bytes.data(), bytes.size());
  data[bytes.size()] = '\0';
  out->data = data;
  out->size = bytes.size();
  return SPOOL_QUEUE_OK;
}

}  // namespace

extern "C" {

void spool_queue_submit_options_init(spool_queue_submit_options* o) {
  if (o == nullptr) return;
  const spool::queue::job_options d;
  o->key = nullptr;
  o->priority = 1;
  o->delay_ms = 0;
  o->attempts = d.attempts;
  o->backoff_ms = static_cast<uint64_t>(d.backoff.count());
  o->backoff_max_ms = static_cast<uint64_t>(d.backoff_max.count());
  o->time_limit_ms = 0;
  o->result_ttl_s = static_cast<uint64_t>(d.result_ttl.count());
}

void spool_queue_result_free(spool_queue_result* r) {
  if (r == nullptr) return;
  std::free(r->data);
  r->data = nullptr;
  r->size = 0;
}

int spool_queue_producer_create(const char* url, const unsigned* replicas,
                                spool_queue_producer** out) {
  if (url == nullptr) return null_argument("store_url");
  if (out == nullptr) return null_argument("out");
  return guarded([&] {
    spool::queue::producer_options o;
    if (replicas != nullptr) o.replicas = *replicas;
    *out = new spool_queue_producer{spool::queue::producer(url, o), spool::queue::admin(url)};
    return ok();
  });
}

void spool_queue_producer_destroy(spool_queue_producer* p) { delete p; }

int spool_queue_submit(spool_queue_producer* p, const char* queue, const char* task,
                       const void* payload, size_t size, const spool_queue_submit_options* opt,
                       char* job_id, size_t id_capacity) {
  if (p == nullptr) return null_argument("producer");
  if (queue == nullptr) return null_argument("queue");
  if (task == nullptr) return null_argument("task");
  if (payload == nullptr && size > 0) return null_argument("payload");
  if (job_id == nullptr) return null_argument("job_id");
  return guarded([&] {
    spool::queue::job_options o;
    if (opt != nullptr) {
      if (opt->priority < 0 || opt->priority > 2) {
        return failed(SPOOL_QUEUE_EINVAL, "priority must be 0, 1 or 2");
      }
      o.key = opt->key != nullptr ? opt->key : "";
      o.priority = static_cast<spool::priority>(opt->priority);
      o.delay = std::chrono::milliseconds(static_cast<std::int64_t>(
          std::min<uint64_t>(opt->delay_ms, std::chrono::milliseconds::max().count())));
      o.attempts = opt->attempts;
      const auto ms = [](uint64_t v) {
        return std::chrono::milliseconds(
            static_cast<std::int64_t>(std::min<uint64_t>(v, INT64_MAX)));
      };
      o.backoff = ms(opt->backoff_ms);
      o.backoff_max = ms(opt->backoff_max_ms);
      o.time_limit = ms(opt->time_limit_ms);
      o.result_ttl = std::chrono::seconds(
          static_cast<std::int64_t>(std::min<uint64_t>(opt->result_ttl_s, INT64_MAX / 1000)));
    }
    const std::string_view bytes(static_cast<const char*>(payload), size);
    spool::queue::submitted s = p->cpp.submit(queue, task, bytes, o);
    if (s.id.size() + 1 > id_capacity) {
      return failed(SPOOL_QUEUE_EINVAL, "id_capacity " + std::to_string(id_capacity) +
                                            " is too small for the job id " + s.id);
    }
    std::memcpy(job_id, s.id.c_str(), s.id.size() + 1);
    return ok();
  });
}

int spool_queue_get(spool_queue_producer* p, const char* job_id, int64_t timeout_ms,
                    spool_queue_result* result) {
  if (p == nullptr) return null_argument("producer");
  if (job_id == nullptr) return null_argument("job_id");
  if (result == nullptr) return null_argument("result");
  return guarded([&] {
    spool::future<std::string> f = p->cpp.watch(job_id);
    if (timeout_ms >= 0 && !f.wait_for(std::chrono::milliseconds(timeout_ms))) {
      return failed(SPOOL_QUEUE_ETIMEDOUT, "no outcome of " + std::string(job_id) + " within " +
                                               std::to_string(timeout_ms) + " ms");
    }
    try {
      const int rc = fill(result, f.get());
      return rc == SPOOL_QUEUE_OK ? ok() : rc;
    } catch (const spool::queue::job_failed& e) {
      const int rc = fill(result, e.what());
      if (rc != SPOOL_QUEUE_OK) return rc;
      return failed(SPOOL_QUEUE_EFAILED, e.what());
    }
  });
}

int spool_queue_cancel(spool_queue_producer* p, const char* job_id) {
  if (p == nullptr) return null_argument("producer");
  if (job_id == nullptr) return null_argument("job_id");
  return guarded([&] {
    p->control.cancel(job_id);
    return ok();
  });
}

int spool_queue_job_cancelled(const spool_queue_job* job) {
  if (job == nullptr || job->internal == nullptr) return 0;
  return static_cast<const spool::queue::job_context*>(job->internal)->token.cancelled() ? 1 : 0;
}

int spool_queue_reply_set(spool_queue_reply* reply, const void* data, size_t size) {
  if (reply == nullptr) return null_argument("reply");
  if (data == nullptr && size > 0) return null_argument("data");
  return guarded([&] {
    reply->bytes.assign(static_cast<const char*>(data), size);
    return ok();
  });
}

int spool_queue_worker_create(const char* url, const char* queue, unsigned threads,
                              spool_queue_worker** out) {
  if (url == nullptr) return null_argument("store_url");
  if (queue == nullptr) return null_argument("queue");
  if (out == nullptr) return null_argument("out");
  return guarded([&] {
    spool::queue::worker_options o;
    o.queue = queue;
    o.threads = threads;
    *out = new spool_queue_worker{spool::queue::worker(url, o)};
    return ok();
  });
}

int spool_queue_worker_handle(spool_queue_worker* w, const char* task, spool_queue_handler handler,
                              void* arg) {
  if (w == nullptr) return null_argument("worker");
  if (task == nullptr) return null_argument("task");
  if (handler == nullptr) return null_argument("handler");
  return guarded([&] {
    w->cpp.handle(
        task, [handler, arg](const spool::queue::job_context& job, std::string_view payload) {
          const std::string queue(job.queue), id(job.id), task_name(job.task), key(job.key);
          const spool_queue_job c{queue.c_str(), id.c_str(),  task_name.c_str(),
                                  key.c_str(),   job.attempt, &job};
          spool_queue_reply reply;
          const int rc = handler(&c, payload.data(), payload.size(), &reply, arg);
          if (rc != 0) {
            throw std::runtime_error(reply.bytes.empty() ? "handler returned " + std::to_string(rc)
                                                         : reply.bytes);
          }
          return std::move(reply.bytes);
        });
    return ok();
  });
}

int spool_queue_worker_start(spool_queue_worker* w) {
  if (w == nullptr) return null_argument("worker");
  return guarded([&] {
    w->cpp.start();
    return ok();
  });
}

int spool_queue_worker_stop(spool_queue_worker* w) {
  if (w == nullptr) return null_argument("worker");
  return guarded([&] {
    w->cpp.stop();
    return ok();
  });
}

void spool_queue_worker_destroy(spool_queue_worker* w) { delete w; }

const char* spool_queue_strerror(int code) {
  switch (code) {
    case SPOOL_QUEUE_OK:
      return "success";
    case SPOOL_QUEUE_ECANCELED:
      return "the job was cancelled";
    case SPOOL_QUEUE_ENOMEM:
      return "out of memory";
    default:
      break;
  }
  if (code < 1 || (code > SPOOL_QUEUE_EFAILED && code != SPOOL_QUEUE_EVERSION)) {
    return "unknown spool_queue error";
  }
  static thread_local std::string text;
  text = spool::queue::error_category().message(code);
  return text.c_str();
}

const char* spool_queue_last_error(void) { return last_error.c_str(); }

}  // extern "C"
