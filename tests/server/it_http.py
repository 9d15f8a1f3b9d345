"""spoold over raw sockets: every status code, traversal attempts, keep-alive, pipelining, HEAD,
ranges, conditional requests and 100-continue."""

from spoold_harness import (BIG_SIZE, DOTFILE_MARKER, HELLO, OUTSIDE_MARKER, SCALE, Conn,
                            ServerTestCase, build_request, main, raw_exchange, site_file)

MAX_BODY = 4096


class StatusTest(ServerTestCase):
    server_args = ("--max-body", str(MAX_BODY))

    def raw(self, data, method="GET"):
        return raw_exchange(self.server.port, data, method=method)

    def test_200_with_validators(self):
        resp = self.server.get("/hello.txt")
        self.assertEqual(resp.status, 200, resp)
        self.assertEqual(resp.body, HELLO)
        self.assertTrue(resp.header("Content-Type", "").startswith("text/plain"), resp)
        self.assertEqual(resp.header("Content-Length"), str(len(HELLO)))
        self.assertIsNotNone(resp.header("ETag"), resp)
        self.assertIsNotNone(resp.header("Last-Modified"), resp)
        self.assertEqual(resp.header("Accept-Ranges"), "bytes")

    def test_200_large_file_via_sendfile(self):
        resp = self.server.get("/big.bin")
        self.assertEqual(resp.status, 200)
        self.assertEqual(len(resp.body), BIG_SIZE)
        self.assertEqual(resp.body, site_file(self.site, "big.bin"))

    def test_200_directory_index(self):
        resp = self.server.get("/sub/")
        self.assertEqual(resp.status, 200, resp)
        self.assertIn(b"sub index", resp.body)
        self.assertTrue(resp.header("Content-Type", "").startswith("text/html"), resp)

    def test_200_symlink_inside_root_is_followed(self):
        resp = self.server.get("/inner-link.txt")
        self.assertEqual(resp.status, 200, resp)
        self.assertEqual(resp.body, HELLO)

    def test_200_query_string_ignored_for_files(self):
        resp = self.server.get("/hello.txt?x=1&y=%20")
        self.assertEqual(resp.status, 200, resp)
        self.assertEqual(resp.body, HELLO)

    def test_200_percent_encoded_path(self):
        resp = self.server.get("/%68ello.txt")
        self.assertEqual(resp.status, 200, resp)
        self.assertEqual(resp.body, HELLO)

    def test_301_directory_without_slash(self):
        resp = self.server.get("/sub")
        self.assertEqual(resp.status, 301, resp)
        self.assertTrue(resp.header("Location", "").endswith("/sub/"), resp)

    def test_303_guestbook_post(self):
        resp = self.server.post_form("/guestbook", {"guest-name": "Ada",
                                                    "guest-remarks": "status test"})
        self.assertEqual(resp.status, 303, resp)
        self.assertEqual(resp.header("Location"), "/guestbook")

    def test_304_if_none_match(self):
        etag = self.server.get("/hello.txt").header("ETag")
        resp = self.server.get("/hello.txt", {"If-None-Match": etag})
        self.assertEqual(resp.status, 304, resp)
        self.assertEqual(resp.body, b"")
        self.assertEqual(resp.header("ETag"), etag)
        # A list containing the tag matches as well; a different tag does not.
        resp = self.server.get("/hello.txt", {"If-None-Match": f'"nope", {etag}'})
        self.assertEqual(resp.status, 304, resp)
        resp = self.server.get("/hello.txt", {"If-None-Match": '"nope"'})
        self.assertEqual(resp.status, 200, resp)
        self.assertEqual(resp.body, HELLO)

    def test_304_if_modified_since(self):
        last_modified = self.server.get("/hello.txt").header("Last-Modified")
        resp = self.server.get("/hello.txt", {"If-Modified-Since": last_modified})
        self.assertEqual(resp.status, 304, resp)
        self.assertEqual(resp.body, b"")
        # A date long before the file's mtime: modified since then.
        resp = self.server.get("/hello.txt", {"If-Modified-Since": "Sun, 06 Nov 1994 08:49:37 GMT"})
        self.assertEqual(resp.status, 200, resp)
        self.assertEqual(resp.body, HELLO)

    def test_304_on_large_file(self):
        etag = self.server.get("/big.bin", method="HEAD").header("ETag")
        resp = self.server.get("/big.bin", {"If-None-Match": etag})
        self.assertEqual(resp.status, 304, resp)

    def test_400_malformed_request_line(self):
        for bad in (b"GARBAGE\r\n\r\n", b"GET\r\nHost: x\r\n\r\n", b"GET /  HTTP/1.1 extra\r\nHost: x\r\n\r\n",
                    b"GET HTTP/1.1\r\nHost: x\r\n\r\n",   # no path (ZeroHTTPd crashed on this)
                    b"GET hello.txt HTTP/1.1\r\nHost: x\r\n\r\n",  # not origin-form
                    b" GET / HTTP/1.1\r\nHost: x\r\n\r\n"):
            with self.subTest(request=bad):
                resp = self.raw(bad)
                self.assertEqual(resp.status, 400, resp)
        self.assert_still_serving()

    def test_400_bad_header(self):
        for bad in (b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n",
                    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n",
                    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n: empty-name\r\n\r\n",
                    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
                    b"POST /guestbook HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                    b"Content-Length: 4\r\n\r\nabcd"):
            with self.subTest(request=bad):
                resp = self.raw(bad)
                self.assertEqual(resp.status, 400, resp)
        self.assert_still_serving()

    def test_400_bad_percent_escape(self):
        for path in ("/%zz", "/hello%2", "/%", "/a%G0.txt"):
            with self.subTest(path=path):
                resp = self.server.get(path)
                self.assertEqual(resp.status, 400, resp)

    def test_400_missing_host_on_http11(self):
        resp = self.raw(b"GET /hello.txt HTTP/1.1\r\nConnection: close\r\n\r\n")
        self.assertEqual(resp.status, 400, resp)
        # HTTP/1.0 does not need Host.
        resp = self.raw(b"GET /hello.txt HTTP/1.0\r\n\r\n")
        self.assertEqual(resp.status, 200, resp)
        self.assertEqual(resp.body, HELLO)

    def test_403_symlink_leaving_root(self):
        for path in ("/escape.txt", "/escape-dir/secret.txt"):
            with self.subTest(path=path):
                resp = self.server.get(path)
                self.assertEqual(resp.status, 403, resp)
                self.assertNotIn(OUTSIDE_MARKER, resp.body)

    def test_404(self):
        resp = self.server.get("/no-such-file.txt")
        self.assertEqual(resp.status, 404, resp)
        self.assertTrue(resp.header("Content-Type", "").startswith("text/html"), resp)
        self.assertIn(b"404", resp.body)

    def test_405_with_allow(self):
        resp = self.server.get("/hello.txt", method="DELETE")
        self.assertEqual(resp.status, 405, resp)
        self.assertEqual(set(a.strip() for a in resp.header("Allow", "").split(",")),
                         {"GET", "HEAD"})
        resp = self.server.get("/guestbook", method="PUT", body=b"x")
        self.assertEqual(resp.status, 405, resp)
        self.assertEqual(set(a.strip() for a in resp.header("Allow", "").split(",")),
                         {"GET", "HEAD", "POST"})
        for path in ("/metrics", "/healthz", "/api/stats"):
            with self.subTest(path=path):
                resp = self.server.get(path, method="POST", body=b"a=b",
                                       headers={"Content-Type": "application/x-www-form-urlencoded"})
                self.assertEqual(resp.status, 405, resp)
                self.assertIn("GET", resp.header("Allow", ""))

    def test_413_body_over_max_body(self):
        # Only the head: the server must answer from Content-Length without waiting for a body.
        with Conn(self.server.port) as c:
            c.send(f"POST /guestbook HTTP/1.1\r\nHost: x\r\n"
                   f"Content-Type: application/x-www-form-urlencoded\r\n"
                   f"Content-Length: {MAX_BODY + 1}\r\n\r\n")
            resp = c.read_final_response()
            self.assertEqual(resp.status, 413, resp)
        # And with the whole body sent.
        body = b"guest-name=x&guest-remarks=" + b"y" * MAX_BODY
        resp = self.server.get("/guestbook", method="POST", body=body,
                               headers={"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual(resp.status, 413, resp)
        self.assert_still_serving()

    def test_414_long_request_line(self):
        resp = self.raw(b"GET /" + b"a" * 10000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(resp.status, 414, resp)
        self.assert_still_serving()

    def test_415_json_post(self):
        resp = self.server.get("/guestbook", method="POST",
                               body=b'{"guest-name": "a", "guest-remarks": "b"}',
                               headers={"Content-Type": "application/json"})
        self.assertEqual(resp.status, 415, resp)

    def test_416_unsatisfiable_range(self):
        resp = self.server.get("/hello.txt", {"Range": "bytes=100000-"})
        self.assertEqual(resp.status, 416, resp)
        self.assertEqual(resp.header("Content-Range"), f"bytes */{len(HELLO)}")

    def test_431_too_many_headers(self):
        head = b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n"
        head += b"".join(b"X-Filler-%d: v\r\n" % i for i in range(200))
        resp = self.raw(head + b"\r\n")
        self.assertEqual(resp.status, 431, resp)
        self.assert_still_serving()

    def test_431_huge_header(self):
        resp = self.raw(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nX-Big: " + b"v" * 20000 + b"\r\n\r\n")
        self.assertEqual(resp.status, 431, resp)
        self.assert_still_serving()

    def test_431_head_larger_than_the_input_buffer(self):
        # Far more than a connection buffers (the largest request plus a read), in one write:
        # the answer is 431 at once, never a wait for bytes that could not be stored.
        with Conn(self.server.port) as c:
            c.send(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nX-Big: " + b"v" * (512 * 1024))
            resp = c.read_final_response()
            self.assertEqual(resp.status, 431, resp)
            self.assertEqual(resp.header("Connection"), "close")
            self.assertEqual(c.read_to_eof(), b"")
        self.assert_still_serving()

    def test_501_unknown_method(self):
        resp = self.raw(b"FOO /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(resp.status, 501, resp)
        self.assert_still_serving()

    def test_505_unsupported_version(self):
        # HTTP/1.2 is not here: a later HTTP/1 minor version is served as HTTP/1.1
        # (Rfc9112Test.test_http_1_2_is_served_as_http_1_1).
        for line in (b"GET / HTTP/2.0", b"GET / HTTP/0.9"):
            with self.subTest(line=line):
                resp = self.raw(line + b"\r\nHost: x\r\n\r\n")
                self.assertEqual(resp.status, 505, resp)
        self.assert_still_serving()

    def test_error_responses_close_the_connection(self):
        with Conn(self.server.port) as c:
            c.send(b"FOO / HTTP/1.1\r\nHost: x\r\n\r\n")
            resp = c.read_final_response()
            self.assertEqual(resp.status, 501)
            self.assertEqual(resp.header("Connection"), "close")
            self.assertTrue(c.closed_by_peer())

    def test_zerohttpd_crashers(self):
        # A 1,100-byte path (a fixed buffer overflow in ZeroHTTPd): a clean 404.
        # (404, or 414 where a name is longer than the file system allows).
        for path in ("/" + "p" * 1100, "/" + "d/" * 550, "/sub/" + "%41" * 1100):
            resp = self.server.get(path)
            self.assertIn(resp.status, (404, 414), resp)
        # A 3,000-byte form field: a clean 400 (too long) -- never a crash.
        resp = self.server.post_form("/guestbook", {"guest-name": "n" * 3000,
                                                    "guest-remarks": "r"})
        self.assertEqual(resp.status, 400, resp)
        resp = self.server.post_form("/guestbook", {"guest-name": "n",
                                                    "guest-remarks": "r" * 3000})
        self.assertEqual(resp.status, 400, resp)
        self.assert_still_serving()


class TraversalTest(ServerTestCase):
    """Nothing outside the root, no dotfile, whatever the encoding."""

    ATTEMPTS = (
        "/../../etc/hostname",
        "/../outside/secret.txt",
        "/%2e%2e/%2e%2e/etc/hostname",
        "/%2e%2e/outside/secret.txt",
        "/..%2f..%2fetc/hostname",
        "/..%2foutside%2fsecret.txt",
        "/%2E%2E%2Foutside%2Fsecret.txt",
        "/sub/../../outside/secret.txt",
        "/sub/%2e%2e/%2e%2e/outside/secret.txt",
        "/%252e%252e/%252e%252e/etc/hostname",      # double-encoded
        "/%252e%252e%252foutside%252fsecret.txt",
        "/..%252foutside%252fsecret.txt",
        "/.%2e/outside/secret.txt",
        "/..\\outside\\secret.txt",
        "/%00",
        "/hello.txt%00.html",
        "/index.html%00.txt",
        "/escape.txt",
        "/escape-dir/secret.txt",
        "/escape-dir/",
        "/.secret",
        "/sub/../.secret",
        "/%2esecret",
        "/./.secret",
        "//etc/hostname",
        "/sub//../../outside/secret.txt",
    )

    def test_traversal_never_reaches_outside(self):
        with open("/etc/hostname", "rb") as f:
            hostname = f.read()
        for path in self.ATTEMPTS:
            with self.subTest(path=path):
                resp = self.server.get(path)
                self.assertIn(resp.status, (400, 403, 404), resp)
                self.assertNotIn(OUTSIDE_MARKER, resp.body)
                self.assertNotIn(DOTFILE_MARKER, resp.body)
                self.assertNotEqual(resp.body, hostname)
        self.assert_still_serving()

    def test_raw_traversal_on_one_connection(self):
        # The same attempts with HTTP/1.0 and absolute-looking targets, sent byte for byte.
        for target in (b"/../../../../../../etc/hostname", b"/..%2f..%2f..%2fetc%2fhostname",
                       b"/%2e%2e%2f%2e%2e%2foutside/secret.txt"):
            with self.subTest(target=target):
                resp = raw_exchange(self.server.port, b"GET " + target + b" HTTP/1.0\r\n\r\n")
                self.assertIn(resp.status, (400, 403, 404), resp)
                self.assertNotIn(OUTSIDE_MARKER, resp.body)

    def test_directory_without_index(self):
        resp = self.server.get("/noindex/")
        self.assertIn(resp.status, (403, 404), resp)
        self.assertNotIn(b"file.txt", resp.body)  # no listing

    def test_dotfile_head(self):
        resp = self.server.get("/.secret", method="HEAD")
        self.assertIn(resp.status, (403, 404), resp)


class ConnectionTest(ServerTestCase):
    """Keep-alive, Connection: close, HTTP/1.0, pipelining, HEAD, 100-continue."""

    def test_keep_alive_several_requests(self):
        with Conn(self.server.port) as c:
            for i in range(5):
                c.send(build_request("GET", f"/p{i}.txt"))
                resp = c.read_final_response()
                self.assertEqual(resp.status, 200, resp)
                self.assertEqual(resp.body, f"file {i}\n".encode())
                self.assertNotEqual((resp.header("Connection") or "").lower(), "close")
            # Also a blocking route (the store, on the pool) and a large file on the same one.
            c.send(build_request("GET", "/guestbook"))
            self.assertEqual(c.read_final_response().status, 200)
            c.send(build_request("GET", "/big.bin"))
            resp = c.read_final_response()
            self.assertEqual(len(resp.body), BIG_SIZE)
            c.send(build_request("GET", "/hello.txt"))
            self.assertEqual(c.read_final_response().body, HELLO)

    def test_http10_without_keep_alive_closes(self):
        with Conn(self.server.port) as c:
            c.send(b"GET /hello.txt HTTP/1.0\r\n\r\n")
            resp = c.read_final_response()
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.version, "HTTP/1.1")
            self.assertEqual(resp.body, HELLO)
            self.assertTrue(c.closed_by_peer())

    def test_http10_with_keep_alive_stays_open(self):
        with Conn(self.server.port) as c:
            for _ in range(3):
                c.send(b"GET /hello.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
                resp = c.read_final_response()
                self.assertEqual(resp.status, 200)
                self.assertEqual((resp.header("Connection") or "").lower(), "keep-alive")
                self.assertEqual(resp.body, HELLO)

    def test_connection_close_honoured(self):
        with Conn(self.server.port) as c:
            c.send(build_request("GET", "/hello.txt", {"Connection": "close"}))
            resp = c.read_final_response()
            self.assertEqual(resp.status, 200)
            self.assertEqual((resp.header("Connection") or "").lower(), "close")
            self.assertTrue(c.closed_by_peer())

    def test_pipelining_twenty_in_order(self):
        reqs = []
        expect = []
        for i in range(20):
            # Interleave routes that run on the pool (guestbook, healthz) with static files,
            # so that a reply finished early cannot overtake one before it.
            if i % 5 == 2:
                reqs.append(build_request("GET", "/guestbook"))
                expect.append(("guestbook", None))
            elif i % 7 == 3:
                reqs.append(build_request("GET", "/healthz"))
                expect.append(("healthz", None))
            else:
                reqs.append(build_request("GET", f"/p{i}.txt"))
                expect.append(("file", f"file {i}\n".encode()))
        with Conn(self.server.port) as c:
            c.send(b"".join(reqs))
            for i, (kind, body) in enumerate(expect):
                resp = c.read_final_response()
                self.assertEqual(resp.status, 200, (i, resp))
                if kind == "file":
                    self.assertEqual(resp.body, body, i)
                elif kind == "guestbook":
                    self.assertIn(b'id="visitor-count"', resp.body, i)
                else:
                    self.assertIn(b"store:", resp.body, i)

    def test_pipelining_with_close_at_the_end(self):
        reqs = b"".join(build_request("GET", f"/p{i}.txt") for i in range(5))
        reqs += build_request("GET", "/p5.txt", {"Connection": "close"})
        reqs += build_request("GET", "/p6.txt")  # after close: never answered
        with Conn(self.server.port) as c:
            c.send(reqs)
            for i in range(6):
                resp = c.read_final_response()
                self.assertEqual(resp.body, f"file {i}\n".encode())
            self.assertEqual(c.read_to_eof(), b"")

    def test_pipelined_bodies_larger_than_the_input_buffer(self):
        # Four requests with 60 KB bodies and a last one, sent at once: more than a connection
        # buffers, so it must go back to the socket for the rest after answering the first
        # ones, whatever the model (each answer is a 405: static files take no POST).
        body = b"b" * 60000
        post = build_request("POST", "/hello.txt", {"Content-Type": "text/plain"}, body)
        with Conn(self.server.port) as c:
            c.send(post * 4 + build_request("GET", "/p1.txt", {"Connection": "close"}))
            for i in range(4):
                resp = c.read_final_response()
                self.assertEqual(resp.status, 405, (i, resp))
            resp = c.read_final_response()
            self.assertEqual(resp.status, 200, resp)
            self.assertEqual(resp.body, b"file 1\n")
            self.assertEqual(c.read_to_eof(), b"")

    def test_pipelined_error_stops_the_connection(self):
        reqs = build_request("GET", "/p0.txt") + b"BROKEN\r\n\r\n" + build_request("GET", "/p1.txt")
        with Conn(self.server.port) as c:
            c.send(reqs)
            self.assertEqual(c.read_final_response().body, b"file 0\n")
            self.assertEqual(c.read_final_response().status, 400)
            self.assertEqual(c.read_to_eof(), b"")

    def test_head(self):
        with Conn(self.server.port) as c:
            for path, size in (("/hello.txt", len(HELLO)), ("/big.bin", BIG_SIZE)):
                c.send(build_request("HEAD", path))
                resp = c.read_final_response("HEAD")
                self.assertEqual(resp.status, 200, resp)
                self.assertEqual(resp.header("Content-Length"), str(size))
            # No body bytes were sent: the next response starts right where the head ended.
            c.send(build_request("GET", "/p3.txt"))
            resp = c.read_final_response()
            self.assertEqual(resp.body, b"file 3\n")
            for path in ("/guestbook", "/metrics", "/healthz", "/api/stats"):
                c.send(build_request("HEAD", path))
                resp = c.read_final_response("HEAD")
                self.assertEqual(resp.status, 200, (path, resp))
                self.assertIsNotNone(resp.header("Content-Length"), (path, resp))
            c.send(build_request("GET", "/p4.txt"))
            self.assertEqual(c.read_final_response().body, b"file 4\n")

    def test_head_of_non_200_has_no_body(self):
        # 404, 403 and 301 answers to HEAD: head only, so the connection stays in step. (A
        # HEAD ignores Range, RFC 9110 14.2: 200.)
        for path, status, headers in (("/nope", 404, {}), ("/escape.txt", 403, {}),
                                      ("/sub", 301, {}),
                                      ("/hello.txt", 200, {"Range": "bytes=9999-"})):
            with self.subTest(path=path, status=status), Conn(self.server.port) as c:
                c.send(build_request("HEAD", path, headers))
                resp = c.read_final_response("HEAD")
                self.assertEqual(resp.status, status, resp)
                c.send(build_request("GET", "/p5.txt"))
                resp = c.read_final_response()
                self.assertEqual(resp.body, b"file 5\n", resp)

    def test_100_continue(self):
        body = b"guest-name=Continue&guest-remarks=sent+after+100"
        with Conn(self.server.port) as c:
            c.send(f"POST /guestbook HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                   f"Content-Type: application/x-www-form-urlencoded\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n")
            interim = c.read_response()
            self.assertEqual(interim.status, 100, interim)
            self.assertEqual(interim.version, "HTTP/1.1")
            c.send(body)
            resp = c.read_final_response()
            self.assertEqual(resp.status, 303, resp)
        page = self.server.get("/guestbook").body
        self.assertIn(b"sent after 100", page)


class RangeTest(ServerTestCase):
    """Ranges on a large file (the sendfile path) and a small one (the cache path)."""

    def check_ranges(self, path):
        data = site_file(self.site, path.lstrip("/"))
        size = len(data)
        cases = (("bytes=0-9", 0, 9), ("bytes=10-", 10, size - 1), ("bytes=-5", size - 5, size - 1),
                 (f"bytes={size - 3}-{size + 100}", size - 3, size - 1), ("bytes=5-5", 5, 5))
        with Conn(self.server.port) as c:
            for spec, first, last in cases:
                with self.subTest(path=path, range=spec):
                    c.send(build_request("GET", path, {"Range": spec}))
                    resp = c.read_final_response()
                    self.assertEqual(resp.status, 206, resp)
                    self.assertEqual(resp.header("Content-Range"), f"bytes {first}-{last}/{size}")
                    self.assertEqual(resp.header("Content-Length"), str(last - first + 1))
                    self.assertEqual(resp.body, data[first:last + 1])
            for spec in (f"bytes={size}-", f"bytes={size + 10}-{size + 20}"):
                with self.subTest(path=path, range=spec):
                    c.send(build_request("GET", path, {"Range": spec}))
                    resp = c.read_final_response()
                    self.assertEqual(resp.status, 416, resp)
                    self.assertEqual(resp.header("Content-Range"), f"bytes */{size}")
            # Still usable after a 416.
            c.send(build_request("GET", path, {"Range": "bytes=1-2"}))
            self.assertEqual(c.read_final_response().body, data[1:3])

    def test_ranges_large_file(self):
        self.check_ranges("/big.bin")

    def test_ranges_small_file(self):
        self.check_ranges("/hello.txt")

    def test_head_with_range(self):
        # RFC 9110 14.2: range handling is defined for GET only; a HEAD ignores Range and
        # describes the whole representation.
        resp = self.server.get("/big.bin", {"Range": "bytes=0-99"}, method="HEAD")
        self.assertEqual(resp.status, 200, resp)
        self.assertEqual(resp.header("Content-Length"), str(BIG_SIZE))
        self.assertEqual(resp.body, b"")

    def test_malformed_range_ignored_or_refused(self):
        # A syntactically invalid Range header is ignored (RFC 9110 14.2): full 200.
        resp = self.server.get("/hello.txt", {"Range": "pages=1-2"})
        self.assertEqual(resp.status, 200, resp)
        self.assertEqual(resp.body, HELLO)

    def test_if_range(self):
        first = self.server.get("/big.bin", method="HEAD")
        etag = first.header("ETag")
        resp = self.server.get("/big.bin", {"Range": "bytes=0-3", "If-Range": etag})
        self.assertEqual(resp.status, 206, resp)
        self.assertEqual(resp.body, site_file(self.site, "big.bin")[:4])
        resp = self.server.get("/big.bin", {"Range": "bytes=0-3", "If-Range": '"other"'})
        self.assertEqual(resp.status, 200, resp)
        self.assertEqual(len(resp.body), BIG_SIZE)


FORM_TYPE = b"Content-Type: application/x-www-form-urlencoded\r\n"
# Far above the socket timeouts below (Conn scales both by SCALE): an answer that comes is not
# the 408 of a timed-out head.
HEADER_TIMEOUT = 120


def chunked(body, sizes, ext=b""):
    """`body` in chunks of the given sizes (the rest in one more), then the last chunk."""
    out, pos = b"", 0
    for n in list(sizes) + [len(body)]:
        piece = body[pos:pos + n]
        if piece:
            out += b"%x%s\r\n%s\r\n" % (len(piece), ext, piece)
        pos += len(piece)
    return out + b"0\r\n"


class Rfc9112Test(ServerTestCase):
    """Request framing and head checks of RFC 9112: chunked bodies, Transfer-Encoding, Host,
    bare CR line ends, later HTTP/1 minor versions."""
    server_args = ("--max-body", str(MAX_BODY), "--header-timeout", str(HEADER_TIMEOUT * SCALE))

    def raw(self, data, method="GET"):
        return raw_exchange(self.server.port, data, method=method)

    def post_chunked(self, framing, extra_head=b""):
        return self.raw(b"POST /guestbook HTTP/1.1\r\nHost: x\r\n" + FORM_TYPE + extra_head +
                        b"Transfer-Encoding: chunked\r\n\r\n" + framing)

    def assert_in_guestbook(self, text):
        page = self.server.get("/guestbook")
        self.assertEqual(page.status, 200, page)
        self.assertIn(text.encode(), page.body)

    def test_chunked_guestbook_post_is_stored(self):
        body = b"guest-name=Chunky&guest-remarks=sent+in+chunks+7d1f"
        resp = self.post_chunked(chunked(body, [5, 1, 20]) + b"\r\n")
        self.assertEqual(resp.status, 303, resp)
        self.assertEqual(resp.header("Location"), "/guestbook")
        self.assert_in_guestbook("sent in chunks 7d1f")

    def test_chunked_with_extensions_and_trailers(self):
        body = b"guest-name=Ext&guest-remarks=extensions+and+trailers+41c9"
        framing = (chunked(body, [10, 10], ext=b';name=value ; q="a \\" b"') +
                   b"X-Checksum: 42\r\nX-Other: y\r\n\r\n")
        # Keep-alive, with a second request pipelined behind the body: the trailer section
        # ends the first request exactly.
        with Conn(self.server.port) as c:
            c.send(b"POST /guestbook HTTP/1.1\r\nHost: x\r\n" + FORM_TYPE +
                   b"Transfer-Encoding: chunked\r\n\r\n" + framing +
                   b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
            resp = c.read_final_response()
            self.assertEqual(resp.status, 303, resp)
            resp = c.read_final_response()
            self.assertEqual(resp.status, 200, resp)
            self.assertEqual(resp.body, HELLO)
        self.assert_in_guestbook("extensions and trailers 41c9")

    def test_chunked_with_100_continue(self):
        with Conn(self.server.port) as c:
            c.send(b"POST /guestbook HTTP/1.1\r\nHost: x\r\n" + FORM_TYPE +
                   b"Expect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n")
            interim = c.read_response()
            self.assertEqual(interim.status, 100, interim)
            c.send(chunked(b"guest-name=Cont&guest-remarks=after+continue+9e2a", [7]) + b"\r\n")
            resp = c.read_final_response()
            self.assertEqual(resp.status, 303, resp)
        self.assert_in_guestbook("after continue 9e2a")

    def test_413_chunked_body_over_max_body(self):
        # One chunk announced larger than --max-body: refused from its size line, no data sent.
        with Conn(self.server.port) as c:
            c.send(b"POST /guestbook HTTP/1.1\r\nHost: x\r\n" + FORM_TYPE +
                   b"Transfer-Encoding: chunked\r\n\r\n%x\r\n" % (MAX_BODY + 1))
            resp = c.read_final_response()
            self.assertEqual(resp.status, 413, resp)
            self.assertEqual(resp.header("Connection"), "close")
        # Chunks that pass the limit only together.
        body = b"guest-name=x&guest-remarks=" + b"y" * MAX_BODY
        resp = self.post_chunked(chunked(body, [1000] * 5) + b"\r\n")
        self.assertEqual(resp.status, 413, resp)
        # Exactly the limit is taken (the form is then judged by the guestbook).
        body = b"guest-name=x&guest-remarks=" + b"y" * (MAX_BODY - 27)
        self.assertEqual(len(body), MAX_BODY)
        resp = self.post_chunked(chunked(body, [1000] * 3) + b"\r\n")
        self.assertNotEqual(resp.status, 413, resp)
        self.assert_still_serving()

    def test_400_malformed_chunked_framing(self):
        for framing in (b"zz\r\nab\r\n0\r\n\r\n",          # not a hex size
                        b"-5\r\nabcde\r\n0\r\n\r\n",         # signed size
                        b"3\r\nabcdef\r\n0\r\n\r\n",         # data longer than its size
                        b"3;=x\r\nabc\r\n0\r\n\r\n",         # extension without a name
                        b"3\r\nabc\r\n0\r\nbad trailer\r\n\r\n",
                        b"3\rabc\r0\r\r"):                    # bare CR line ends
            with self.subTest(framing=framing):
                resp = self.post_chunked(framing)
                self.assertEqual(resp.status, 400, resp)
                self.assertEqual(resp.header("Connection"), "close")
        self.assert_still_serving()

    def test_400_content_length_with_transfer_encoding(self):
        for heads in (b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
                      b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"):
            with self.subTest(heads=heads):
                resp = self.raw(b"POST /guestbook HTTP/1.1\r\nHost: x\r\n" + FORM_TYPE + heads +
                                b"\r\n0\r\n\r\n")
                self.assertEqual(resp.status, 400, resp)
                self.assertEqual(resp.header("Connection"), "close")
        self.assert_still_serving()

    def test_501_unknown_transfer_coding(self):
        for coding in (b"gzip", b"gzip, chunked", b"x-custom"):
            with self.subTest(coding=coding):
                resp = self.raw(b"POST /guestbook HTTP/1.1\r\nHost: x\r\n" + FORM_TYPE +
                                b"Transfer-Encoding: " + coding + b"\r\n\r\n0\r\n\r\n")
                self.assertEqual(resp.status, 501, resp)
                self.assertEqual(resp.header("Connection"), "close")
        self.assert_still_serving()

    def test_400_invalid_host(self):
        for host in (b"a b/c", b"a/b", b"user@h", b"h:80x", b"[::1"):
            with self.subTest(host=host):
                resp = self.raw(b"GET /hello.txt HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
                self.assertEqual(resp.status, 400, resp)
        for host in (b"example.com", b"127.0.0.1:8080", b"[::1]:8080"):
            with self.subTest(host=host):
                resp = self.raw(b"GET /hello.txt HTTP/1.1\r\nHost: " + host +
                                b"\r\nConnection: close\r\n\r\n")
                self.assertEqual(resp.status, 200, resp)
        # Missing Host on HTTP/1.1 stays a 400.
        resp = self.raw(b"GET /hello.txt HTTP/1.1\r\n\r\n")
        self.assertEqual(resp.status, 400, resp)
        self.assert_still_serving()

    def test_400_bare_cr_without_waiting_for_the_header_timeout(self):
        # No LF is ever sent: the answer must come from the bare CR itself. The socket timeout
        # (well under the server's header timeout) makes a server that waits fail the read.
        for data in (b"GET /hello.txt HTTP/1.1\rHost: x\r\r",
                     b"GET /hello.txt HTTP/1.1\r\nHost: x\rX-A: b\r\r"):
            with self.subTest(data=data):
                with Conn(self.server.port, timeout=HEADER_TIMEOUT / 4) as c:
                    c.send(data)
                    resp = c.read_final_response()
                    self.assertEqual(resp.status, 400, resp)
                    self.assertEqual(resp.header("Connection"), "close")
        # The CR ending one write, the byte after it in the next.
        with Conn(self.server.port, timeout=HEADER_TIMEOUT / 4) as c:
            # The server may read the two writes together or apart; either way the answer
            # comes without an LF.
            c.send(b"GET /hello.txt HTTP/1.1\r")
            c.send(b"Host: x\r\r")
            resp = c.read_final_response()
            self.assertEqual(resp.status, 400, resp)
        self.assert_still_serving()

    def test_http_1_2_is_served_as_http_1_1(self):
        with Conn(self.server.port) as c:
            for _ in range(2):  # kept alive, as HTTP/1.1 is by default
                c.send(b"GET /hello.txt HTTP/1.2\r\nHost: x\r\n\r\n")
                resp = c.read_final_response()
                self.assertEqual(resp.status, 200, resp)
                self.assertEqual(resp.version, "HTTP/1.1")
                self.assertEqual(resp.body, HELLO)
                self.assertNotEqual(resp.header("Connection"), "close")
        # An HTTP/1.1 request it is: Host is required.
        resp = self.raw(b"GET /hello.txt HTTP/1.2\r\n\r\n")
        self.assertEqual(resp.status, 400, resp)


if __name__ == "__main__":
    main()
