"""Startup contract, clean shutdown, and the live single-stream timing (help and one-line errors:
tests/unit/test_cli_args.py; the profiles' single-stream figures: tests/unit/test_sim_units.py)."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys

from conftest import REPO
from sim_client import median, read_truth, stream_chat

from loadline.simulator.config import build_config
from loadline.simulator.costmodel import single_stream_estimate


def test_sigterm_mid_stream_stops_cleanly_and_flushes_truth(sim_server):
    sim = sim_server("tiny", "--time-scale", "1")

    async def interrupted():
        body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 2000 // 16, "ignore_eos": True}
        task = asyncio.ensure_future(stream_chat(sim.url + "/v1/chat/completions", body, "cut"))
        await asyncio.sleep(0.5)
        sim.proc.send_signal(signal.SIGTERM)
        return await task

    result = asyncio.run(interrupted())
    assert sim.proc.wait(timeout=5) == 0
    assert result.error == "server shutting down" and result.done  # an error event, not a silent cut
    (row,) = read_truth(sim.truth_path)
    assert row["request_id"] == "cut" and row["outcome"] == "error" and row["first_token"] is not None


def test_startup_line_is_exactly_the_contract():
    proc = subprocess.Popen(
        [sys.executable, "-m", "loadline", "sim", "--profile", "tiny", "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        first = proc.stdout.readline()
        assert re.fullmatch(r"loadline-sim listening on http://127\.0\.0\.1:\d+\n", first), first
    finally:
        proc.terminate()
        assert proc.wait(timeout=5) == 0


def test_live_single_stream_follows_the_model(sim_server):
    """The engine's clock is faithful: measured ITL is the model's, not the host's timer granularity."""
    sim = sim_server("h100-llama3-8b")
    body = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 40, "ignore_eos": True}
    result = asyncio.run(stream_chat(sim.url + "/v1/chat/completions", body, "one"))
    _, model_itl = single_stream_estimate(build_config("h100-llama3-8b", {}), prompt_tokens=12, context=30)
    assert result.tokens == 40
    assert 0.8 * model_itl <= median(result.itls) <= 2.0 * model_itl
