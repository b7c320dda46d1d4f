"""CPU per token of the per-token path's parts: the token path as users drive it, and variants of it.

The bar: one core drives everything offered. Whole stacks in one gevent process pinned to core 1
(the embedded simulator, flat cost model, on core 0): N users each stream chat replies of TOKENS
tokens (ignore_eos) back to back for SECONDS, every stack in a fresh child process, rounds
interleaved. Stacks (every one reads a chunk as soon as any bytes arrive):
  loadline       the token path: connection.Connection + streaming.read_stream (kernel receive stamps),
                 every body read by the process's body reader (body_reader.py)
  loadline-pull  the same with LOADLINE_PUSH_READS=0 (every body read in its user's greenlet)
  loadline-user  the same with LOADLINE_KERNEL_CLOCK=0 (stamp = perf_counter() at the read)
  loadline-sseclient  loadline-pull with sseclient-py framing every event (as before sse.py's fast path)
The first wave's requests/urllib3 path, the geventhttpclient prototypes that chose this one and the
epoll-reader prototype that led to body_reader.py were measured on their own trees (git history); to
measure an older tree's whole generator, use generator_throughput.py --repo.
Columns: tokens/s and CPU-s per 1,000 tokens (time.process_time of the child) over the window
WARMUP_S .. SECONDS - COOLDOWN_S; TTFT error |measured - truth| and first-token stamp error
|sent_wall + TTFT - truth first_token| (both wall clocks) from the simulator's truth log, for requests
inside the window; read delay p99 (kernel stacks: how late the newest bytes of a read were read);
/proc/loadavg after the run; failed requests by exception type.
Every completed reply must carry exactly TOKENS content chunks, the server's usage count and the
truth log's output_tokens (asserted).

    python benchmarks/client_stacks.py [--streams 16 256] [--seconds 10] [--rounds 3] [--stacks ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from time import perf_counter

REPO = Path(__file__).resolve().parent.parent
STACKS = ("loadline", "loadline-pull", "loadline-user", "loadline-sseclient")
WARMUP_S = 3.0  # every user is in its steady request cycle
COOLDOWN_S = 1.0  # users stop starting requests at SECONDS; the window ends before that


# -- the child: one stack, N users, in one gevent process ------------------------------------------
def loadline_stack(url: str, path: str, framing: str):  # type: ignore[no-untyped-def]
    """The token path as loadline/client/users/base.py drives it."""
    import sseclient

    from loadline.client import streaming
    from loadline.client.connection import Connection
    from loadline.client.streaming import StreamResult, chat_content, read_stream

    if framing == "sseclient":  # every event through the library, as before loadline/client/sse.py
        streaming.event_data = lambda reads: (e.data for e in sseclient.SSEClient(reads).events())

    def user():  # type: ignore[no-untyped-def]
        conn = Connection(url, 5, 30)

        def send(payload: bytes, rid: str):  # type: ignore[no-untyped-def]
            result = StreamResult()
            response = conn.post(path, payload, {"Content-Type": "application/json", "X-Request-Id": rid})
            try:
                assert response.status == 200, response.status
                read_stream(response, chat_content, result)
            finally:
                response.close()
            return response.sent_perf, response.sent_wall, result

        return send

    return user


def child(args: argparse.Namespace) -> None:
    from gevent import monkey

    monkey.patch_all()
    import gevent

    path = "/v1/chat/completions"
    user = loadline_stack(args.url, path, framing="sseclient" if args.child == "loadline-sseclient" else "sse")
    payload = json.dumps(
        {
            "model": args.model,
            "messages": [{"role": "user", "content": "Say something long."}],
            "stream": True,
            "max_tokens": args.tokens,
            "ignore_eos": True,
            "stream_options": {"include_usage": True},
        }
    ).encode()
    done: list[tuple] = []  # (rid, sent_perf, sent_wall, result)
    failures: dict[str, int] = {}
    start = perf_counter()
    stop_at = start + args.seconds

    def run(k: int) -> None:
        send = user()
        for i in range(100_000):
            if perf_counter() >= stop_at:
                return
            rid = f"{args.tag}-{k}-{i}"
            try:
                sent_perf, sent_wall, result = send(payload, rid)
            except Exception as exc:  # counted and shown; a failing stack must not hang the run
                failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1
                gevent.sleep(0.05)
                continue
            done.append((rid, sent_perf, sent_wall, result))

    window: list[float] = []

    def sample() -> None:
        for edge in (start + WARMUP_S, stop_at - COOLDOWN_S):
            gevent.sleep(max(0.0, edge - perf_counter()))
            window.extend((perf_counter(), time.process_time()))

    users = [gevent.spawn(run, k) for k in range(args.streams[0])]
    sampler = gevent.spawn(sample)
    gevent.joinall([sampler, *users], timeout=args.seconds + 30)
    w0, cpu0, w1, cpu1 = window
    tokens = sum(1 for *_, result in done for t in result.arrivals if w0 <= t < w1)
    wrong = [
        (rid, len(r.arrivals), (r.usage or {}).get("completion_tokens"))
        for rid, _, _, r in done
        if not len(r.arrivals) == (r.usage or {}).get("completion_tokens") == args.tokens
    ]
    assert not wrong, f"{len(wrong)} replies without exactly {args.tokens} tokens, e.g. {wrong[:3]}"
    records = [
        {
            "rid": rid,
            "sent_wall": wall,
            "ttft_ms": (r.arrivals[0] - sent) * 1000,
            "tokens": len(r.arrivals),
            "read_delay_ms": r.body.read_delay_max * 1000 if r.clock == "kernel" else None,
            "clock": r.clock,
        }
        for rid, sent, wall, r in done
        if sent >= w0 and r.arrivals[-1] < w1
    ]
    print(
        json.dumps(
            {
                "tokens_s": tokens / (w1 - w0),
                "cpu_1k": (cpu1 - cpu0) / max(tokens, 1) * 1000,
                "cpu_pct": 100 * (cpu1 - cpu0) / (w1 - w0),
                "requests": len(done),
                "failures": failures,
                "records": records,
            }
        )
    )


# -- the parent: simulator, children, truth ---------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def run_child(stack: str, streams: int, tag: str, url: str, model: str, args: argparse.Namespace) -> dict:
    pin = ["taskset", "-c", "1"] if (os.cpu_count() or 1) > 1 else []
    cmd = [
        *pin,
        sys.executable,
        __file__,
        "--child",
        stack,
        "--url",
        url,
        "--model",
        model,
        "--tag",
        tag,
        "--streams",
        str(streams),
        "--seconds",
        str(args.seconds),
        "--tokens",
        str(args.tokens),
    ]
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "LOADLINE_KERNEL_CLOCK": "0" if stack == "loadline-user" else "1",
        "LOADLINE_PUSH_READS": "0" if stack in ("loadline-pull", "loadline-sseclient") else "1",
    }
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.seconds + 60, env=env, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1][:200]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[16, 256])
    parser.add_argument("--stacks", nargs="+", choices=STACKS, default=list(STACKS))
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--step-ms", type=float, default=10.0)
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    parser.add_argument("--child", choices=STACKS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--tag", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "benchmarks"))
    from generator_throughput import flat_model

    from loadline.runtime.simprocess import start_simulator

    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        truth_path = Path(tmp) / "truth.jsonl"
        sim = start_simulator(
            [
                "--profile",
                "tiny",
                "--truth",
                str(truth_path),
                *sum((["--set", kv] for kv in flat_model(args.step_ms, args.ttft_ms)), []),
            ]
        )
        try:
            if (os.cpu_count() or 1) > 1:
                subprocess.run(["taskset", "-cp", "0", str(sim.proc.pid)], capture_output=True)
            import urllib.request

            with urllib.request.urlopen(sim.url + "/v1/models", timeout=10) as reply:
                model = json.load(reply)["data"][0]["id"]
            for r in range(args.rounds):
                for streams in args.streams:
                    order = args.stacks[r % len(args.stacks) :] + args.stacks[: r % len(args.stacks)]
                    for stack in order:  # rotated each round, so no stack always follows the same one
                        tag = f"{stack}-{streams}-{r}"
                        began = time.strftime("%H:%M:%S", time.gmtime())
                        row = run_child(stack, streams, tag, sim.url, model, args)
                        row.update(
                            stack=stack,
                            streams=streams,
                            round=r,
                            began=began,
                            loadavg=Path("/proc/loadavg").read_text().split()[0],
                        )
                        rows.append(row)
                        said = row.get("error") or f"{row['cpu_1k']:.4f} CPU-s/1k, {row['tokens_s']:,.0f} tok/s"
                        print(f"{began} {tag}: {said} (load {row['loadavg']})", file=sys.stderr, flush=True)
        finally:
            sim.stop()
        truth = {t["request_id"]: t for t in map(json.loads, truth_path.read_text().splitlines())}

    print(
        "stack          streams round  tokens/s  CPU-s/1k  CPU %  TTFT err p50/p99 ms  1st-token err p50/p99 ms"
        "  read delay p99 ms  requests   load  failures"
    )
    for row in rows:
        if "error" in row:
            print(f"{row['stack']:<14} {row['streams']:>7} {row['round']:>5}  error: {row['error']}")
            continue
        ttft_err, stamp_err = [], []
        for rec in row["records"]:
            t = truth.get(rec["rid"])
            assert t is not None and t["output_tokens"] == rec["tokens"], (rec, t)
            ttft_err.append(abs(rec["ttft_ms"] - (t["first_token"] - t["arrival"]) * 1000))
            stamp_err.append(abs(rec["sent_wall"] + rec["ttft_ms"] / 1000 - t["first_token"]) * 1000)
        delays = [rec["read_delay_ms"] for rec in row["records"] if rec["read_delay_ms"] is not None]
        delay = f"{pct(delays, 0.99):.1f}" if delays else "-"
        failed = " ".join(f"{n} {name}" for name, n in row["failures"].items())
        print(
            f"{row['stack']:<14} {row['streams']:>7} {row['round']:>5} {row['tokens_s']:>9,.0f} {row['cpu_1k']:>9.4f}"
            f" {row['cpu_pct']:>6.0f}  {pct(ttft_err, 0.5):>8.2f} / {pct(ttft_err, 0.99):<8.2f}"
            f"  {pct(stamp_err, 0.5):>11.3f} / {pct(stamp_err, 0.99):<9.3f}  {delay:>17}"
            f"  {row['requests']:>8}  {row['loadavg']:>5}  {failed or 0}"
        )


if __name__ == "__main__":
    main()
