"""The fleet's balancer: HAProxy in front of the nodes (its config from configs.py), and its
view of them, read from its stats page's CSV."""

import os
import subprocess
import urllib.request

from processes import FleetError, find_program, wait_for


class Balancer:
    """HAProxy on layout.haproxy, its stats on layout.stats, run as a process of `processes`
    with its config in state_dir/conf/haproxy.cfg."""

    def __init__(self, layout, processes, state_dir):
        self.layout = layout
        self.processes = processes
        self.dir = state_dir

    @property
    def url(self):
        return f"http://{self.layout.haproxy.text}/"

    @property
    def stats_url(self):
        return f"http://{self.layout.stats.text}/"

    def start(self, timeout=30):
        """Checks the config (`haproxy -c`), starts HAProxy and waits for its stats page."""
        p = self.processes[self.layout.haproxy.name]
        cfg = os.path.join(self.dir, "conf", "haproxy.cfg")
        check = subprocess.run([find_program("haproxy"), "-c", "-q", "-f", cfg],
                               capture_output=True, text=True)
        if check.returncode != 0:
            raise FleetError(f"haproxy -c rejects {cfg}:\n{check.stdout}{check.stderr}")
        p.start([find_program("haproxy"), "-db", "-f", cfg], self.dir, self.layout.haproxy.ns)
        wait_for(lambda: self.node_states(), timeout, f"HAProxy's stats on {self.stats_url} "
                 f"(log: {p.log})")

    def node_states(self, backend="spoold"):
        """{node name: HAProxy's status of it ("UP", "DOWN", "UP 1/2", "NOLB", "MAINT", ...)}
        in `backend` ("spoold": every request; "guestbook": the nodes that reach the store),
        from the stats page's CSV."""
        with urllib.request.urlopen(self.stats_url + ";csv", timeout=5) as r:
            text = r.read().decode()
        lines = text.splitlines()
        header = lines[0].lstrip("# ").split(",")
        out = {}
        for line in lines[1:]:
            row = dict(zip(header, line.split(",")))
            if row.get("pxname") == backend and row.get("svname") not in ("FRONTEND", "BACKEND"):
                out[row["svname"]] = row["status"]
        return out

    def wait_node_state(self, name, states, timeout=30, backend="spoold"):
        """Waits until HAProxy's status of node `name` in `backend` is one of `states`."""
        wait_for(lambda: self.node_states(backend).get(name) in states, timeout,
                 f"HAProxy to report {name} as {'/'.join(states)} in backend {backend}",
                 interval=0.02)

    def wait_up(self, name, timeout=30):
        """Waits until HAProxy reports node `name` UP in both backends."""
        for backend in ("spoold", "guestbook"):
            self.wait_node_state(name, ("UP",), timeout, backend)
