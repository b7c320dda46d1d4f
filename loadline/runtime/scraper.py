"""Master-side scraper: the target's Prometheus /metrics (and any extra URLs) into server_metrics.csv.

Runs as one gevent greenlet inside the Locust master, so every wait (HTTP, sleep) yields to the
rest of the master. Each scrape of each URL becomes rows (ts, source, metric, labels, value) in
the long table SERVER_METRIC_COLUMNS (loadline.runtime.promtext). A failed scrape is one row
`loadline_scrape_error` (value 1, reason in the labels) plus one log line; it never stops the run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import gevent
from gevent.event import Event

from loadline.core.errors import UsageError
from loadline.core.runfolder import SERVER_METRIC_COLUMNS, SERVER_METRICS, CsvAppender
from loadline.runtime.promtext import SCRAPE_DURATION, SCRAPE_ERROR, error_row, iter_rows

log = logging.getLogger("loadline.runtime.scraper")

DEFAULT_INTERVAL_S = 2.0
DEFAULT_TIMEOUT_S = 2.0
MAX_BODY_BYTES = 20_000_000  # a /metrics page larger than this is a misconfigured URL, not metrics
MAX_RUNTIME_S = 7 * 24 * 3600.0  # loop bound: a week-long soak is the longest run we support


def parse_url_option(values: Iterable[str], bare_name: str = "target") -> dict[str, str]:
    """`NAME=URL` strings -> {name: url}; bare URLs are named bare_name, bare_name2, ..."""
    urls: dict[str, str] = {}
    bare = 0
    for raw in values:
        name, sep, url = raw.partition("=")
        if not sep or "://" in name:
            bare += 1
            name, url = (bare_name if bare == 1 else f"{bare_name}{bare}"), raw
        name, url = name.strip(), url.strip()
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"scrape URL must start with http:// or https:// (got {raw!r})")
        urls[name] = url
    return urls


def scrape_targets(option: str | None, host: str | None) -> dict[str, str]:
    """URLs to scrape: the target's own /metrics (named `target`) plus comma-separated NAME=URL extras.

    `--scrape-url none` turns scraping off; an extra named `target` replaces the default one.
    """
    text = (option or "").strip()
    if text.lower() in ("none", "off"):
        return {}
    urls: dict[str, str] = {}
    if host and host.startswith(("http://", "https://")):
        urls["target"] = host.rstrip("/") + "/metrics"
    urls.update(parse_url_option([part for part in text.split(",") if part.strip()], bare_name="extra"))
    return urls


# The scraper shares its event loop with the users' token reads (the master, or the one process of a
# local run): parsing a page holds that loop, and an engine's page takes 14 ms (the simulator's 287
# samples) to tens of ms (vLLM's histograms), longer than a token gap (10-25 ms, REFERENCE-serving.md),
# so every stream's bytes would wait in their sockets and merge. The parse hands the loop back this often,
# through a timer that the loop's poll of its sockets comes before. gevent.sleep(0) only queues a
# callback, and the loop runs up to 50 queued callbacks before it polls again (gevent's
# CALLBACK_CHECK_COUNT): a parse that slept 0 between its slices held the reads for all of its
# 11-14 ms (a local run at one user: the report said 'generator behind'). Measured with a socket fed
# every 0.5 ms beside 40 slices of 1 ms: sleep(0) or 1e-6 let it be read 0-2 times (the timer has
# expired before the poll), 1e-5 22 times, 1e-4 78 times (the parse then takes 1.6x as long in wall
# time, not in CPU: the loop sleeps in its poll meanwhile).
PARSE_SLICE_S = 0.001
IO_TURN_S = 1e-4


def _parse_yielding(text: str, ts: float, source: str) -> list[tuple]:
    rows: list[tuple] = []
    since = time.perf_counter()
    for row in iter_rows(text, ts, source):
        rows.append(row)
        if time.perf_counter() - since > PARSE_SLICE_S:
            gevent.sleep(IO_TURN_S)  # token reads first; the parse resumes at the next metric family
            since = time.perf_counter()
    return rows


@dataclass
class Scraper:
    """Scrape `urls` every `interval_s` into `run_dir`/server_metrics.csv until `stop()`."""

    run_dir: Path
    urls: dict[str, str]
    interval_s: float = DEFAULT_INTERVAL_S
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_runtime_s: float = MAX_RUNTIME_S
    scrapes: int = 0
    errors: int = 0
    _greenlet: gevent.Greenlet | None = field(default=None, repr=False)
    _stopping: Event | None = field(default=None, repr=False)
    _appender: CsvAppender | None = field(default=None, repr=False)
    _failing: set = field(default_factory=set, repr=False)  # log a failing URL once, not every interval

    def scrape_once(self) -> list[tuple]:
        """Fetch every URL once; returns (and writes) the rows."""
        # Imported at call time on purpose: requests loads urllib3's ssl helpers, and any process that
        # imports them before Locust's gevent monkey-patching (a test, a tool importing this module
        # first) then dies in ssl with a RecursionError. By the first scrape Locust has patched.
        import requests

        rows: list[tuple] = []
        for name, url in self.urls.items():
            ts = time.time()
            try:
                response = requests.get(url, timeout=self.timeout_s, headers={"Accept": "text/plain"})
                if response.status_code != 200:
                    raise RuntimeError(f"HTTP {response.status_code}")
                if len(response.content) > MAX_BODY_BYTES:
                    raise RuntimeError(f"body over {MAX_BODY_BYTES} bytes")
                got = _parse_yielding(response.text, ts, name)
                got.append((round(ts, 3), name, SCRAPE_DURATION, "{}", round(time.time() - ts, 4)))
                if name in self._failing:
                    self._failing.discard(name)
                    log.info("scrape of %s (%s) works again", name, url)
            except Exception as exc:  # noqa: BLE001 - any failure is data, never a crash of the run
                self.errors += 1
                reason = f"{type(exc).__name__}: {exc}"
                if name not in self._failing:
                    self._failing.add(name)
                    log.warning(
                        "scrape of %s (%s) failed: %s (recorded as %s; not repeated)", name, url, reason, SCRAPE_ERROR
                    )
                got = [error_row(ts, name, reason)]
            rows.extend(got)
        self.scrapes += 1
        if self._appender is not None:
            self._appender.write_rows(rows)
        return rows

    def _loop(self) -> None:
        deadline = time.monotonic() + self.max_runtime_s
        next_at = time.monotonic()
        assert self._stopping is not None  # start() made it before spawning this loop
        while time.monotonic() < deadline and not self._stopping.is_set():
            try:
                self.scrape_once()
            except Exception as exc:  # noqa: BLE001 - e.g. disk full: log and keep the run alive
                log.warning("scraper could not write rows: %s", exc)
            next_at += self.interval_s
            # never try to catch up with missed scrapes: one late scrape is better than a burst
            next_at = max(next_at, time.monotonic())
            self._stopping.wait(timeout=max(0.0, next_at - time.monotonic()))

    def start(self) -> Scraper:
        if self.interval_s <= 0:
            raise ValueError("scrape interval must be > 0 seconds")
        Path(self.run_dir).mkdir(parents=True, exist_ok=True)
        self._appender = CsvAppender(Path(self.run_dir) / SERVER_METRICS, SERVER_METRIC_COLUMNS)
        self._stopping = Event()
        self._greenlet = gevent.spawn(self._loop)
        return self

    def stop(self, final_scrape: bool = True) -> None:
        """Stop scraping, after one last scrape so counters cover the end of the last phase.

        Bounded: the loop gets one HTTP timeout per URL to finish, then it is killed; the final
        scrape is itself bounded by the same timeouts.
        """
        if self._greenlet is None:
            return
        assert self._stopping is not None  # start() made it with the greenlet
        self._stopping.set()
        self._greenlet.join(timeout=self.timeout_s * max(1, len(self.urls)) + 1.0)
        if not self._greenlet.dead:
            self._greenlet.kill(block=True, timeout=1.0)
        self._greenlet = None
        if final_scrape:
            try:
                self.scrape_once()
            except Exception as exc:  # noqa: BLE001
                log.warning("final scrape failed: %s", exc)
        if self._appender is not None:
            self._appender.close()


def start_scraper(
    run_dir: str | Path,
    urls: dict[str, str],
    interval_s: float = DEFAULT_INTERVAL_S,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Scraper:
    """Start scraping in a greenlet; returns the handle whose `stop()` ends it."""
    return Scraper(Path(run_dir), dict(urls), interval_s, timeout_s).start()
