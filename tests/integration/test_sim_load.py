"""Under load the simulated engine bends the way real ones do."""

from __future__ import annotations

import asyncio

import pytest
from sim_client import median, metric, read_truth, run_streams, scrape

MODEL = "loadline/tiny-sim"


def _body(max_tokens: int, words: int = 20, tag: str = "") -> dict:
    """A prompt of `words` + 1 word tokens (+ 7 template tokens); distinct tags defeat prefix caching."""
    content = " ".join([tag or "user"] + ["word"] * words)
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
    }


@pytest.mark.exclusive  # ITL at 256 vs 64 streams: a simulator starved by neighbours steps slower (failed once in the parallel phase)
def test_latency_queue_and_kv_rise_with_concurrency(sim_server):
    # tiny, but a batch of up to 128 so that 1 -> 64 -> 256 streams cross the cap once
    sim = sim_server("tiny", "--time-scale", "1", "--set", "max_num_seqs=128", "--set", "num_gpu_blocks=2048")
    levels = {}
    for n in (1, 64, 256):
        results, scrapes = asyncio.run(run_streams(sim.url, [_body(24)] * n, f"c{n}"))
        assert all(r.status == 200 and r.done and r.tokens == 24 for r in results)
        levels[n] = {
            "ttft": median([r.ttft for r in results]),
            "itl": median([g for r in results for g in r.itls]),
            "running": max(metric(s, "vllm:num_requests_running", engine="0") for s in scrapes),
            "waiting": max(metric(s, "vllm:num_requests_waiting", engine="0") for s in scrapes),
            "kv": max(metric(s, "vllm:kv_cache_usage_perc", engine="0") for s in scrapes),
        }
    one, mid, high = levels[1], levels[64], levels[256]
    assert one["ttft"] < mid["ttft"] < high["ttft"], levels
    assert one["itl"] < mid["itl"] < high["itl"], levels
    assert high["running"] == 128 and high["waiting"] > 0, levels  # capped at max_num_seqs, queue behind it
    assert one["kv"] < mid["kv"] < high["kv"], levels
    sim.stop()
    truth = read_truth(sim.truth_path)
    by_level = {n: [r for r in truth if r["request_id"].startswith(f"c{n}-")] for n in levels}
    assert {n: len(rows) for n, rows in by_level.items()} == {1: 1, 64: 64, 256: 256}
    server_ttft = {n: median([r["first_token"] - r["arrival"] for r in rows]) for n, rows in by_level.items()}
    queued = {n: median([r["queue_end"] - r["queue_start"] for r in rows]) for n, rows in by_level.items()}
    assert server_ttft[1] < server_ttft[64] < server_ttft[256]
    assert queued[256] > queued[1]
    assert all(r["output_tokens"] == 24 and r["outcome"] == "ok" for r in truth)


def test_long_contexts_fill_kv_and_preempt(sim_server):
    sim = sim_server("tiny", "--time-scale", "4")  # 256 blocks x 16 = 4,096 tokens, 8 sequences
    bodies = [_body(200, words=400, tag=f"u{i}") for i in range(8)]  # 408-token prompts growing to ~600 each
    results, scrapes = asyncio.run(run_streams(sim.url, bodies, "long"))
    assert all(r.status == 200 and r.tokens == 200 for r in results)
    assert max(metric(s, "vllm:kv_cache_usage_perc") for s in scrapes) > 0.9
    final = scrape(sim.url)
    assert metric(final, "vllm:num_preemptions_total") > 0
    assert metric(final, "vllm:kv_cache_usage_perc") == 0  # every block back once all finished
    sim.stop()
    assert sum(r["preemptions"] for r in read_truth(sim.truth_path)) > 0


def test_shared_prefix_hits_the_prefix_cache(sim_server):
    sim = sim_server("tiny", "--time-scale", "4")
    results, _ = asyncio.run(run_streams(sim.url, [_body(4, words=300)] * 4, "same", poll_metrics=False))
    assert all(r.tokens == 4 for r in results)
    after = scrape(sim.url)
    queries, hits = metric(after, "vllm:prefix_cache_queries_total"), metric(after, "vllm:prefix_cache_hits_total")
    assert queries > 0 and hits > 0.5 * queries * 3 / 4  # later ones reuse the first one's full blocks


def test_client_disconnect_frees_kv_and_server_keeps_serving(sim_server):
    sim = sim_server("tiny", "--time-scale", "2")

    async def scenario():
        from sim_client import stream_chat

        url = sim.url + "/v1/chat/completions"
        task = asyncio.ensure_future(stream_chat(url, _body(400, words=300), "gone", stop_after_tokens=None))
        for _ in range(100):  # until the stream holds blocks (bounded: 5 s)
            await asyncio.sleep(0.05)
            held = metric(await asyncio.to_thread(scrape, sim.url), "vllm:kv_cache_usage_perc")
            if held > 0:
                break
        assert held > 0
        task.cancel()  # closes the socket mid-stream
        await asyncio.gather(task, return_exceptions=True)
        for _ in range(100):
            await asyncio.sleep(0.05)
            after = await asyncio.to_thread(scrape, sim.url)
            if metric(after, "vllm:kv_cache_usage_perc") == 0:
                break
        assert metric(after, "vllm:kv_cache_usage_perc") == 0
        assert metric(after, "vllm:num_requests_running") == 0
        assert metric(after, "vllm:request_success_total", finished_reason="abort") == 1
        again = await stream_chat(url, _body(5), "after")
        assert again.status == 200 and again.tokens == 5

    asyncio.run(scenario())
    sim.stop()
    truth = {r["request_id"]: r for r in read_truth(sim.truth_path)}
    assert truth["gone"]["outcome"] == "client_disconnected" and truth["gone"]["first_token"] is not None
    assert truth["after"]["outcome"] == "ok"
