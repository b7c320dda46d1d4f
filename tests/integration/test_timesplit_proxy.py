"""Where the time goes, against a real simulator process: directly, and behind a slow proxy.

The proxy (stdlib asyncio, a child process of this test) holds every client->server chunk for DELAY_S before
forwarding it: what a slow gateway or auth hop does to each request. The engine never sees that
time, so its own TTFT histogram stays small while the client's TTFT grows by the delay; the split
must name `outside-engine` with the numbers, and must not when the client talks to the engine directly.
"""

from __future__ import annotations

import asyncio
import select
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager

import pandas as pd
from sim_client import stream_chat

from loadline.analysis.data.prom_ingest import parse_text
from loadline.analysis.report.build import build_report
from loadline.analysis.report.card import rows as card_rows
from loadline.analysis.verdict.timesplit import time_split
from loadline.core import runfolder
from loadline.core.slo import record
from tests.surfaces import assert_surfaces_agree
from tests.synthetic import make_requests, write_run

MODEL = "loadline/tiny-sim"
DELAY_S = 0.4
REQUESTS = 6


PROXY = """
import asyncio, sys

UPSTREAM, DELAY_S = int(sys.argv[1]), float(sys.argv[2])


async def pipe(reader, writer, delay_s):
    try:
        while data := await reader.read(65536):
            if delay_s:
                await asyncio.sleep(delay_s)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def handle(client_reader, client_writer):
    up_reader, up_writer = await asyncio.open_connection("127.0.0.1", UPSTREAM)
    await asyncio.gather(pipe(client_reader, up_writer, DELAY_S), pipe(up_reader, client_writer, 0.0))


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()

asyncio.run(main())
"""


@contextmanager
def delaying_proxy(upstream_port: int, delay_s: float):
    """A TCP proxy on a free loopback port, in its own process (an asyncio loop in a thread of this
    gevent-patched test process would share the thread's running loop); yields its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-c", PROXY, str(upstream_port), str(delay_s)], stdout=subprocess.PIPE, text=True
    )
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        assert ready, "the proxy did not start"
        yield f"http://127.0.0.1:{int(proc.stdout.readline())}"
    finally:
        proc.kill()
        proc.wait(10)


def _metrics(url: str) -> pd.DataFrame:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        return parse_text(response.read().decode(), time.time())


def _load(base_url: str, sim_url: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """REQUESTS sequential streams through base_url; engine metrics scraped around them from sim_url."""
    before = _metrics(sim_url)
    start = time.time()
    starts, ttft, e2e = [], [], []
    for i in range(REQUESTS):
        body = {"model": MODEL, "messages": [{"role": "user", "content": f"q{i} hello there"}], "max_tokens": 8}
        wall = time.time()
        result = asyncio.run(stream_chat(f"{base_url}/v1/chat/completions", body, f"split-{i}", timeout=30))
        assert result.done and result.chunk_times, result.error
        starts.append(wall)
        ttft.append(result.ttft * 1000)
        e2e.append((result.chunk_times[-1] - result.start) * 1000)
    time.sleep(0.05)
    after = _metrics(sim_url)
    phases = pd.DataFrame({"label": ["fixed"], "start_wall": [start], "end_wall": [time.time()]})
    return make_requests(starts, e2e, ttft_ms=ttft), phases, pd.concat([before, after], ignore_index=True)


def test_a_slow_proxy_shows_as_outside_engine_and_a_direct_client_does_not(sim_server, tmp_path):
    sim = sim_server("tiny", "--time-scale", "1")
    port = int(sim.url.rsplit(":", 1)[1])
    requests, phases, metrics = _load(sim.url, sim.url)
    direct = time_split(requests, phases, metrics)
    assert direct["available"] and direct["dominant"] != "outside-engine", direct["sentence"]
    with delaying_proxy(port, DELAY_S) as proxy_url:
        requests, phases, metrics = _load(proxy_url, sim.url)
    slow = time_split(requests, phases, metrics)
    assert slow["dominant"] == "outside-engine", slow["sentence"]
    ttft = slow["run"]["ttft"]
    # the engine's own TTFT is unchanged by the proxy; the client's carries the held request
    assert ttft["outside_ms"] >= 0.75 * DELAY_S * 1000 and ttft["engine_ms"] < ttft["outside_ms"]
    assert ttft["queue_ms"] is not None and ttft["prefill_ms"] is not None
    assert "outside-engine" in slow["sentence"] and f"{ttft['client_ms']:,.0f} ms" in slow["sentence"]

    # the same run as a run folder: its report says it on every surface, headroom and the wait outside
    # the engine on one line
    run_dir = write_run(
        tmp_path / "proxy",
        requests,
        phases.assign(index=0, kind="hold", target_users=1, spawn_rate=1, users_start=1, users_end=1, note=""),
        {"name": "proxy", "status": "finished", "streaming": True, "slo": record(None)},
    )
    metrics.reindex(columns=list(runfolder.SERVER_METRIC_COLUMNS)).to_csv(
        run_dir / runfolder.SERVER_METRICS, index=False
    )
    result = build_report(run_dir, charts=False)
    answer = assert_surfaces_agree(run_dir, result.exit_code)
    assert answer.time_split.outside_share is not None and answer.time_split.outside_share >= 0.5
    card = dict(card_rows(result.verdict))
    if answer.layer.name == "headroom":
        assert "most of the wait is outside it" in card["Limiting layer"], card["Limiting layer"]
