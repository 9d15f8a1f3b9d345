// queues/queues_testing.hpp: pauses tests put inside queues::take_back and
// queues::take_from_slot, while they hold a producer slot's batching lock, so that a worker's
// search can meet the lock held by either kind of holder. Not used by the pool itself; tests
// reach them through core_testing.hpp.
#pragma once

namespace spool::detail::queues_testing {

// Called by take_back with the slot's batching lock held; nullptr (the default) for none.
void set_take_back_pause(void (*pause)()) noexcept;
// Called by take_from_slot with the lock held as a filler's, after it took a run of the slot's
// tasks and before it fills its batch with them; nullptr (the default) for none.
void set_fill_pause(void (*pause)()) noexcept;

}  // namespace spool::detail::queues_testing
