"""The web UI's live LLM view: the charts' series, the SLO as it stands, and the page that draws them.

Routes (on Locust's Flask app, master or local runner):
- /loadline/live    a self-contained page (charts on <canvas>, no CDN: the machines have no internet;
                    its files, live.css and live.js beside it, are package data: webui_page.py)
- /loadline/series  the charts' points (loadline/runtime/series.py), every ~2 s, model time when scaled
- /loadline/status  each SLO criterion judged on the last 30 s by the report's judge, the phase and
                    time left in it, the stepped stop rule's state, and the stop reason of a stopped run
- /loadline/ui.js   injected into Locust's own page: the live view embedded in the LLM tab, the shapes'
                    one-line summaries in the class picker, the custom parameters in groups (webui_form.py)

Everything reads the master's live records (loadline.runtime.live), not Locust's stats: a "reset
stats" in the UI changes nothing here, and `--processes N` / workers look the same as one process.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import gevent
from flask import Response, jsonify, request

from loadline.core import runfolder
from loadline.core.judge import NOT_JUDGED, PASSED, judge, values_of
from loadline.core.runsettings import model_span, streaming_of_options, time_scale_of_options
from loadline.core.slo import SLO
from loadline.runtime import refusal
from loadline.runtime.live import window
from loadline.runtime.series import SAMPLE_S, PhaseSpan, Series
from loadline.runtime.timeline import active_timeline, current_phase
from loadline.runtime.webui import WINDOW_S, active_slo, run_dir_of, wants_itl
from loadline.runtime.webui_form import form_groups
from loadline.runtime.webui_page import asset, mimetype

log = logging.getLogger("loadline")


class Sampler:
    """One greenlet per web UI: a new Series when a run starts, a point every SAMPLE_S while it runs."""

    def __init__(self, environment) -> None:
        self.environment = environment
        self.series: Series | None = None
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> Sampler:
        self._greenlet = gevent.spawn(self._forever)
        return self

    def _forever(self) -> None:
        while True:
            gevent.sleep(SAMPLE_S)
            try:
                self.tick(time.time())
            except KeyboardInterrupt:
                # Ctrl-C (SIGINT) lands in whichever greenlet runs, often this busy one: hand it to
                # the main greenlet, where Locust stops the test, instead of gevent printing it as a crash
                gevent.get_hub().parent.throw(KeyboardInterrupt())
            except Exception:  # noqa: BLE001 - a chart must never take the master's loop down
                log.exception("loadline: web UI series sample failed")

    def tick(self, now: float) -> None:
        active = runfolder.active()
        series = self.series
        if active is None:
            if series is not None and series.ended_wall is None:
                series.finish(now, _phase_spans())
            return
        if series is None or series.started_wall != active.started_wall:
            environment = self.environment
            series = self.series = Series(
                active.started_wall,
                time_scale_of_options(environment.parsed_options),
                lambda start, end, itl: window(environment, start, end, itl),
            )
        phase = current_phase()
        runner = self.environment.runner
        series.sample(now, int(getattr(runner, "user_count", 0) or 0), phase["label"] if phase else "", _phase_spans())


def _phase_spans() -> list[PhaseSpan]:
    """The run's phases so far (finished ones and the open one), from the shape's timeline."""
    timeline = active_timeline()
    if timeline is None:
        return []
    rows = [*timeline.rows, *([timeline.open] if timeline.open is not None else [])]
    return [PhaseSpan(row.label, row.kind, row.start_wall, row.end_wall) for row in rows]


def status(environment, now: float) -> dict:
    """The SLO as it stands (last WINDOW_S seconds), the phase, the stop rule and the stop reason."""
    options = environment.parsed_options
    active = runfolder.active()
    run_dir = run_dir_of(environment)
    manifest = _manifest(run_dir)
    scale = time_scale_of_options(options)
    started = active.started_wall if active else float(manifest.get("started_at") or 0) or None
    ended = None if active else manifest.get("ended_at")
    end = now if active else float(ended or now)
    summary = window(environment, max(started, end - WINDOW_S), end, wants_itl(environment)) if started else None
    return {
        "state": getattr(environment.runner, "state", ""),
        "running": active is not None,
        "run_dir": str(run_dir) if run_dir else None,
        "scale": scale,
        "window_s": WINDOW_S,
        "users": int(getattr(environment.runner, "user_count", 0) or 0),
        "requests_recorded": len(getattr(environment, "loadline_live", None) or ()),
        "phase": _phase_status(now, scale),
        "slo": _slo_status(environment, summary),
        "stop_rule": _stop_rule(environment),
        "stop_reason": manifest.get("stop_reason") if not active else None,
        "ended": ended is not None,
        "ended_by": manifest.get("ended_by") if not active else None,
        "start_refused": refusal.reason(environment),
    }


def _phase_status(now: float, scale: float) -> dict | None:
    phase = current_phase()
    if phase is None:
        return None
    left_wall = max(0.0, phase["planned_s"] - (now - phase["start_wall"]))
    return {
        "label": phase["label"],
        "kind": phase["kind"],
        "index": phase["index"] + 1,
        "of": phase["phases"],
        "target_users": phase["target_users"],
        "left_s": model_span(left_wall, scale),
    }


def _slo_status(environment, summary) -> dict:
    try:
        slo: SLO = active_slo(environment)
    except Exception as exc:  # noqa: BLE001 - a bad SLO file is shown, not raised (UsageError)
        return {"error": str(exc), "checks": [], "not_applied": []}
    judgement = judge(
        slo, values_of(summary) if summary is not None else {}, streaming_of_options(environment.parsed_options)
    )
    checks = []
    for check in judgement.checks:
        if check.measured is None:
            value = "no data"
        elif check.unit == "fraction":
            value = f"{check.measured:.2%}"
        else:
            value = f"{check.measured:,.0f} ms"
        checks.append(
            {
                "key": check.key,
                "name": check.name,
                "threshold": check.threshold,
                "limit": check.limit,
                "unit": check.unit,
                "value": value,
                "outcome": "not judged"
                if check.outcome == NOT_JUDGED
                else ("pass" if check.outcome == PASSED else "fail"),
            }
        )
    return {
        "file": getattr(environment.parsed_options, "slo_file", "") or "(built-in defaults)",
        "checks": checks,
        "not_applied": [{"name": n, "why": why} for n, why in judgement.not_applied],
    }


def _stop_rule(environment) -> dict | None:
    shape = getattr(environment, "shape_class", None)
    state = getattr(shape, "stop_rule_state", None)
    return state() if callable(state) else None


def _manifest(run_dir: Path | None) -> dict:
    if run_dir is None:
        return {}
    try:
        return json.loads((run_dir / runfolder.MANIFEST).read_text())
    except (OSError, ValueError):
        return {}


def shape_summaries(environment) -> dict[str, str]:
    """Class picker name -> the first line of the shape's docstring (shapes/catalog.py's summary rule)."""
    found = {}
    for name, cls in (getattr(environment, "available_shape_classes", None) or {}).items():
        doc = (getattr(cls, "__doc__", "") or "").strip()
        found[name] = doc.split("\n", 1)[0].strip()
    return found


def install(environment) -> Sampler:
    app = environment.web_ui.app
    sampler = Sampler(environment).start()
    environment.loadline_sampler = sampler

    @app.route("/loadline/live")
    def _live_page():
        return Response(asset("live.html"), mimetype="text/html")

    @app.route("/loadline/live.css")
    @app.route("/loadline/live.js")
    def _live_files():
        name = request.path.rsplit("/", 1)[-1]
        return Response(asset(name), mimetype=mimetype(name))

    @app.route("/loadline/series")
    def _series():
        series = sampler.series
        if series is None:  # no run yet: the axis of this server's time scale, nothing on it
            return jsonify(
                {
                    "points": [],
                    "phases": [],
                    "started_wall": None,
                    "sample_s": SAMPLE_S,
                    "scale": time_scale_of_options(environment.parsed_options),
                }
            )
        since = request.args.get("since", type=float)
        return jsonify(series.as_json(since))

    cache: dict = {}

    @app.route("/loadline/status")
    def _status():
        # Judging ITL parses every gap of the last 30 s: every open page polls, they share one answer per tick
        now = time.monotonic()
        if cache.get("at", -SAMPLE_S) <= now - SAMPLE_S / 2:
            data = status(environment, time.time())
            slo = data["slo"]
            slo["limits"] = {c["key"]: c["limit"] for c in slo["checks"] if c["unit"] == "ms"}  # the charts' lines
            cache.update(at=now, data=data)
        return jsonify(cache["data"])

    @app.route("/loadline/ui.js")
    def _ui_js():
        summaries = json.dumps(shape_summaries(environment))
        groups = json.dumps(form_groups(list(environment.web_ui.template_args.get("extra_options") or {})))
        script = asset("ui.js").replace("__SHAPE_SUMMARIES__", summaries).replace("__FORM_GROUPS__", groups)
        return Response(script, mimetype="text/javascript")

    @app.after_request
    def _inject_ui_script(response):
        # Locust's single page (index.html) gets our script: the live view inside the LLM tab.
        if request.path == "/" and response.mimetype == "text/html" and not response.direct_passthrough:
            page = response.get_data(as_text=True)
            if "</body>" in page:
                response.set_data(page.replace("</body>", '<script src="./loadline/ui.js"></script></body>', 1))
        return response

    return sampler
