"""The web UI's "LLM" tab: live TTFT / ITL / tokens/s, the current phase and the run folder.

Built on Locust's extension points (template_args extended_tabs/tables/csv_files and an
`extended_stats` field added to /stats/requests), so the stock React UI renders it. Its tables
show text only: the live charts and the SLO panel are a page of their own (webui_live.py), which an
injected script embeds above this table; the report and the zip are webui_files.py's. Here: the
table, the requests.csv route, and a start form that remembers the last values.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from flask import Response, request, send_file

from loadline.core import runfolder
from loadline.core.errors import UsageError
from loadline.core.judge import NOT_JUDGED, PASSED, Check, Judgement, judge, judges_itl, values_of
from loadline.core.runsettings import streaming_of_options
from loadline.core.slo import SLO
from loadline.runtime import refusal
from loadline.runtime.collector import ENDED_BY_USER
from loadline.runtime.live import window
from loadline.runtime.timeline import current_phase
from loadline.runtime.webui_form import restore_option_names
from loadline.runtime.webui_secrets import hide_secrets

TAB = "llm"
WINDOW_S = 30.0


def _fmt(value, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}{unit}"
    return f"{value}{unit}"


def _current_phase() -> str:
    phase = current_phase()
    return phase.get("label", "-") if phase else "-"


_whole_cache: dict = {}
WHOLE_RUN_REFRESH_S = 5.0


def _whole_run(environment, start: float, end: float, itl: bool = False):
    """The whole-run window, recomputed at most every few seconds: it reads every record so far, and
    every open browser polls it every second on the master's event loop."""
    now = time.monotonic()
    key = (id(environment.loadline_live), start)
    cached = _whole_cache.get(key)
    # an empty whole run is not kept: it would show "-" beside a last-window column that has numbers
    has_data = cached is not None and cached[1] is not None and getattr(cached[1], "requests", 0) > 0
    if cached and has_data and (end == cached[2] or now - cached[0] < WHOLE_RUN_REFRESH_S):
        return cached[1]
    _whole_cache.clear()
    summary = window(environment, start, end, itl)
    _whole_cache[key] = (now, summary, end)
    return summary


def table_rows(environment) -> list[dict]:
    run_dir = run_dir_of(environment)
    span = _run_span(run_dir, time.time())
    recent = whole = None
    if getattr(environment, "loadline_live", None) is not None and span is not None:
        # Rates divide by the window's length: never count time before the run started or after it ended.
        # live.window speaks model time in a time-scaled rehearsal, like the report.
        start, end = span
        itl = wants_itl(environment)
        recent = window(environment, max(start, end - WINDOW_S), end, itl)
        whole = _whole_run(environment, start, end, itl)

    def both(attr: str, unit: str = "") -> dict:
        return {"last": _approx(recent, attr, unit), "run": _approx(whole, attr, unit)}

    refused = refusal.reason(environment)
    rows = [
        *([{"metric": "Could not start", "last": refused, "run": ""}] if refused else []),
        {"metric": "Phase", "last": _current_phase(), "run": ""},
        {"metric": "Users running", "last": _fmt(environment.runner.user_count), "run": ""},
        {"metric": "Requests (finished)", **both("requests")},
        {"metric": "Requests/s (ok)", **both("rps")},
        {"metric": "Output tokens/s", **both("output_tokens_per_s")},
        {"metric": "TTFT p50", **both("ttft_p50_ms", " ms")},
        {"metric": "TTFT p95", **both("ttft_p95_ms", " ms")},
        {"metric": "TTFT p99", **both("ttft_p99_ms", " ms")},
        {"metric": "ITL p50 (median of requests)", **both("itl_p50_ms", " ms")},
        {"metric": "E2E p50", **both("e2e_p50_ms", " ms")},
        {"metric": "E2E p95", **both("e2e_p95_ms", " ms")},
        {"metric": "E2E p99", **both("e2e_p99_ms", " ms")},
        {"metric": "Error rate", "last": _pct(recent), "run": _pct(whole)},
        {"metric": "Errors by class", "last": _classes(recent), "run": _classes(whole)},
        *_approx_note(recent, whole),
        {"metric": "Load generator (self-check)", **_generator(environment)},
        {"metric": "Run folder", "last": str(run_dir or "-"), "run": ""},
    ]
    return rows + slo_rows(environment, recent, whole)


def _generator(environment) -> dict:
    """Each worker's CPU and loop lag now, and who was saturated during the run (runtime/selfcheck.py);
    a saturated generator's latencies are its own, so the row says so while the run goes."""
    writer = getattr(environment, "loadline_generator_writer", None)
    if writer is None:
        return {"last": "-", "run": ""}
    once = sorted(writer.saturated_once)
    return {"last": writer.status(), "run": f"saturated: {', '.join(once)}" if once else "not saturated"}


def slo_rows(environment, recent, whole) -> list[dict]:
    """One row per SLO criterion that applies, judged by the report's judge (loadline/core/judge.py)."""
    options = environment.parsed_options
    try:
        slo = _slo(getattr(options, "slo_file", "") or "")
    except UsageError as exc:
        return [{"metric": "SLO", "last": str(exc), "run": ""}]
    streaming = streaming_of_options(options)
    judged = [_judge(slo, summary, streaming) for summary in (recent, whole)]
    reference = judged[1] or judged[0] or judge(slo, {}, streaming)
    rows = [
        {"metric": f"SLO {c.name} {c.threshold}", "last": _verdict(judged[0], c.key), "run": _verdict(judged[1], c.key)}
        for c in reference.checks
    ]
    rows += [{"metric": f"SLO {name}: not applied", "last": why, "run": ""} for name, why in reference.not_applied]
    return rows


_slo_cache: dict[str, SLO] = {}


def wants_itl(environment) -> bool:
    """Pooled ITL percentiles only when the SLO judges ITL (they parse every gap of every reply)."""
    options = environment.parsed_options
    try:
        return judges_itl(_slo(getattr(options, "slo_file", "") or ""), streaming_of_options(options))
    except UsageError:
        return False


def active_slo(environment) -> SLO:
    """The SLO of the run (--slo-file, else the built-in defaults); UsageError on a bad file."""
    return _slo(getattr(environment.parsed_options, "slo_file", "") or "")


def run_dir_of(environment) -> Path | None:
    """The run folder of the run in progress, else of the last one (None before any run)."""
    collector = getattr(environment, "loadline_collector", None)
    return getattr(collector, "run_dir", None) or getattr(collector, "last_run_dir", None)


def _slo(path: str) -> SLO:
    if path not in _slo_cache:
        _slo_cache[path] = SLO.from_file(path or None)
    return _slo_cache[path]


def _judge(slo: SLO, summary, streaming: bool) -> Judgement | None:
    if summary is None:
        return None
    return judge(slo, values_of(summary), streaming)


def _verdict(judgement: Judgement | None, key: str) -> str:
    check: Check | None = next((c for c in judgement.checks if c.key == key), None) if judgement else None
    if check is None:
        return "-"
    if check.outcome == NOT_JUDGED:
        return "not judged (no data)"
    value = f"{check.measured:.2%}" if check.unit == "fraction" else f"{check.measured:,.0f} ms"
    return f"{value} {'ok' if check.outcome == PASSED else 'FAIL'}"


def _run_span(run_dir: Path | None, now: float) -> tuple[float, float] | None:
    """(start, end) wall clock of the run in progress, or of the last one (from its manifest) once stopped."""
    active = runfolder.active()
    if active is not None:
        return active.started_wall, now
    if run_dir is None:
        return None
    try:
        manifest = json.loads((run_dir / runfolder.MANIFEST).read_text())
        return float(manifest["started_at"]), float(manifest.get("ended_at") or now)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _approx(window, attr: str, unit: str) -> str:
    """A value; a percentile read from the live view's folded histograms (loadline/runtime/live.py) gets "≈"."""
    text = _fmt(getattr(window, attr, None), unit)
    return f"≈ {text}" if attr.endswith("_ms") and text != "-" and getattr(window, "approx_pct", None) else text


def _approx_note(recent, whole) -> list[dict]:
    """The footnote of "≈": past the last minutes, the live view keeps histograms, not every request."""
    notes = {
        key: f"≈ percentiles within {window.approx_pct:g} %: older minutes are kept as histograms"
        for key, window in (("last", recent), ("run", whole))
        if getattr(window, "approx_pct", None)
    }
    return [{"metric": "≈", "last": notes.get("last", ""), "run": notes.get("run", "")}] if notes else []


def _pct(window) -> str:
    return "-" if window is None else f"{window.error_rate * 100:.2f} %"


def _classes(window) -> str:
    if window is None or not window.errors_by_class:
        return "-"
    return ", ".join(f"{k}: {v}" for k, v in sorted(window.errors_by_class.items()))


def install_tab(environment) -> None:
    web_ui = environment.web_ui
    app = web_ui.app
    restore_option_names(environment)  # before hide_secrets: it reads the options by their own names
    hide_secrets(environment)
    remember_form_values(environment)
    web_ui.template_args["extended_tabs"] = [{"title": "LLM", "key": TAB}]
    web_ui.template_args["extended_tables"] = [
        {
            "key": TAB,
            "structure": [
                {"key": "metric", "title": "Metric"},
                {"key": "last", "title": f"Last {WINDOW_S:.0f} s"},
                {"key": "run", "title": "Whole run"},
            ],
        }
    ]
    web_ui.template_args["extended_csv_files"] = [
        {"href": "/loadline/live", "title": "Live LLM charts and the SLO as it stands (also in the LLM tab)"},
        {"href": "/loadline/report", "title": "Build and open the Loadline report of the run"},
        {"href": "/loadline/requests.csv", "title": "Download the request records (requests.csv) of the run"},
        {"href": "/loadline/run.zip", "title": "Download the run folder (zip)"},
    ]

    @app.after_request
    def _add_llm_table(response):
        if request.path != "/stats/requests" or not response.is_json:
            return response
        data = response.get_json()
        data["extended_stats"] = [{"key": TAB, "data": table_rows(environment)}]
        response.set_data(json.dumps(data))
        return response

    @app.before_request
    def _note_stop_by_user():
        # Locust's STOP button (POST /stop): the run did not end on its own, and its manifest says so
        collector = getattr(environment, "loadline_collector", None)
        if (
            request.method == "POST"
            and request.path.endswith("/stop")
            and collector is not None
            and collector.run_dir is not None
        ):
            collector.ended_by = ENDED_BY_USER

    @app.route("/loadline/requests.csv")
    def _requests_csv():
        run_dir = run_dir_of(environment)
        if run_dir is None or not (run_dir / runfolder.REQUESTS).exists():
            return Response("no run yet\n", status=404, mimetype="text/plain")
        return send_file(run_dir / runfolder.REQUESTS, mimetype="text/csv", as_attachment=True)


def remember_form_values(environment) -> None:
    """The start form shows the values of the last start, not the command line's.

    Locust copies the submitted form into `parsed_options` but fills the form from the command line
    again on every page load (argument_parser.ui_extra_args_dict): a reload forgot what was typed.
    Secrets stay empty (webui_secrets.py)."""
    web_ui = environment.web_ui
    refresh = web_ui.update_template_args

    def refresh_with_last_values() -> None:
        refresh()
        options = environment.parsed_options
        for name, option in (web_ui.template_args.get("extra_options") or {}).items():
            value = getattr(options, name, None)
            if option.get("is_secret") or not isinstance(value, (str, int, float, bool)):
                continue
            option["default_value"] = value

    web_ui.update_template_args = refresh_with_last_values
    refresh_with_last_values()
