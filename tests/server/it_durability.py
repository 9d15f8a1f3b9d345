"""kill -9 durability: every post acknowledged with 303 is still there after spoold (and, for
Redis with appendfsync always, redis-server too) is killed with SIGKILL and restarted."""

import os
import threading
import unittest

from spoold_harness import (ConnectionClosed, Redis, Spoold, TempDir, entry_total, main,
                            make_site, page_entries, raise_nofile_limit, require_redis,
                            run_in_threads, scaled, sqlite_store)


class DurabilityTest(unittest.TestCase):
    def setUp(self):
        raise_nofile_limit()
        self.tmp = TempDir()
        self.site = make_site(self.tmp.path)

    def tearDown(self):
        self.tmp.close()

    def post_many(self, server, n, tag, threads_n=4):
        """n posts from threads_n threads; returns the remarks acknowledged with 303."""
        acked = []
        lock = threading.Lock()
        problems = []

        def worker(t):
            for i in range(t, n, threads_n):
                remarks = f"{tag}-{i}"
                try:
                    resp = server.post_form("/guestbook", {"guest-name": f"{tag}{t}",
                                                           "guest-remarks": remarks})
                except (OSError, ConnectionClosed) as e:
                    problems.append(e)
                    continue
                if resp.status == 303:
                    with lock:
                        acked.append(remarks)
                else:
                    problems.append(resp)

        run_in_threads(worker, threads_n)
        self.assertEqual(problems, [])
        return acked

    def check_all_present(self, server, acked):
        html = server.get("/guestbook").body.decode()
        self.assertEqual(entry_total(html), len(acked))
        shown = {r for _, r in page_entries(html)}
        self.assertEqual(set(acked) - shown, set())

    def test_sqlite_kill_9(self):
        n = scaled(80, 30)  # at most the 100 entries a page shows
        store = sqlite_store(self.tmp.path)
        server = Spoold(self.site, store).start()
        acked = self.post_many(server, n, "sq")
        self.assertEqual(len(acked), n)
        server.kill()
        with Spoold(self.site, store) as server:
            self.check_all_present(server, acked)

    def test_redis_kill_9_both(self):
        require_redis()
        n = scaled(80, 30)
        data = os.path.join(self.tmp.path, "redis")
        os.makedirs(data)
        redis = Redis(data, durable=True).start()
        try:
            server = Spoold(self.site, redis.spec()).start()
            acked = self.post_many(server, n, "rd")
            self.assertEqual(len(acked), n)
            server.kill()
            redis.kill()
            redis = Redis(data, port=redis.port, durable=True).start()
            self.assertEqual(redis.command("LLEN", "guestbook_remarks"), n)
            with Spoold(self.site, redis.spec()) as server:
                self.check_all_present(server, acked)
        finally:
            redis.stop()


if __name__ == "__main__":
    main()
