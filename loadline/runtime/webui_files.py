"""The web UI's downloads: the report of the run (built on demand, cached) and the run folder as a zip.

The report is built by `loadline report` in a child process: pandas and matplotlib in the master
would hold its event loop (worker heartbeats, record batches) for seconds. The page polls a
progress message until the build is done. A built report is served again until new records arrive.
The zip is streamed file by file (a long run's requests.csv is hundreds of MB): run folders hold no
secrets (the API key never reaches them). Only the columnar copy of requests.csv is left out: the
same rows again, which the report reads from the CSV when the copy is absent.
"""

from __future__ import annotations

import html
import subprocess
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from flask import Response, request, send_file

from loadline.core import columnar_copy, runfolder
from loadline.core.childpython import PYTHON
from loadline.runtime.webui import run_dir_of

BUILD_TIMEOUT_S = 600.0  # a day-long soak's report takes minutes; beyond this the build is stopped
PROGRESS_REFRESH_S = 2  # how often the progress page asks again
ZIP_CHUNK = 1 << 20


@dataclass
class Build:
    """One `loadline report` child: which run, with how many records, started when."""

    run_dir: Path
    records: int
    process: subprocess.Popen
    log: Path
    started: float = field(default_factory=time.monotonic)
    started_wall: float = field(default_factory=time.time)
    number: int = 0

    def finished(self) -> bool:
        if self.process.poll() is None and time.monotonic() - self.started > BUILD_TIMEOUT_S:
            self.process.kill()
            self.process.wait()
        return self.process.poll() is not None

    def error(self) -> str | None:
        """None when this build wrote the report: whatever its exit code says (1 = an SLO failed, 2 = numbers
        not trustworthy), the report itself explains it."""
        page = report_page(self.run_dir)
        try:
            if page.stat().st_mtime >= self.started_wall - 1.0:  # a coarse file clock: a second of slack
                return None
        except OSError:
            pass
        lines = self.log.read_text(errors="replace").strip().splitlines() if self.log.exists() else []
        return lines[-1] if lines else f"loadline report exited with {self.process.returncode}"


def report_page(run_dir: Path) -> Path:
    return run_dir / runfolder.REPORT_DIR / "report.html"


class ReportBuilds:
    """At most one build at a time; the last finished one is served until the run has new records."""

    def __init__(self, environment) -> None:
        self.environment = environment
        self.current: Build | None = None
        self.done: Build | None = None
        self._count = 0

    def records(self) -> int:
        return len(getattr(self.environment, "loadline_live", None) or ())

    def respond(self, asked_build: int | None) -> Response:
        run_dir = run_dir_of(self.environment)
        if run_dir is None:
            return Response("no run yet\n", status=404, mimetype="text/plain")
        if self.current is not None and self.current.finished():
            self.done, self.current = self.current, None
        done = self.done
        fresh = (
            done is not None
            and done.run_dir == run_dir
            and (done.records == self.records() or asked_build == done.number)
        )
        if fresh and self.current is None:
            assert done is not None  # fresh says so
            error = done.error()
            if error:
                return Response(f"could not build the report: {error}\n", status=500, mimetype="text/plain")
            return send_file(report_page(run_dir), mimetype="text/html", max_age=0)
        if self.current is None:
            self.current = self._start(run_dir)
        return self._progress(self.current)

    def _start(self, run_dir: Path) -> Build:
        # no --slo: the report judges with the SLO the run recorded at its start (manifest `slo`)
        cmd = [*PYTHON, "-m", "loadline", "report", str(run_dir)]
        log = run_dir / runfolder.REPORT_DIR / "webui-build.log"  # what `loadline report` said, kept with the report
        log.parent.mkdir(parents=True, exist_ok=True)
        self._count += 1
        with log.open("wb") as out:  # a file, not a pipe: a chatty build must never block on a full pipe
            process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return Build(run_dir, self.records(), process, log, number=self._count)

    def _progress(self, build: Build) -> Response:
        seconds = time.monotonic() - build.started
        body = (
            f"<!doctype html><html><head><meta charset='utf-8'>"
            f"<meta http-equiv='refresh' content='{PROGRESS_REFRESH_S};url=./report?build={build.number}'>"
            f"<title>Building the report…</title></head><body style='font-family:Roboto,Arial,sans-serif;"
            f"padding:2em'><h2>Building the Loadline report…</h2><p id='progress'>Run folder "
            f"{html.escape(str(build.run_dir))}: {build.records:,} request records, {seconds:.0f} s so far. "
            f"This page opens the report when it is ready.</p></body></html>"
        )
        return Response(body, status=202, mimetype="text/html")


def zip_stream(run_dir: Path) -> Iterator[bytes]:
    """The run folder as a zip, yielded in chunks as it is written (zipfile writes data descriptors
    on a stream that cannot seek, so nothing is held in memory but a chunk)."""
    sink = _Chunks()
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(p for p in run_dir.rglob("*") if p.is_file() and p.suffix != columnar_copy.SUFFIX):
            with (
                path.open("rb") as source,
                archive.open(f"{run_dir.name}/{path.relative_to(run_dir)}", "w", force_zip64=True) as target,
            ):
                while chunk := source.read(ZIP_CHUNK):
                    target.write(chunk)
                    yield sink.take()
            yield sink.take()
    yield sink.take()


class _Chunks:
    """A write-only, non-seekable file for zipfile that hands out what was written so far."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._written = 0

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        self._written += len(data)
        return len(data)

    def tell(self) -> int:
        return self._written

    def flush(self) -> None:
        pass

    def close(self) -> None:  # typeshed's zipfile asks for it; zipfile never closes a file it was handed
        pass

    def take(self) -> bytes:
        data, self._parts = b"".join(self._parts), []
        return data


def install(environment) -> ReportBuilds:
    app = environment.web_ui.app
    builds = ReportBuilds(environment)

    @app.route("/loadline/report")
    def _report():
        return builds.respond(request.args.get("build", type=int))

    @app.route("/loadline/run.zip")
    def _run_zip():
        run_dir = run_dir_of(environment)
        if run_dir is None or not run_dir.is_dir():
            return Response("no run yet\n", status=404, mimetype="text/plain")
        return Response(
            zip_stream(run_dir),
            mimetype="application/zip",
            headers={"Content-Disposition": f'attachment; filename="{run_dir.name}.zip"'},
        )

    return builds
