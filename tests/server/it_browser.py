"""spoold in a real browser: headless Chromium driven through chromedriver with the W3C WebDriver
protocol (plain urllib). Signs the guestbook through its form and watches the dashboard's
charts move while background requests load the server.

Chromium and chromedriver are installed by scripts/install-deps.sh; if they are missing this
test fails (it does not skip), so a machine without them cannot pass for one that ran it."""

import json
import os
import shutil
import subprocess
import threading
import urllib.error
import urllib.request

from spoold_harness import (SCALE, Conn, ServerTestCase, TempDir, build_request, free_port, main,
                            wait_until)

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
CHROMEDRIVER_CANDIDATES = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")
ELEMENT_KEY = "element-6066-11e4-a52e-4f735466cecf"


def find_executable(candidates, name):
    for path in candidates:
        if os.access(path, os.X_OK):
            return path
    found = shutil.which(name)
    if found:
        return found
    raise AssertionError(f"{name} is missing (looked in {', '.join(candidates)} and PATH): "
                         f"run scripts/install-deps.sh (Debian packages chromium, chromium-driver)")


class WebDriverError(Exception):
    pass


class ChromeDriver:
    """A chromedriver process and one browser session, spoken to over HTTP/JSON."""

    def __init__(self, profile_dir):
        self.chromium = find_executable(CHROMIUM_CANDIDATES, "chromium")
        self.driver_exe = find_executable(CHROMEDRIVER_CANDIDATES, "chromedriver")
        self.port = free_port()
        self.log_path = os.path.join(profile_dir, "chromedriver.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([self.driver_exe, f"--port={self.port}"],
                                     stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.port}"
        self.session = None
        self.profile_dir = profile_dir
        wait_until(self._ready, 60, "chromedriver to answer /status")

    def _ready(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"chromedriver exited with {self.proc.returncode}: "
                                 f"{self.driver_log()}")
        try:
            return self.call("GET", "/status").get("ready", False)
        except (urllib.error.URLError, ConnectionError):
            return False

    def driver_log(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read()[-4000:].decode("utf-8", "replace")

    def call(self, method, path, payload=None, timeout=60):
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout * SCALE) as resp:
                body = json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as e:
            body = json.loads(e.read() or b"{}")
            raise WebDriverError(f"{method} {path}: {e.code} {body.get('value', body)}") from None
        return body.get("value", body)

    def start_session(self):
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": self.chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--no-first-run",
                         f"--user-data-dir={os.path.join(self.profile_dir, 'profile')}"],
            },
        }}}
        value = self.call("POST", "/session", caps, timeout=120)
        self.session = value["sessionId"]

    def s(self, method, path, payload=None):
        return self.call(method, f"/session/{self.session}{path}", payload)

    def navigate(self, url):
        self.s("POST", "/url", {"url": url})

    def find(self, css):
        return self.s("POST", "/element", {"using": "css selector", "value": css})[ELEMENT_KEY]

    def type_into(self, element, text):
        self.s("POST", f"/element/{element}/value", {"text": text})

    def click(self, element):
        self.s("POST", f"/element/{element}/click", {})

    def script(self, source, *args):
        return self.s("POST", "/execute/sync", {"script": source, "args": list(args)})

    def close(self):
        try:
            if self.session:
                self.call("DELETE", f"/session/{self.session}", timeout=30)
        except (WebDriverError, urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.log.close()


class BrowserTest(ServerTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.browser_tmp = TempDir("spoold-chromium-")
        try:
            cls.driver = ChromeDriver(cls.browser_tmp.path)
            cls.driver.start_session()
        except BaseException:
            if getattr(cls, "driver", None):
                cls.driver.close()
            cls.browser_tmp.close()
            super().tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            cls.driver.close()
            cls.browser_tmp.close()
        finally:
            super().tearDownClass()

    def url(self, path):
        return f"http://127.0.0.1:{self.server.port}{path}"

    def test_sign_the_guestbook(self):
        d = self.driver
        d.navigate(self.url("/guestbook"))
        count_before = int(d.script("return document.getElementById('visitor-count').textContent"))
        d.type_into(d.find("#guest-name"), "Chromium <b>bold</b>")
        d.type_into(d.find("#guest-remarks"), "Signed by a headless browser & WebDriver")
        d.click(d.find("#guest-submit"))

        # The 303 brings the browser back to /guestbook, where the new entry is listed.
        def entry_shown():
            texts = d.script(
                "return Array.from(document.querySelectorAll('#entries li'))"
                ".map(li => li.textContent)")
            return any("Chromium <b>bold</b>" in t and "headless browser & WebDriver" in t
                       for t in texts)

        wait_until(entry_shown, 30, "the new entry to appear in #entries")
        self.assertTrue(d.script("return location.pathname").endswith("/guestbook"))
        # The name was shown as text, not markup.
        self.assertEqual(d.script("return document.querySelectorAll('#entries b').length"), 0)
        count_after = int(d.script("return document.getElementById('visitor-count').textContent"))
        self.assertGreater(count_after, count_before)

    def test_dashboard_charts_move(self):
        d = self.driver
        d.navigate(self.url("/dashboard"))
        wait_until(lambda: d.script("return document.readyState") == "complete", 30,
                   "the dashboard to load")
        missing = [ident for ident in ("chart-threads", "chart-queue", "chart-rate",
                                       "rate-value", "samples")
                   if not d.script(f"return document.getElementById('{ident}') !== null")]
        self.assertEqual(missing, [], "elements missing from the dashboard")

        stop = threading.Event()
        load_errors = []

        def load():
            # Background requests so the request rate and the pool's counters move.
            try:
                while not stop.is_set():
                    with Conn(self.server.port) as c:
                        for i in range(50):
                            c.send(build_request("GET", "/guestbook" if i % 10 == 0
                                                 else f"/p{i % 20}.txt"))
                            c.read_final_response()
            except Exception as e:  # reported after the test
                load_errors.append(e)

        loaders = [threading.Thread(target=load) for _ in range(2)]
        for t in loaders:
            t.start()
        try:
            samples = ("return parseInt(document.getElementById('samples').textContent, 10)")
            points = ("var svg = document.querySelector('#chart-rate svg') || "
                      "document.getElementById('chart-rate');"
                      "var el = svg.querySelector('polyline, path');"
                      "return el ? (el.getAttribute('points') || el.getAttribute('d') || '') : '';")
            wait_until(lambda: (d.script(samples) or 0) >= 1, 30, "a first sample")
            first_samples = d.script(samples)
            first_points = d.script(points)
            wait_until(lambda: d.script(samples) >= first_samples + 2, 30,
                       "#samples to grow by 2 (the dashboard polls /api/stats)")
            wait_until(lambda: d.script(points) != first_points, 30,
                       "the chart-rate polyline/path to change")
            self.assertNotEqual(d.script(points), "")
            rate = d.script("return document.getElementById('rate-value').textContent")
            self.assertRegex(rate, r"\d")
        finally:
            stop.set()
            for t in loaders:
                t.join()
        self.assertEqual(load_errors, [])
        # The page's own requests reached /api/stats.
        self.assertGreater(self.server.metrics()['spoold_requests_total{code="200"}'], 0)


if __name__ == "__main__":
    main()
