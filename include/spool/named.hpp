// spool/named.hpp: a callable with a name, which the tracing hooks report
// (config::on_task_start, on_task_finish).
#pragma once

#include <type_traits>
#include <utility>

#include "spool/detail/named.hpp"

namespace spool {

// f with a name, for tracing: submit, post, submit_after, post_after/at/every, then (and
// then_try, then_error) and task_group::run accept it wherever they accept f, and the task
// reports `name` to config::on_task_start and on_task_finish. name must outlive the task (a
// string literal). Costs a pointer in the task; an unnamed task is unchanged.
template <class F>
detail::named_fn<std::decay_t<F>> named(const char* name, F&& f) {
  return {name, std::forward<F>(f)};
}

}  // namespace spool
