"""spoold's command line: exit statuses for bad options (2) and for a server that cannot start
(1, with the reason on stderr), --help / --version, and SPOOLD_<NAME> environment variables
(the command line wins)."""

import os
import socket

from spoold_harness import SiteTestCase, Spoold, main, run_spoold


class CommandLineTest(SiteTestCase):
    def base(self, port="0"):
        return ["--port", port, "--bind", "127.0.0.1", "--root", self.site, "--store", self.store]

    def test_help_and_version(self):
        r = run_spoold(["--help"])
        self.assertEqual(r.returncode, 0, r)
        for option in ("--port", "--store", "--max-connections", "--grace", "--access-log",
                       "--node-name", "--drain-delay", "--store-replicas", "--store-connections",
                       "--store-replicas-timeout", "--trust-idle-timeout", "--loop-slice",
                       "redis-sentinel://"):
            self.assertIn(option, r.stdout)
        r = run_spoold(["--version"])
        self.assertEqual(r.returncode, 0, r)
        self.assertRegex(r.stdout, r"spoold \d+\.\d+")

    def test_bad_command_line_exits_2(self):
        for args in (["--no-such-option", "1"], ["--port", "70000"], ["--port", "abc"],
                     ["--threads", "0:x"], ["--max-body", "-5"], ["--idle-timeout"],
                     ["stray-argument"], ["--node-name", "bad name"], ["--node-name", ""],
                     ["--node-name", "n" * 65], ["--drain-delay", "x"],
                     ["--store-replicas", "-1"], ["--store-replicas-timeout", "0"],
                     ["--store-connections", "-1"], ["--store-connections", "100001"],
                     ["--trust-idle-timeout", "x"], ["--trust-idle-timeout", "-1"],
                     ["--loop-slice", "-1"], ["--loop-slice", "1000001"], ["--loop-slice", "1.5"],
                     ["--loop-slice", ""]):
            with self.subTest(args=args):
                r = run_spoold(self.base() + args)
                self.assertEqual(r.returncode, 2, r)
                self.assertNotEqual(r.stderr.strip(), "", r)
                self.assertNotIn("listening", r.stdout)

    def test_cannot_start_exits_1(self):
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = str(busy.getsockname()[1])
        cases = (
            ("port in use", self.base(port)),
            ("root missing", self.base() + ["--root", os.path.join(self.tmp.path, "nowhere")]),
            ("store spec malformed", self.base() + ["--store", "postgres://x"]),
            ("sentinel spec malformed", self.base() + ["--store", "redis-sentinel://host"]),
            ("replicas asked of SQLite", self.base() + ["--store-replicas", "1"]),
            ("no Redis connection allowed", self.base() + ["--store", "redis://127.0.0.1:1",
                                                           "--store-connections", "0"]),
        )
        try:
            for what, args in cases:
                with self.subTest(case=what):
                    r = run_spoold(args)
                    self.assertEqual(r.returncode, 1, r)
                    self.assertNotEqual(r.stderr.strip(), "", r)
        finally:
            busy.close()

    def test_unknown_model_refused(self):
        r = run_spoold(self.base() + ["--model", "no-such-model"])
        self.assertIn(r.returncode, (1, 2), r)
        self.assertIn("epoll", r.stderr)  # the message lists the known models

    def test_environment_variables_and_precedence(self):
        body = {"guest-name": "env", "guest-remarks": "x" * 40}
        # SPOOLD_MAX_BODY applies...
        with Spoold(self.site, self.store, env={"SPOOLD_MAX_BODY": "16"}) as server:
            self.assertEqual(server.post_form("/guestbook", body).status, 413)
        # ...unless the command line says otherwise.
        with Spoold(self.site, self.store, ["--max-body", "4096"],
                    env={"SPOOLD_MAX_BODY": "16"}) as server:
            self.assertEqual(server.post_form("/guestbook", body).status, 303)

    def test_startup_line_names_model_and_store(self):
        with Spoold(self.site, self.store) as server:
            line = next(l for l in server.out.lines if "listening on" in l)
            self.assertIn(f"http://127.0.0.1:{server.port}/", line)
            self.assertIn("model epoll", line)
            self.assertIn(self.store, line)


if __name__ == "__main__":
    main()
