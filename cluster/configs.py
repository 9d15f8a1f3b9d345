"""The fleet's configuration files, rendered from the templates beside this file
(redis.conf.in, sentinel.conf.in, haproxy.cfg.in) into a state directory's conf/: one
redis.conf per Redis instance (its data in data/NAME/), one sentinel.conf per Sentinel, and
haproxy.cfg with every node as a server of both backends. Redis and Sentinel rewrite theirs
while they run; HAProxy's is checked with `haproxy -c` before it starts (balancer.py)."""

import os
import string

HERE = os.path.dirname(os.path.abspath(__file__))
# The name the Sentinels know the primary by, in every spoold's --store spec.
MASTER_NAME = "fleet"


def _template(name):
    with open(os.path.join(HERE, name)) as f:
        return string.Template(f.read())


def _write(state_dir, name, text):
    with open(os.path.join(state_dir, "conf", name), "w") as f:
        f.write(text)


def _data_dir(state_dir, name):
    data = os.path.join(state_dir, "data", name)
    os.makedirs(data, exist_ok=True)
    return data


def _log(state_dir, name):
    return os.path.join(state_dir, "logs", f"{name}.log")


def write_redis(state_dir, r, primary):
    """conf/NAME.conf of Redis instance `r`, a replica of `primary` (None: a primary)."""
    replicaof = f"replicaof {primary.addr} {primary.port}" if primary else ""
    _write(state_dir, f"{r.name}.conf", _template("redis.conf.in").substitute(
        addr=r.addr, port=r.port, data_dir=_data_dir(state_dir, r.name),
        log=_log(state_dir, r.name), replicaof=replicaof))


def write_sentinel(state_dir, s, primary, down_after_ms, settings):
    """conf/NAME.conf of Sentinel `s`, watching `primary`, which it calls down after
    `down_after_ms` without an answer."""
    _write(state_dir, f"{s.name}.conf", _template("sentinel.conf.in").substitute(
        addr=s.addr, port=s.port, data_dir=_data_dir(state_dir, s.name),
        log=_log(state_dir, s.name), master=MASTER_NAME, primary_addr=primary.addr,
        primary_port=primary.port, quorum=settings.quorum, down_after_ms=down_after_ms,
        failover_timeout_ms=settings.failover_timeout_ms))


def write_haproxy(state_dir, layout):
    """conf/haproxy.cfg: HAProxy on layout.haproxy, its stats on layout.stats, every node a
    server (with a cookie of its name)."""
    servers = "\n".join(f"    server {n.name} {n.text} cookie {n.name}" for n in layout.nodes)
    h, st = layout.haproxy, layout.stats
    _write(state_dir, "haproxy.cfg", _template("haproxy.cfg.in").substitute(
        haproxy_addr=h.addr, haproxy_port=h.port, stats_addr=st.addr, stats_port=st.port,
        servers=servers))


def write_all(state_dir, layout, settings):
    """Every config of the fleet: redis[0] the primary, the other instances its replicas; the
    Sentinels, each after the first waiting down_after_step_ms longer than the one before
    (Settings says why)."""
    primary, *replicas = layout.redis
    write_redis(state_dir, primary, None)
    for replica in replicas:
        write_redis(state_dir, replica, primary)
    for i, s in enumerate(layout.sentinels):
        write_sentinel(state_dir, s, primary,
                       settings.down_after_ms + settings.down_after_step_ms * i, settings)
    write_haproxy(state_dir, layout)
