"""How many SSE chunks per second can the simulator emit on one core?

Starts `python -m loadline sim` (one process: one core) with an engine that is never the limit
(huge time scale, wide batch), drives it from a separate client process with N keep-alive
streaming connections, and reports content chunks/s in wall time and per server CPU-second
(from /proc/PID/stat). The client only counts `data: {` markers, so it stays cheap.

    .venv/bin/python benchmarks/sim_throughput.py [--connections 64 256] [--seconds 8] [--loops uvloop asyncio]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MARK = b'"delta":{"content":" '  # one per content token chunk (the role chunk has content "")


class Counter:
    def __init__(self) -> None:
        self.chunks = 0
        self.requests = 0


class StreamClient(asyncio.Protocol):
    """Sends the same streaming request again each time the previous one ends."""

    def __init__(self, request: bytes, counter: Counter) -> None:
        self.request = request
        self.counter = counter
        self.tail = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        buf = self.tail + data
        self.counter.chunks += buf.count(MARK)
        if b"data: [DONE]" in buf:
            self.counter.requests += 1
            self.tail = b""
            self.transport.write(self.request)
        else:
            self.tail = buf[-(len(MARK) - 1) :]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def drive(host: str, port: int, connections: int, seconds: float, pid: int, max_tokens: int) -> dict:
    body = json.dumps(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "benchmark"}],
            "stream": True,
            "max_tokens": max_tokens,
            "ignore_eos": True,
        }
    ).encode()
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: b\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    ) + body
    counter = Counter()
    loop = asyncio.get_running_loop()
    transports = []
    for _ in range(connections):
        transport, _ = await loop.create_connection(lambda: StreamClient(request, counter), host, port)
        transports.append(transport)
    await asyncio.sleep(1.0)  # warm up
    c0, r0, cpu0, t0 = counter.chunks, counter.requests, cpu_seconds(pid), time.perf_counter()
    await asyncio.sleep(seconds)
    c1, r1, cpu1, t1 = counter.chunks, counter.requests, cpu_seconds(pid), time.perf_counter()
    for transport in transports:
        transport.close()
    wall = t1 - t0
    return {
        "connections": connections,
        "chunks": c1 - c0,
        "requests": r1 - r0,
        "wall_s": wall,
        "chunks_per_s": (c1 - c0) / wall,
        "server_cpu_s": cpu1 - cpu0,
        "chunks_per_server_cpu_s": (c1 - c0) / max(cpu1 - cpu0, 1e-9),
    }


def start_server(extra: list[str], loop_name: str) -> tuple[subprocess.Popen, str, int]:
    cmd = [
        sys.executable,
        "-m",
        "loadline",
        "sim",
        "--profile",
        "tiny",
        "--port",
        "0",
        "--time-scale",
        "1000",
        "--set",
        "max_num_seqs=1024",
        "--set",
        "max_num_batched_tokens=65536",
        "--set",
        "num_gpu_blocks=100000",
        "--set",
        "max_model_len=8192",
        *extra,
    ]
    env = {**os.environ, "LOADLINE_SIM_EVENT_LOOP": loop_name}
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    line = proc.stdout.readline().decode().strip()
    address = line.rsplit("//", 1)[1]
    host, port = address.rsplit(":", 1)
    return proc, host, int(port)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--server-arg", action="append", default=[], help="extra simulator option")
    parser.add_argument(
        "--loops",
        nargs="+",
        default=["uvloop", "asyncio"],
        choices=["uvloop", "asyncio"],
        help="server event loops to compare (LOADLINE_SIM_EVENT_LOOP)",
    )
    args = parser.parse_args()
    try:
        import uvloop

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    rows = []
    for loop_name in args.loops:
        for n in args.connections:
            proc, host, port = start_server(args.server_arg, loop_name)
            try:
                rows.append({"loop": loop_name, **run(drive(host, port, n, args.seconds, proc.pid, args.max_tokens))})
            finally:
                proc.terminate()
                proc.wait(timeout=10)
    print(
        f"{'server loop':>11} {'connections':>11} {'chunks/s (wall)':>16} {'chunks/server-CPU-s':>20} "
        f"{'server CPU %':>12} {'req/s':>8}"
    )
    for r in rows:
        print(
            f"{r['loop']:>11} {r['connections']:>11} {r['chunks_per_s']:>16,.0f} "
            f"{r['chunks_per_server_cpu_s']:>20,.0f} {100 * r['server_cpu_s'] / r['wall_s']:>11.0f}% "
            f"{r['requests'] / r['wall_s']:>8.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
