"""The guestbook on the embedded SQLite store: round trip, escaping, validation, visitor
counter, concurrency, and persistence across a restart on the same database file."""

import os

from spoold_harness import (GuestbookChecks, ServerTestCase, SiteTestCase, Spoold, entry_total,
                            main, page_entries, visitor_count)


class GuestbookSqliteTest(GuestbookChecks, ServerTestCase):
    server_args = ("--threads", "2:8")


class SqliteRestartTest(SiteTestCase):
    def test_entries_survive_restart(self):
        with Spoold(self.site, self.store) as server:
            for i in range(5):
                resp = server.post_form("/guestbook", {"guest-name": f"persist{i}",
                                                       "guest-remarks": f"kept across restarts {i}"})
                self.assertEqual(resp.status, 303, resp)
            count = visitor_count(server.get("/guestbook").body.decode())
        self.assertTrue(os.path.exists(self.store[len("sqlite:"):]))
        with Spoold(self.site, self.store) as server:
            html = server.get("/guestbook").body.decode()
            self.assertEqual(entry_total(html), 5)
            self.assertEqual([n for n, _ in page_entries(html)], [f"persist{i}" for i in range(5)])
            self.assertEqual(visitor_count(html), count + 1)

    def test_unwritable_database_fails_to_start_or_answers_503(self):
        # A database path in a directory that does not exist: spoold either refuses to start
        # (exit 1 with a reason) or starts and answers the guestbook with 503.
        bad = "sqlite:" + os.path.join(self.tmp.path, "missing-dir", "g.db")
        server = Spoold(self.site, bad)
        try:
            server.start()
        except AssertionError as e:
            self.assertIn("exit 1", str(e))
            return
        try:
            resp = server.get("/guestbook")
            self.assertEqual(resp.status, 503, resp)
            self.assertEqual(server.get("/hello.txt").status, 200)
            self.assertIn(b"store: down", server.get("/healthz").body)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
