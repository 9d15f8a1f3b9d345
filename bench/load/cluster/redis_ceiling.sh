#!/bin/bash
# Redis's own ceiling on this machine, for the capacity model of docs/scale-out.md: the rates
# redis-benchmark reaches against one redis-server with the fleet's persistence (appendonly,
# fsync before every reply) and without any, for single commands and for the guestbook's own
# work (a page: INCR of the counter and LRANGE of the newest 100 entries, here as one EVAL).
#
#   bench/load/cluster/redis_ceiling.sh [ROUNDS]     (default 3; prints one line per test and round)
#
# redis-server runs on 127.0.0.1 on a free port, in a temporary directory removed at the end.
set -euo pipefail
rounds=${1:-3}
dir=$(mktemp -d /tmp/spool-redis-ceiling.XXXXXX)
pid=
cleanup() { [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cli() { redis-cli -h 127.0.0.1 -p "$port" "$@"; }
bench() { redis-benchmark -h 127.0.0.1 -p "$port" -q -n 200000 -c 100 "$@" | tr '\r' '\n' | grep 'requests per second'; }
visit="redis.call('INCR','visitor_count') return redis.call('LRANGE','guestbook_remarks',-100,-1)"

for round in $(seq "$rounds"); do
  for persistence in always none; do
    if [[ $persistence == always ]]; then args=(--appendonly yes --appendfsync always); else args=(--appendonly no); fi
    rm -rf "${dir:?}/data"; mkdir "$dir/data"
    redis-server --bind 127.0.0.1 --port "$port" --save "" --dir "$dir/data" "${args[@]}" >>"$dir/redis.log" 2>&1 &
    pid=$!
    until cli ping >/dev/null 2>&1; do
      kill -0 "$pid" || { echo "redis-server did not start" >&2; exit 1; }
      sleep 0.05   # polling for the server's first answer, not synchronisation of the measurement
    done
    for i in $(seq 100); do cli rpush guestbook_remarks "entry $i: a remark of about fifty characters, as a guest writes" >/dev/null; done
    bench -t ping,incr,rpush,lrange_100 | sed "s/^/round $round $persistence: /"
    bench lrange guestbook_remarks -100 -1 | sed "s/^/round $round $persistence: guestbook LRANGE -100 -1 /"
    bench eval "$visit" 0 | sed "s/^/round $round $persistence: guestbook visit (EVAL INCR+LRANGE) /"
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
  done
done
