"""Open-loop load against the simulator: the rate is kept, the arrivals fit their process,
two workers offer what one process offers, and an overloaded server shows coordinated omission.

Time-scaled runs of the tiny profile (configs/sim/tiny.toml: its 8-sequence batch carries ~14
requests/s of model time). Rates are model requests/s; the wire carries them x --time-scale.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from loadline.simulator.config import build_config
from loadline.simulator.costmodel import step_seconds
from tests.ks import exponential_cdf, ks_pvalue
from tests.spine_helpers import loadline, requests_table
from tests.surfaces import assert_surfaces_agree

pytestmark = pytest.mark.e2e

SCALE = 5.0
RUN_LOGS: dict[Path, str] = {}  # each run's log (stderr), for the surfaces check
RATE = 4.0  # model requests/s: well below the tiny engine's ~14/s
TINY = ["--sim-profile", "tiny", "--time-scale", f"{SCALE:g}"]
SHORT = ["--prompt-mix", "short=1", "--max-tokens", "16"]


def run(tmp_path: Path, *args: str, report: bool = True) -> tuple[Path, dict]:
    """A finished run and its verdict; the exit code is not asserted (a saturated generator may make
    the report's validity section refuse a PASS, which is not what these tests are about)."""
    done = loadline("run", *TINY, "--out", str(tmp_path), *(["--no-charts"] if report else ["--no-report"]), *args)
    assert done.stdout.strip(), done.stderr[-3000:]
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    RUN_LOGS[run_dir] = done.stderr
    assert (run_dir / "requests.csv").exists(), done.stderr[-3000:]
    verdict = json.loads((run_dir / "report" / "verdict.json").read_text()) if report else {}
    return run_dir, verdict


# timing-exact (the achieved rate within 2 %): alone, as tests/run_shards.py runs such tests; beside
# three other test processes on two cores the 2-worker case once read 4.10/s for 4.0/s
@pytest.mark.exclusive
@pytest.mark.parametrize("workers", [0, 2])
def test_below_capacity_the_rate_is_kept(tmp_path, workers):
    # constant arrivals: the count is exact, so the achieved rate must be within 2 % of the target
    run_dir, verdict = run(
        tmp_path,
        "--rate",
        f"{RATE:g}",
        "--arrival",
        "constant",
        "--run-time",
        "12s",
        "--workers",
        str(workers),
        "--",
        *SHORT,
    )
    (phase,) = verdict["open_loop"]["phases"]
    assert phase["target_rate"] == RATE
    assert phase["achieved_rate"] == pytest.approx(RATE, rel=0.02)
    offered = next(c for c in verdict["slo"]["criteria"] if c["name"] == "arrival rate offered")
    assert offered["passed"] is True and offered["measured"] == pytest.approx(1.0, abs=0.02)
    if workers:
        assert requests_table(run_dir)["worker_id"].nunique() == workers  # the rate was split, not doubled


# Not exclusive: the schedule's due times are the scheduler's own sums of drawn gaps
# (loadline/client/users/arrivals.py), whatever the CPU; a busy machine sends them late (lateness_ms),
# it does not move them
@pytest.mark.parametrize("workers", [0, 2])
def test_below_capacity_arrivals_are_poisson(tmp_path, workers):
    # the gaps of the schedule (all workers merged) are exponential at the target rate
    run_dir, _ = run(
        tmp_path, "--rate", f"{RATE:g}", "--run-time", "12s", "--workers", str(workers), "--", *SHORT, report=False
    )
    due = np.sort(requests_table(run_dir).query("attempt == 0")["due_wall"].to_numpy())
    assert len(due) > 150
    assert ks_pvalue(np.diff(due), exponential_cdf(RATE * SCALE)) > 0.01


def test_above_capacity_latency_from_due_grows_while_latency_from_sent_does_not(tmp_path):
    # 2x the engine's capacity, at most one batch in flight: the server never queues, the generator does
    run_dir, verdict = run(
        tmp_path, "--rate", "28", "--arrival", "constant", "--run-time", "12s", "--", *SHORT, "--max-inflight", "8"
    )
    done = requests_table(run_dir).query("status == 'ok'").sort_values("due_wall")
    third = len(done) // 3
    first, last = done.iloc[:third], done.iloc[-third:]

    def from_due(rows) -> float:
        return float((rows["lateness_ms"] + rows["ttft_ms"]).median())

    assert from_due(last) > 2 * from_due(first)
    assert last["ttft_ms"].median() < 2 * first["ttft_ms"].median() + 20
    assert verdict["open_loop"]["sustained"] is False
    # the gate agrees: a rate not offered on time is not a rate the SLO was met at
    failed = {c["name"] for c in verdict["slo"]["criteria"] if c["passed"] is False}
    assert failed & {"arrival rate offered", "arrival lateness P95"} and verdict["slo"]["passed"] is False
    summary = (run_dir / "report" / "summary.md").read_text()
    assert "the target rate was not sustained" in summary and "of the target 28/s" in summary


def implied_max_rate(prompt_tokens: float, output_tokens: int, max_num_seqs: int) -> float:
    """The highest constant arrival rate the tiny engine model carries (simulator/costmodel.py).

    A request holds one of the `max_num_seqs` batch slots for `output_tokens` engine steps (its prefill
    step gives the first token, then one decode step per token; the API server's request_overhead_ms
    comes before the queue and holds no slot). With the batch full, one step costs
    step_seconds(tokens = max_num_seqs, KV read = every sequence's context, sequences = max_num_seqs):
    for tiny (0.5 GiB weights, 256 KiB KV/token, 80 GB/s effective) with 4 sequences of ~35 + 8
    tokens that is 7.3 ms of memory reads + 12.0 ms step overhead + 0.2 ms per-sequence work =
    19.5 ms, so a 16-token request holds its slot 0.31 s and 4 slots carry ~12.8 requests/s.
    Constant arrivals below that never queue (TTFT stays at its light-load value); above it the
    queue grows by (rate - capacity) every second, and within one 24 s hold a 5 % overload already
    queues ~15 requests, ~1.2 s > the SLO's 800 ms TTFT P95: the SLO limit is the capacity.
    """
    config = build_config("tiny", {"max_num_seqs": max_num_seqs})
    context = max_num_seqs * (prompt_tokens + output_tokens / 2)
    step = step_seconds(config, max_num_seqs, int(context), max_num_seqs)
    return max_num_seqs / (output_tokens * step)


@pytest.mark.exclusive  # the capacity the engine model implies, to 10 %: a starved simulator steps slower
def test_a_sweep_finds_the_highest_slo_compliant_rate_the_engine_model_implies(tmp_path):
    run_dir, verdict = run(
        tmp_path,
        "--scenario",
        "rate",
        "--shape",
        "rate-sweep",
        "--arrival",
        "constant",
        "--sim-option",
        "max_num_seqs=4",
        "--time-scale",
        "4",
        "--",
        "--sweep-start-rate",
        "1",
        "--sweep-max-rate",
        "40",
        "--sweep-hold",
        "24",
        "--sweep-probes",
        "5",
        "--step-settle",
        "1",
        "--prompt-mix",
        "short=1",
        "--max-tokens",
        "16",
        "--ignore-eos",
        "--max-inflight",
        "32",
    )
    manifest = json.loads((run_dir / "manifest.json").read_text())
    records = requests_table(run_dir)
    implied = implied_max_rate(float(records["prompt_tokens"].mean()), 16, 4)
    assert manifest["sweep_max_rate"] == pytest.approx(implied, rel=0.10), manifest["sweep"]
    # the report's highest SLO-compliant throughput (what `loadline plan` reads) is the same probe, or the
    # probe below it when the report finds the sweep's answer over its TTFT limit by less than the sweep's
    # precision (5 %): the live rule judged the probe's replies that had ended by the phase's end, the
    # report judges every reply the phase started, and at the engine's capacity the last ones queue longer
    # (seen once in CI: the 13.3/s probe at TTFT P95 813 ms against 800, the 12.6/s probe at 126 ms)
    # one answer (loadline/core/answer.py): a sweep is judged on its answer, and its max compliant load is
    # the probe the sweep named, on every surface: the report's card, junit, the run's log line, the plan
    answer = verdict["answer"]
    assert answer["sweep"]["found"] and answer["max_compliant"]["load"]["offered_rps"] == manifest["sweep_max_rate"]
    assert answer["status"] == "pass" and verdict["exit_code"] in (0, 2)  # 2: only with a generator it doubts
    planned = loadline("plan", "--run", str(run_dir), "--target-qps", "30", "--json")
    assert planned.code == 0, planned.stderr
    assert_surfaces_agree(run_dir, verdict["exit_code"], log=RUN_LOGS[run_dir], plan=json.loads(planned.stdout))


def test_sessions_arrive_on_schedule_and_run_their_turns(tmp_path):
    # 6 s of wall time at one session per 0.1 s: 51-53 sessions measured for the > 30 below (8 s: 72)
    run_dir, _ = run(
        tmp_path,
        "--rate",
        "2",
        "--arrival",
        "constant",
        "--run-time",
        "6s",
        "--",
        "--arrival-sessions",
        "--turns-mean",
        "3",
        "--think-mean",
        "1",
        "--think-p90",
        "2",
        *SHORT,
        report=False,
    )
    records = requests_table(run_dir).query("attempt == 0")
    starts = records[records["turn"] == 0].sort_values("due_wall")
    assert len(starts) > 30
    assert np.allclose(np.diff(starts["due_wall"]), 1 / (2 * SCALE), atol=1e-3)  # one session every 0.1 s (wall)
    later = records[records["turn"] > 0]
    assert len(later) and later["due_wall"].notna().all()  # each turn is due when its think time ended
