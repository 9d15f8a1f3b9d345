// all_peers.hpp: the peers in the order they run and are printed (spool first), and the function
// that turns them into the contenders of a measurement point.
#pragma once

#include <tuple>
#include <type_traits>
#include <vector>

#include "measure_point.hpp"
#include "options.hpp"
#include "peers/asio_peer.hpp"
#include "peers/mutex_pool_peer.hpp"
#include "peers/omp_peer.hpp"
#include "peers/peer.hpp"
#include "peers/peer_names.hpp"
#include "peers/spool_peer.hpp"
#include "peers/tbb_arena_peer.hpp"
#include "peers/tbb_task_group_peer.hpp"

namespace bench {

using all_peers = std::tuple<spool_peer, tbb_task_group_peer, tbb_arena_peer, asio_peer, omp_peer,
                             mutex_pool_peer>;

template <class Fn>
void for_each_peer(Fn&& fn) {
  [&]<class... P>(std::type_identity<std::tuple<P...>>) {
    static_assert((peer_adapter<P> && ...));
    (fn(std::type_identity<P>{}), ...);
  }(std::type_identity<all_peers>{});
}

// Appends make(std::type_identity<P>{}) -> contender for each peer P that --peers selects.
template <class Make>
void append_peers(const options& o, std::vector<contender>& out, Make&& make) {
  for_each_peer([&]<class P>(std::type_identity<P> tag) {
    if (o.wants_peer(P::name)) out.push_back(make(tag));
  });
}

namespace detail {
constexpr bool names_match() {
  std::size_t i = 0;
  bool ok = true;
  [&]<class... P>(std::type_identity<std::tuple<P...>>) {
    ((ok = ok && P::name == peer_names[i++]), ...);
  }(std::type_identity<all_peers>{});
  return ok && i == peer_names.size();
}
static_assert(names_match(), "peer_names.hpp must list the adapters of all_peers, in order");
}  // namespace detail

}  // namespace bench
