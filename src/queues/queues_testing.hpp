// queues/queues_testing.hpp: a pause tests put inside queues::take_back, while it holds a
// producer slot's batching lock, so that a worker's search can meet the lock held. Not used
// by the pool itself; tests reach it through core_testing.hpp.
#pragma once

namespace spool::detail::queues_testing {

// Called by take_back with the slot's batching lock held; nullptr (the default) for none.
void set_take_back_pause(void (*pause)()) noexcept;

}  // namespace spool::detail::queues_testing
