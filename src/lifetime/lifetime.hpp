// lifetime/lifetime.hpp: a pool's memory, and whether the pool a future's state was made for
// still lives. The design note is README.md beside this file.
//
// Owns: the blocks that cores live in (a header, then the core), and the list of blocks whose
// pool was destroyed, which the next pool reuses. A block is never given back to the system,
// so its header can be read at any time, by anyone holding a pointer to its core.
//
// Invariants:
//  - A header's incarnation is odd while a core lives in the block, even otherwise; it moves
//    once when the core is made and once when it is destroyed. A core's stamp is the odd value
//    of its life, so a stamp matches the header only during that life (until 2^31 more lives
//    of the same block).
//  - pin() succeeds only while the stamp matches, and destroy_core() changes the incarnation
//    and then waits until no pin is held: a pinned core is not destroyed until unpinned.
#pragma once

#include <cstdint>

#include "spool/detail/work_item.hpp"

namespace spool {
struct config;
}

namespace spool::detail {

class core;

// Makes a core for cfg in a block of its own (a reused one if a pool was destroyed before).
// Throws what core's constructor throws; the block is then kept for the next pool.
core* create_core(const config& cfg);
// Destroys c, which shutdown() has joined, once no thread pins it, and keeps its block.
void destroy_core(core* c) noexcept;

// c's config::spin_rounds, read from its block's header: valid to call after c is destroyed
// (it then gives the setting of c or of a later pool in the same block).
unsigned waiter_spin_rounds(const core* c) noexcept;

// Holds off the destruction of a core while the holder uses it, if the core is still the one
// `ref` was made for. Test with operator bool before any use. For threads that are not the
// pool's own workers (a worker's pool cannot be destroyed while the worker runs a task).
class pin {
 public:
  explicit pin(pool_ref ref) noexcept;
  ~pin();
  pin(const pin&) = delete;
  pin& operator=(const pin&) = delete;
  explicit operator bool() const noexcept { return held_ != nullptr; }

 private:
  core* held_ = nullptr;
};

}  // namespace spool::detail
