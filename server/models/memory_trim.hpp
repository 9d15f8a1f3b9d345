// Handing back what a wave of connections freed. Their objects and input buffers go back to
// the malloc arenas, which give memory to the system only from their top, so without a trim
// the process keeps the high-water mark of its busiest moment. An event loop (epoll, poll)
// tells this object when it deletes connections and asks it after each turn; it trims when
// the loop has no connection open, at most once per interval and only after deletions, so an
// idle server does not trim again and again and a loaded one (never at zero) never pays for it.
//
// The models that give a connection a thread of its own (threaded, prethreaded, queue) free a
// connection's memory on that thread, into that thread's arena (glibc gives threads arenas of
// their own, up to eight per core), where it stays after the thread is gone or idle.
// shared_memory_trim is memory_trim for them: every connection thread counts itself in and
// out, and one thread of the model ticks once per interval while there may be something to hand
// back, and otherwise sleeps until a connection ends (classic_model's trimmer). A thread
// that ends frees what it kept (its metrics shard, the pool worker's own state) after its last
// connection, so fewer live pool threads than at the last tick (queue's workers retiring after
// the pool's keep-alive) is a reason to trim again too. So is a connection that never reached a
// connection thread: queue's handshake stage frees the TLS state of every handshake it drops
// (a wave of abandoned handshakes takes tens of KiB each) on its own thread.
//
// malloc_trim hands back the free pages inside each arena's bins and the free top of the main
// arena, but not the free top of any other arena: glibc shrinks those only in free(), when the
// chunk it frees there coalesces to 64 KiB or more and the top is past the trim threshold. And
// malloc_trim first consolidates each arena's fastbins, coalescing their chunks with their free
// neighbours, so free memory that a fastbin chunk kept apart from the top joins the top there,
// out of reach of every later trim until that arena frees again. make_freed_memory_trimmable
// turns the fastbins off at start-up: every free() then coalesces at once, so free memory next
// to an arena's top joins it in free() itself, which trims the top, and what stays apart lies in
// the bins, where malloc_trim reaches it. Small frees still go to the per-thread tcache first.
// A top keeps at most the trim threshold: 128 KiB, or twice the largest mmapped chunk freed
// since (glibc's dynamic threshold, up to 64 MiB), left dynamic so that large buffers, such as
// a pipelined burst's answers, keep coming from the arenas rather than from mmap each time.
#pragma once

#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstddef>

namespace spoold {

// At start-up, before other threads exist (mallopt consolidates only the main arena's
// fastbins). False if glibc refused: then a non-main arena's top may keep what it was freed.
// Under AddressSanitizer, whose allocator replaces glibc's and whose mallopt does nothing and
// answers 0, there are no fastbins to turn off.
inline bool make_freed_memory_trimmable() noexcept {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#else
  return ::mallopt(M_MXFAST, 0) == 1;
#endif
}

// malloc_trim(0): every arena, not only the calling thread's. Under a sanitizer whose runtime
// replaces malloc (AddressSanitizer, ThreadSanitizer) glibc's arenas hold nothing of ours to
// hand back, and malloc_trim has crashed inside glibc (a read of address 8 in mtrim under
// AddressSanitizer): it is not called there.
inline void trim_freed_memory() noexcept {
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  ::malloc_trim(0);
#endif
}

class memory_trim {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr auto interval = std::chrono::seconds(1);

  void connections_deleted() noexcept { deleted_ = true; }
  // When on_tick() would trim, with `open` connections open: max() for not until more are
  // deleted or they close.
  [[nodiscard]] clock::time_point due(std::size_t open) const noexcept {
    return deleted_ && open == 0 ? next_ : clock::time_point::max();
  }
  // `open`: the loop's connections open now.
  void on_tick(std::size_t open, clock::time_point now) noexcept {
    if (!deleted_ || open != 0 || now < next_) return;
    trim_freed_memory();
    deleted_ = false;
    next_ = now + interval;
  }

 private:
  bool deleted_ = false;  // connections deleted since the last trim
  clock::time_point next_{};
};

class shared_memory_trim {
 public:
  static constexpr auto interval = memory_trim::interval;

  void connection_started() noexcept { open_.fetch_add(1, std::memory_order_relaxed); }
  void connection_ended() noexcept {
    note_ended();
    open_.fetch_sub(1, std::memory_order_relaxed);
  }
  // A connection closed before it was served, outside connection_started() and
  // connection_ended() (a handshake the queue model's handshake stage dropped): its memory is
  // a reason to trim as a served one's is.
  void connection_dropped() noexcept { note_ended(); }

  // The ticking thread, idle: blocks until a connection ended or was dropped since the last
  // tick, or release() was called. So an idle server's trimmer sleeps instead of ticking.
  void wait_for_reason() const noexcept { ended_.wait(false, std::memory_order_relaxed); }
  // Ends a wait_for_reason() for good (the server stops).
  void release() noexcept {
    ended_.store(true, std::memory_order_relaxed);
    ended_.notify_all();
  }

  // Once per interval, on the ticking thread; `threads`: the pool's live threads now, `floor`:
  // its minimum. A connection that starts while it trims costs nothing but the trim's own time
  // (malloc_trim locks one arena at a time). Returns whether to tick again: threads above the
  // floor may still retire (after the pool's keep-alive) and leave memory to hand back. While
  // connections are open it does not trim and forgets the ended ones: the last to end will
  // wake the ticking thread again.
  bool on_tick(std::size_t threads, std::size_t floor) noexcept {
    const bool fewer_threads = threads < threads_;
    threads_ = threads;
    const bool ended = ended_.exchange(false, std::memory_order_relaxed);
    if (open_.load(std::memory_order_relaxed) == 0 && (ended || fewer_threads)) trim_freed_memory();
    return threads > floor;
  }

 private:
  void note_ended() noexcept {
    // The first end since the last tick wakes the ticking thread; later ones cost a load.
    if (!ended_.load(std::memory_order_relaxed) &&
        !ended_.exchange(true, std::memory_order_relaxed)) {
      ended_.notify_one();
    }
  }

  std::atomic<std::size_t> open_{0};  // connections being served now
  std::atomic<bool> ended_{false};    // a connection ended since the last tick
  std::size_t threads_ = 0;           // the ticking thread's: live pool threads at the last tick
};

}  // namespace spoold
