// The producer: submissions (one or many per round trip), the full policies, and results
// through the result router.
#include "spool/queue/producer.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "job_encoding.hpp"
#include "names.hpp"
#include "redis_link.hpp"
#include "replies.hpp"
#include "result_router.hpp"

namespace spool::queue {
namespace {

using namespace std::chrono_literals;
using detail::command;
using detail::effect;
using detail::redis_link;
using detail::reply_handle;
using detail::submit_answer;

constexpr std::size_t largest_payload = (std::size_t{512} << 20) - (std::size_t{64} << 10);

void check_options(const producer_options& o) {
  const auto refuse = [](const std::string& what) {
    throw error(errc::invalid_argument, "producer option " + what);
  };
  if (o.on_full == spool::full_policy::discard_oldest) {
    refuse("on_full = discard_oldest: a producer does not drop other producers' jobs");
  }
  if (o.max_payload < 1 || o.max_payload > largest_payload) {
    refuse("max_payload = " + std::to_string(o.max_payload) + ": must be from 1 to " +
           std::to_string(largest_payload));
  }
  if (o.replica_timeout < 1ms && o.replicas > 0) refuse("replica_timeout must be at least 1 ms");
  if (o.block_timeout < 0ms) refuse("block_timeout must not be negative");
  if (o.recheck < 10ms) refuse("recheck must be at least 10 ms");
  if (o.connection.connect_timeout < 1ms || o.connection.command_timeout < 1ms) {
    refuse("connection timeouts must be at least 1 ms");
  }
}

}  // namespace

struct producer::impl {
  impl(std::string_view url, producer_options o)
      : options((check_options(o), o)),
        target(std::make_shared<detail::redis_target>(url, o.connection.connect_timeout)),
        pool(o.pool != nullptr ? *o.pool : spool::default_pool()),
        router(target, o.connection, pool, {o.replicas, o.replica_timeout}, o.recheck) {}

  // A connection of this producer's for the calling thread's round trip: taken from the idle
  // ones, or made; handed back after use (dropped connections too: they reconnect).
  class link_lease {
   public:
    explicit link_lease(impl& p) : p_(p) {
      std::lock_guard lock(p.links_mu);
      if (!p.idle_links.empty()) {
        link_ = std::move(p.idle_links.back());
        p.idle_links.pop_back();
      }
      if (!link_) link_ = std::make_unique<redis_link>(p.target, p.options.connection);
    }
    ~link_lease() {
      std::lock_guard lock(p_.links_mu);
      p_.idle_links.push_back(std::move(link_));
    }
    redis_link& operator*() { return *link_; }

   private:
    impl& p_;
    std::unique_ptr<redis_link> link_;
  };

  // Sends the jobs at `which` in one spool_submit (and WAIT); one answer per job.
  std::vector<submit_answer> send(std::string_view queue, std::span<const job_spec> jobs,
                                  const std::vector<std::size_t>& which) {
    command submit = detail::fcall("spool_submit", queue);
    submit.add(router.reply_list()).add(static_cast<std::uint64_t>(which.size()));
    for (std::size_t i : which) {
      detail::append_job(submit, jobs[i].task, jobs[i].payload, jobs[i].options);
    }
    std::vector<command> commands{std::move(submit)};
    if (options.replicas > 0) {
      commands.push_back(command{"WAIT", std::to_string(options.replicas),
                                 std::to_string(options.replica_timeout.count())});
    }
    std::vector<reply_handle> replies;
    {
      link_lease link(*this);
      replies = (*link).round_trip(commands, effect::writes);
    }
    const redisReply& answers = detail::array_of(*replies[0], which.size(), "spool_submit");
    if (options.replicas > 0) {
      const std::int64_t confirmed = detail::integer_of(*replies[1], "WAIT");
      if (confirmed < static_cast<std::int64_t>(options.replicas)) {
        throw error(errc::outcome_unknown,
                    target->name() + ": the submission reached the primary, but " +
                        std::to_string(confirmed) + " of " + std::to_string(options.replicas) +
                        " replicas confirmed it within " +
                        std::to_string(options.replica_timeout.count()) +
                        " ms (submitting again with the same key is safe)");
      }
    }
    std::vector<submit_answer> out;
    out.reserve(which.size());
    for (std::size_t i = 0; i < which.size(); ++i) {
      out.push_back(detail::read_submit_answer(*answers.element[i]));
    }
    return out;
  }

  submitted accepted(const submit_answer& a) {
    submitted s;
    s.id = a.id;
    s.existing = a.what == submit_answer::kind::existing;
    const bool final = a.state == "done" || a.state == "dead" || a.state == "cancelled";
    s.result = final ? router.completed(a.state, a.data) : router.expect(a.id);
    return s;
  }

  submitted run_here(std::string_view queue, const job_spec& job) {
    submitted s;
    s.ran_here = true;
    spool::promise<std::string> p(pool);
    s.result = p.get_future();
    const auto h = handlers.find(job.task);
    if (h == handlers.end()) {
      p.set_exception(std::make_exception_ptr(
          error(errc::full, "queue " + std::string(queue) + " is full, and caller_runs has no " +
                                "handler for task '" + job.task + "' (producer::handle)")));
      return s;
    }
    job_context context;
    context.queue = queue;
    context.task = job.task;
    context.key = job.options.key;
    context.attempt = 1;
    try {
      p.set_value(h->second(context, job.payload));
    } catch (const std::exception& e) {
      p.set_exception(std::make_exception_ptr(job_failed(e.what())));
    } catch (...) {
      p.set_exception(std::make_exception_ptr(job_failed("unknown exception")));
    }
    return s;
  }

  static spool::future<std::string> refused(spool::pool& p, errc code, const std::string& what) {
    spool::promise<std::string> pr(p);
    spool::future<std::string> f = pr.get_future();
    pr.set_exception(std::make_exception_ptr(error(code, what)));
    return f;
  }

  std::vector<submitted> submit(std::string_view queue, std::span<const job_spec> jobs,
                                bool single) {
    detail::check_queue_name(queue);
    for (const job_spec& j : jobs)
      detail::check_job(j.task, j.payload, j.options, options.max_payload);
    submitting.store(true, std::memory_order_relaxed);
    std::vector<submitted> out(jobs.size());
    std::vector<std::size_t> left(jobs.size());
    for (std::size_t i = 0; i < jobs.size(); ++i) left[i] = i;
    const auto deadline = std::chrono::steady_clock::now() + options.block_timeout;
    auto pause = 1ms;
    while (!left.empty()) {
      const std::vector<submit_answer> answers = send(queue, jobs, left);
      std::vector<std::size_t> full;
      for (std::size_t k = 0; k < left.size(); ++k) {
        if (answers[k].what == submit_answer::kind::full) {
          full.push_back(left[k]);
        } else {
          out[left[k]] = accepted(answers[k]);
        }
      }
      if (full.empty()) break;
      const std::string why = "queue " + std::string(queue) + " is full (" +
                              std::to_string(jobs.size() - full.size()) + " of " +
                              std::to_string(jobs.size()) + " jobs submitted)";
      const spool::full_policy policy = options.on_full;
      const bool timed_out =
          policy == spool::full_policy::block_for && std::chrono::steady_clock::now() >= deadline;
      if (policy == spool::full_policy::reject || timed_out) {
        const errc code = timed_out ? errc::timed_out : errc::full;
        const std::string what = timed_out
                                     ? why + "; no room came within " +
                                           std::to_string(options.block_timeout.count()) + " ms"
                                     : why;
        if (single) throw error(code, what);
        for (std::size_t i : full) out[i].result = refused(pool, code, what);
        break;
      }
      if (policy == spool::full_policy::caller_runs) {
        for (std::size_t i : full) out[i] = run_here(queue, jobs[i]);
        break;
      }
      // block, block_for: wait for room, checking with a backoff.
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
      left = std::move(full);
    }
    return out;
  }

  producer_options options;
  std::shared_ptr<detail::redis_target> target;
  spool::pool& pool;
  std::mutex links_mu;
  std::vector<std::unique_ptr<redis_link>> idle_links;
  std::unordered_map<std::string, handler> handlers;
  std::atomic<bool> submitting{false};
  // Last: destroyed first, so its thread stops before the links and the target go.
  detail::result_router router;
};

producer::producer(std::string_view store_url, producer_options options)
    : impl_(std::make_unique<impl>(store_url, std::move(options))) {}

producer::~producer() = default;

submitted producer::submit(std::string_view queue, std::string_view task, std::string_view payload,
                           const job_options& options) {
  const job_spec one{std::string(task), std::string(payload), options};
  return std::move(impl_->submit(queue, {&one, 1}, true).front());
}

std::vector<submitted> producer::submit_bulk(std::string_view queue,
                                             std::span<const job_spec> jobs) {
  if (jobs.empty()) {
    detail::check_queue_name(queue);
    return {};
  }
  return impl_->submit(queue, jobs, false);
}

spool::future<std::string> producer::watch(std::string_view job_id) {
  const detail::job_ref ref = detail::parse_job_id(job_id);
  command watch = detail::fcall("spool_watch", ref.queue);
  watch.add(ref.number).add(impl_->router.reply_list());
  reply_handle r;
  {
    impl::link_lease link(*impl_);
    r = (*link).call(watch, effect::writes);
  }
  const redisReply& a = detail::array_of(*r, 2, "spool_watch");
  const std::string state = detail::text_of(*a.element[0], "spool_watch");
  const std::string data = detail::text_of(*a.element[1], "spool_watch");
  if (state == "done" || state == "dead" || state == "cancelled") {
    return impl_->router.completed(state, data);
  }
  return impl_->router.expect(ref.id());
}

void producer::handle(std::string task, handler h) {
  detail::check_task_name(task);
  if (!h) throw error(errc::invalid_argument, "producer::handle: an empty handler");
  if (impl_->submitting.load(std::memory_order_relaxed)) {
    throw error(errc::wrong_order, "producer::handle after the first submission");
  }
  impl_->handlers.insert_or_assign(std::move(task), std::move(h));
}

}  // namespace spool::queue
