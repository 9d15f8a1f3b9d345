"""The fleet's store: a Redis primary, its replicas and three Sentinels (their configs from
configs.py), started and stopped as the fleet's processes, and what the Sentinels and the
instances say about who is primary."""

import os

import wire
from configs import MASTER_NAME
from processes import FleetError, find_program, wait_for


class Store:
    """The Redis instances and Sentinels of `layout`, run as processes of `processes` with
    their configs in state_dir/conf (configs.write_all writes them)."""

    def __init__(self, layout, settings, processes, state_dir):
        self.layout = layout
        self.settings = settings
        self.processes = processes
        self.dir = state_dir

    def spec(self):
        """spoold's --store for this store: redis-sentinel://S1,S2,S3/fleet."""
        sentinels = ",".join(s.text for s in self.layout.sentinels)
        return f"redis-sentinel://{sentinels}/{MASTER_NAME}"

    def redis(self, name):
        """The Endpoint of Redis instance `name`."""
        for r in self.layout.redis:
            if r.name == name:
                return r
        raise FleetError(f"no Redis instance {name!r}")

    def names(self):
        """The Sentinels and the Redis instances, in the order the fleet stops them."""
        return [s.name for s in self.layout.sentinels] + [r.name for r in self.layout.redis]

    def start(self, timeout=60):
        """Starts the Redis primary, its replicas and the Sentinels, and waits until the
        replicas are in sync and the Sentinels know each other (the configs written first)."""
        primary, *replicas = self.layout.redis
        self.start_redis(primary.name, timeout)
        for replica in replicas:
            self.start_redis(replica.name, timeout)
        for replica in replicas:
            self.wait_replica_online(replica.name, timeout)
        for s in self.layout.sentinels:
            self.start_sentinel(s.name, timeout)
        self.wait_sentinels_agree(timeout)

    def _start(self, program, e, timeout):
        p = self.processes[e.name]
        p.start([find_program(program), os.path.join(self.dir, "conf", f"{e.name}.conf")],
                self.dir, e.ns)
        wait_for(lambda: self._answers_ping(p, e), timeout,
                 f"{e.name} to answer PING (log: {p.log})")

    @staticmethod
    def _answers_ping(p, e):
        p.check_running()
        try:
            return wire.redis_command(e.addr, e.port, "PING") == "PONG"
        except wire.RespError:  # LOADING while it reads its AOF
            return False

    def start_redis(self, name, timeout=30):
        self._start("redis-server", self.redis(name), timeout)

    def kill_redis(self, name):
        """kill -9 of Redis instance `name`; waits for the exit."""
        self.processes[self.redis(name).name].kill()

    def start_sentinel(self, name, timeout=30):
        s = next(e for e in self.layout.sentinels if e.name == name)
        self._start("redis-sentinel", s, timeout)
        # A Sentinel PINGs each instance every min(down-after, ping-period) and counts a new
        # connection (to a primary it has just switched to) as unanswered since it was made:
        # with the default ping-period of 1 s, a down-after of 1 s or less marks a new primary
        # down before its first PING is sent, and the Sentinels fail it over too. The period
        # also bounds how old a replica's INFO may be for it to be promoted (5 periods, against
        # an INFO a second during a failover): 250 ms is as short as that allows. A failover
        # waits for the Sentinel's next INFO of the promoted replica; asked once a second all
        # the time (not every 10 s), that INFO comes sooner after the promotion.
        answer = wire.redis_command(s.addr, s.port, "SENTINEL", "DEBUG",
                                    "ping-period", self.settings.sentinel_ping_period_ms,
                                    "info-period", self.settings.sentinel_info_period_ms)
        if answer != "OK":
            raise FleetError(f"{name}: SENTINEL DEBUG: {answer!r}")

    def primary(self):
        """The name of the Redis instance the Sentinels report as primary (the first that
        answers), or None if none does."""
        for s in self.layout.sentinels:
            try:
                reply = wire.redis_command(s.addr, s.port, "SENTINEL", "get-master-addr-by-name",
                                           MASTER_NAME)
            except (OSError, wire.RespError):
                continue
            if reply:
                addr, port = reply[0].decode(), int(reply[1])
                for r in self.layout.redis:
                    if (r.addr, r.port) == (addr, port):
                        return r.name
        return None

    def role(self, name):
        """"master", "slave" or None (not answering) for a Redis instance."""
        r = self.redis(name)
        try:
            reply = wire.redis_command(r.addr, r.port, "ROLE")
        except (OSError, wire.RespError):
            return None
        return reply[0].decode() if reply else None

    def wait_sentinels_agree(self, timeout=30, replicas=None):
        """Waits until every Sentinel knows the others and sees `replicas` replicas healthy
        (default: every Redis instance that runs, but the primary), so that a failover can be
        voted on and has a replica to promote. The Sentinels find each other through the
        primary's hello channel, every 2 s."""
        want_sentinels = len(self.layout.sentinels) - 1
        if replicas is None:
            replicas = len(self.processes.running([r.name for r in self.layout.redis])) - 1
        want_replicas = replicas

        def as_dict(flat):
            return {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}

        def agreed():
            for s in self.layout.sentinels:
                info = as_dict(wire.redis_command(s.addr, s.port, "SENTINEL", "master",
                                                  MASTER_NAME))
                if int(info["num-other-sentinels"]) < want_sentinels:
                    return False
                replicas = [as_dict(r) for r in wire.redis_command(
                    s.addr, s.port, "SENTINEL", "replicas", MASTER_NAME)]
                healthy = [r for r in replicas if r.get("flags") == "slave"
                           and r.get("master-link-status") == "ok"]
                if len(healthy) < want_replicas:
                    return False
            return True

        wait_for(agreed, timeout, f"the Sentinels to know each other and see {want_replicas} "
                 "replica(s) healthy")

    def wait_for_new_primary(self, old, timeout=60):
        """Waits until the Sentinels report a primary other than `old` and that instance says
        it is a master; returns its name."""
        def promoted():
            now = self.primary()
            return now if now not in (None, old) and self.role(now) == "master" else None
        return wait_for(promoted, timeout, f"the Sentinels to promote a replica in place of {old}")

    def wait_replica_online(self, name, timeout=60):
        """Waits until `name` is a replica whose link to the primary is up and in sync."""
        r = self.redis(name)

        def online():
            info = wire.redis_info(r.addr, r.port)
            return (info.get("role") == "slave" and info.get("master_link_status") == "up"
                    and info.get("master_sync_in_progress") == "0")
        wait_for(online, timeout, f"{name} to be an online replica")
