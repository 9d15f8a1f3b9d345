"""cluster/fleet.py's command line, as the Makefile's cluster targets run it: up, status,
rolling-restart and down, on a 127.x.y.0/24 block and ports of its own (so it never meets a
`make cluster` or another run of this test) and a temporary state directory.

Checks: up returns with the fleet answering through HAProxy (every node named in the
Spoold-Node header, a post stored); a second up is refused; status lists every process;
rolling-restart replaces every node's process and leaves all UP; down stops every process it
started and nothing else (a pid file naming a live process that is not the one it started is
left alone); afterwards status reports nothing running. With --netns (make cluster NETNS=1, as
root): every part runs in a namespace of its own, exec runs a command in the client's, where
the fleet answers, and down removes every namespace up made.
"""

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "..", "..", "cluster")
sys.path.insert(0, CLUSTER)
import fleet  # noqa: E402
import netns  # noqa: E402
import wire  # noqa: E402

PYTHON = sys.executable or "python3"


def run_cli(*args, timeout=180):
    return subprocess.run([PYTHON, os.path.join(CLUSTER, "fleet.py"), *args],
                          capture_output=True, text=True, timeout=timeout)


def request(addr, port, method, path, body=None):
    status, headers, data = wire.request(addr, port, method, path, body)
    return status, headers.get("Spoold-Node"), data


class FleetCommandLine(unittest.TestCase):
    def setUp(self):
        spoold = os.environ.get("SPOOLD", "")
        self.assertTrue(os.access(spoold, os.X_OK), f"env SPOOLD must name spoold ({spoold!r})")
        self.tmp = tempfile.mkdtemp(prefix="spoold-fleet-cli-")
        self.dir = os.path.join(self.tmp, "state")
        self.prefix = f"127.{random.randint(100, 254)}.{random.randint(1, 254)}"
        self.common = ["--dir", self.dir]
        self.up_args = ["up", *self.common, "--nodes", "2", "--spoold", spoold, "--prefix",
                        self.prefix, "--free-ports"]
        if os.environ.get("SPOOLD_SITE"):
            self.up_args += ["--site", os.environ["SPOOLD_SITE"]]
        self.stranger = None

    def tearDown(self):
        # Whatever the test did: stop what the fleet started, then the stranger process.
        if os.path.exists(os.path.join(self.dir, "state.json")):
            fleet.Fleet.attach(self.dir).stop()
        if self.stranger is not None:
            self.stranger.kill()
            self.stranger.wait()
        if not os.environ.get("SPOOLD_KEEP_TMP"):
            shutil.rmtree(self.tmp, ignore_errors=True)

    def pids(self, f):
        return {e.name: f.proc(e.name).pid() for e in f.layout.endpoints() if e.name != "stats"}

    def test_up_status_rolling_restart_down(self):
        up = run_cli(*self.up_args)
        self.assertEqual(up.returncode, 0, up.stdout + up.stderr)
        f = fleet.Fleet.attach(self.dir)
        self.assertIn(f.url, up.stdout)
        self.assertIn(os.path.join(self.dir, "logs"), up.stdout)
        h = f.layout.haproxy
        self.assertTrue(h.addr.startswith(self.prefix + "."))

        # Through HAProxy: both nodes answer (round robin, no cookie sent), a post is stored.
        seen = set()
        for _ in range(6):
            status, node, _ = request(h.addr, h.port, "GET", "/")
            self.assertEqual(status, 200)
            seen.add(node)
        self.assertEqual(seen, {"web1", "web2"})
        body = urllib.parse.urlencode({"guest-name": "cli", "guest-remarks": "through haproxy",
                                       "post-key": "fleet-cli-1"})
        status, _, _ = request(h.addr, h.port, "POST", "/guestbook", body)
        self.assertEqual(status, 303)
        status, _, page = request(h.addr, h.port, "GET", "/guestbook")
        self.assertEqual(status, 200)
        self.assertIn(b"through haproxy", page)

        again = run_cli(*self.up_args)
        self.assertEqual(again.returncode, 1, again.stdout + again.stderr)
        self.assertIn("already runs", again.stderr)

        status = run_cli("status", *self.common)
        self.assertEqual(status.returncode, 0, status.stderr)
        self.assertIn("9 of 9 processes running", status.stdout)
        self.assertEqual(len(re.findall(r"HAProxy: UP", status.stdout)), 2, status.stdout)
        self.assertIn("(the Sentinels' primary)", status.stdout)

        before = self.pids(f)
        self.assertTrue(all(before.values()), before)
        rolled = run_cli("rolling-restart", *self.common)
        self.assertEqual(rolled.returncode, 0, rolled.stdout + rolled.stderr)
        after = self.pids(f)
        for name in ("web1", "web2"):
            self.assertNotEqual(before[name], after[name], f"{name} was not restarted")
            self.assertIsNotNone(after[name])
        for name in ("haproxy", "redis1", "redis2", "redis3", "sentinel1", "sentinel2",
                     "sentinel3"):
            self.assertEqual(before[name], after[name], f"{name} should not have restarted")
        self.assertEqual(f.balancer.node_states(), {"web1": "UP", "web2": "UP"})

        # A pid file that names a live process we did not start (its start time differs):
        # down must leave that process alone.
        self.stranger = subprocess.Popen(["sleep", "300"])
        web2 = f.proc("web2")
        with open(web2.pidfile) as pf:
            real_pid, _ = pf.read().split()
        os.kill(int(real_pid), signal.SIGKILL)
        f.proc("web2").wait_exit(10)
        with open(web2.pidfile, "w") as pf:
            pf.write(f"{self.stranger.pid} 1\n")

        down = run_cli("down", *self.common)
        self.assertEqual(down.returncode, 0, down.stdout + down.stderr)
        self.assertNotIn("web2", down.stdout)
        self.assertIsNone(self.stranger.poll(), "down killed a process it had not started")
        for name in after:
            if name != "web2":
                self.assertIsNone(f.proc(name).pid(), f"{name} still runs after down")
                self.assertIn(name, down.stdout)
        status = run_cli("status", *self.common)
        self.assertIn("0 of 9 processes running", status.stdout)

    def test_netns_up_exec_down(self):
        self.assertEqual(os.geteuid(), 0, "--netns makes network namespaces: run as root")
        up = run_cli("up", *self.common, "--netns", "--nodes", "1", "--replicas", "1",
                     "--spoold", os.environ["SPOOLD"])
        self.assertEqual(up.returncode, 0, up.stdout + up.stderr)
        f = fleet.Fleet.attach(self.dir)
        self.assertTrue(f.layout.client_ns, f.layout)
        namespaces = [e.ns for e in f.layout.endpoints()] + [f.layout.client_ns]
        self.assertEqual(len(set(namespaces)), len(namespaces) - 1)  # stats is HAProxy's
        self.assertTrue(f.url.startswith("http://10.77.0."), f.url)
        self.assertIn(f"exec -- curl {f.url}", up.stdout)
        # The fleet is reached from the client's namespace (nothing here talks to its
        # addresses from the machine's own network, whose default route leads out).
        fetch = run_cli("exec", *self.common, "--", PYTHON, "-c",
                        "import sys, urllib.request; "
                        "print(urllib.request.urlopen(sys.argv[1], timeout=10).status)", f.url)
        self.assertEqual((fetch.returncode, fetch.stdout.strip()), (0, "200"), fetch.stderr)
        status = run_cli("status", *self.common)
        self.assertEqual(status.returncode, 0, status.stderr)
        self.assertIn("8 of 8 processes running", status.stdout)  # and the network lab
        self.assertIn("HAProxy: UP", status.stdout)
        down = run_cli("down", *self.common)
        self.assertEqual(down.returncode, 0, down.stdout + down.stderr)
        self.assertIn(fleet.LAB_PROCESS, down.stdout)
        left = [ns for ns in netns.namespaces() if ns in namespaces]
        self.assertEqual(left, [], "down left namespaces behind")


if __name__ == "__main__":
    unittest.main(verbosity=2)
