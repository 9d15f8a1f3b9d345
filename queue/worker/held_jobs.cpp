#include "held_jobs.hpp"

namespace spool::queue::detail {

std::shared_ptr<held_job> held_jobs::add(std::shared_ptr<held_job> job) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = jobs_.try_emplace(job->number, job);
  if (inserted) return nullptr;
  std::shared_ptr<held_job> earlier = std::move(it->second);
  it->second = std::move(job);
  return earlier;
}

void held_jobs::remove(const held_job& job) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(job.number);
  if (it != jobs_.end() && it->second.get() == &job) jobs_.erase(it);
}

std::vector<std::shared_ptr<held_job>> held_jobs::snapshot() const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<held_job>> out;
  out.reserve(jobs_.size());
  for (const auto& [n, job] : jobs_) out.push_back(job);
  return out;
}

std::vector<std::string> held_jobs::numbers() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  out.reserve(jobs_.size());
  for (const auto& [n, job] : jobs_) out.push_back(n);
  return out;
}

std::size_t held_jobs::size() const {
  std::lock_guard lock(mu_);
  return jobs_.size();
}

}  // namespace spool::queue::detail
