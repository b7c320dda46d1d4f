"""What one token costs on the body reader's path, measured so that small changes can be told apart.

The whole-generator benchmark (generator_throughput.py) is what the generator's bars judge, but on a shared
2-core VM its CPU per 1k tokens moves 2-5 % from run to run, more than most single changes to the
per-token path save. This one isolates that path: K plain-TCP loopback connections with kernel
receive stamps, each holding a reply whose head is read; every round the peer writes one token's
chunk (`data: {...}` in HTTP chunked framing, as the simulator writes it) to each connection, then
the body reader's steps for one ready socket run on each: `Response.read_ready` (recvmsg, stamp,
HTTP parser) and `_Follow.after_read` (SSE framing, JSON, the record).

Prints, per code tree: CPU per token (user + system of this thread, best of 5 passes: includes the
kernel's recvmsg and the ACK it sends) and, with --instructions, user-space instructions per token
counted by valgrind's callgrind (the same count on a busy or a quiet machine; the kernel's share is
not in it). Both include the peer's send of each chunk, the same in every tree. Trees must share
the body reader's API (from 19b383d on).

`--kind reasoning` writes a reasoning model's replies (32 reasoning chunks, then 32 content chunks):
the reader's second template keeps those on the no-parse path too.

    python benchmarks/token_path.py [--streams 256] [--rounds 200] [--kind plain --kind reasoning]
                                    [--instructions] [--repo PATH ...]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAYLOAD = (
    b'data: {"id":"chatcmpl-0123456789abcdef","object":"chat.completion.chunk","created":1764690000,'
    b'"model":"sim","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}]}\n\n'
)
CHUNK = b"%x\r\n" % len(PAYLOAD) + PAYLOAD + b"\r\n"
THOUGHT = PAYLOAD.replace(b'"content"', b'"reasoning_content"')  # SGLang's, llama.cpp's, older vLLM's key
THOUGHT_CHUNK = b"%x\r\n" % len(THOUGHT) + THOUGHT + b"\r\n"
# what each round of a reply writes: a plain reply's tokens, or a reasoning model's (half thoughts first)
KINDS = {"plain": [CHUNK], "reasoning": [THOUGHT_CHUNK] * 32 + [CHUNK] * 32}
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
PASSES = 5


def measure(streams: int, rounds: int, passes: int, kind: str = "plain") -> float:
    """Best CPU seconds per token over `passes` passes of `rounds` tokens on each of `streams` replies."""
    import socket

    from gevent import socket as gsocket
    from geventhttpclient.response import HTTPResponse

    from loadline.client import body_reader, kernel_clock
    from loadline.client.response import Response
    from loadline.client.stall import StallTimer
    from loadline.client.streaming import Reply, StreamResult, chat_content

    class Connection:  # what a Response reads of its connection
        kernel = True
        target = type("Target", (), {"tls": False})()

        def __init__(self) -> None:
            self.stall = StallTimer(30.0, TimeoutError)

    server = socket.create_server(("127.0.0.1", 0), backlog=streams)
    replies = []
    for _ in range(streams):
        client = gsocket.create_connection(server.getsockname())
        peer, _ = server.accept()
        for sock in (client, peer):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if not kernel_clock.enable(client):
            sys.exit("no kernel receive stamps on this platform")
        response = Response(
            Connection(), client, HTTPResponse("POST"), time.perf_counter(), time.time(), time.perf_counter()
        )
        peer.sendall(HEAD)
        for _ in range(1000):
            if response.read_ready():
                break
            time.sleep(0.001)
        result = StreamResult()
        replies.append((peer, response, body_reader._Follow(response, Reply(response, chat_content, result)), result))
    best = float("inf")
    chunks = KINDS[kind]
    for _ in range(passes):
        cpu = 0.0
        for n in range(rounds):
            chunk = chunks[n % len(chunks)]
            for peer, *_ in replies:
                peer.send(chunk)
            start = time.thread_time()
            for _, response, follow, _ in replies:
                if response.read_ready():
                    follow.after_read()
            cpu += time.thread_time() - start
            if n % 64 == 63:  # a reply's length: the records do not grow without bound
                for *_, result in replies:
                    result.arrivals.clear()
                    result.pieces.clear()
        best = min(best, cpu / (rounds * streams))
    return best


def instructions(repo: Path, streams: int, rounds: int, kind: str = "plain") -> float | None:
    """User-space instructions per token: two runs under callgrind, 1 and 1 + `rounds` rounds."""
    if shutil.which("valgrind") is None:
        return None
    counts = []
    for n in (1, 1 + rounds):
        cmd = [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--child",
            "--streams",
            str(streams),
            "--rounds",
            str(n),
            "--passes",
            "1",
            "--kind",
            kind,
        ]
        out = subprocess.run(
            cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(repo)}, timeout=1800
        )
        found = re.search(r"Collected : (\d+)", out.stderr)
        if found is None:
            return None
        counts.append(int(found.group(1)))
    return (counts[1] - counts[0]) / (rounds * streams)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--passes", type=int, default=PASSES)
    parser.add_argument("--instructions", action="store_true", help="also count instructions (valgrind)")
    parser.add_argument("--repo", type=Path, action="append", help="a code tree to measure (repeatable)")
    parser.add_argument(
        "--kind",
        choices=sorted(KINDS),
        action="append",
        help="the replies' tokens: plain content, or reasoning then content (repeatable; default plain)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    kinds = args.kind or ["plain"]
    if args.child:  # inside one tree (PYTHONPATH): print the measurement only
        print(f"{measure(args.streams, args.rounds, args.passes, kinds[0]):.9f}")
        return
    print(f"{'tree':<40} {'kind':>9} {'streams':>7} {'CPU us/token':>13} {'instructions/token':>19}")
    for repo in args.repo or [REPO]:
        for kind in kinds:
            cmd = [
                sys.executable,
                __file__,
                "--child",
                "--streams",
                str(args.streams),
                "--rounds",
                str(args.rounds),
                "--passes",
                str(args.passes),
                "--kind",
                kind,
            ]
            out = subprocess.run(
                cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(repo)}, timeout=600
            )
            if out.returncode != 0:
                print(f"{str(repo):<40} {kind:>9} failed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            cpu_us = float(out.stdout.strip().splitlines()[-1]) * 1e6
            counted = instructions(repo, args.streams, max(1, args.rounds // 5), kind) if args.instructions else None
            shown = f"{counted:,.0f}" if counted is not None else "-"
            print(f"{str(repo):<40} {kind:>9} {args.streams:>7} {cpu_us:>13.2f} {shown:>19}")


if __name__ == "__main__":
    main()
