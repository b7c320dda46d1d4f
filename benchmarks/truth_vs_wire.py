"""Where does a TTFT error against the truth come from: the simulator's stamps, the wire, or the client?

Runs the spine test's scenario (tests/e2e/test_run_spine.py: `loadline run`, 64 streams on the tiny
profile) while an AF_PACKET capture on lo stamps every TCP segment as its sender hands it to the
loopback device (kernel stamps; needs root or CAP_NET_RAW). Each ok request of the steady window
(the test's) is then placed on the wire: its request's last segment, the server's first and last
response segments. Printed, as |p50| / |p99| / max in ms:
  ttft error       client TTFT - truth TTFT (what the spine test checks)
  truth -> wire    first segment on the wire - truth first_token (the simulator's stamp)
  client -> wire   client TTFT - wire TTFT (the client's stamps)
  arrival lag      truth arrival - request on the wire (the simulator's parse delay)
and the worst requests with the server segment whose wire time the client's first token carries.
--stall-client / --stall-sim stop that process for MS at random 0.2-0.6 s intervals (a busy host,
cheaply); --python runs everything with another interpreter (e.g. a venv with uvloop installed).

    sudo .venv/bin/python benchmarks/truth_vs_wire.py [--stall-client 40] [--stall-sim 30] [--python PY]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUN = [
    "-m",
    "loadline",
    "run",
    "--sim-profile",
    "tiny",
    "--sim-option",
    "max_num_seqs=64",
    "--users",
    "64",
    "--spawn-rate",
    "32",
    "--no-charts",
    "--no-report",
    "--",
    "--think-mean",
    "0.3",
    "--think-p90",
    "0.6",
    "--prompt-mix",
    "short=1",
    "--max-tokens",
    "48",
]
ETH_P_ALL, SO_RCVBUFFORCE, SO_TIMESTAMPNS = 0x0003, 33, 35
REQUEST_ID = re.compile(rb"X-Request-Id: (\S+)", re.I)


def capture(segments: list[dict], stop: threading.Event) -> None:
    """Every outgoing TCP segment with payload on lo: kernel stamp, ports, first bytes."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind(("lo", 0))
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.settimeout(0.2)
    while not stop.is_set():
        try:
            frame, anc, _, addr = sock.recvmsg(2048, 64)
        except TimeoutError:
            continue
        if addr[2] != socket.PACKET_OUTGOING or not anc:  # lo shows each packet twice: keep the send
            continue
        ip = frame[14:]
        if len(ip) < 20 or ip[9] != 6:
            continue
        ihl, total = (ip[0] & 15) * 4, struct.unpack_from("!H", ip, 2)[0]
        tcp = ip[ihl:]
        offset = (tcp[12] >> 4) * 4
        if total - ihl - offset <= 0:
            continue
        sec, nsec = struct.unpack_from("qq", anc[0][2])
        sport, dport = struct.unpack_from("!HH", tcp)
        segments.append(
            {"t": sec + nsec * 1e-9, "sport": sport, "dport": dport, "payload": tcp[offset : offset + 1200]}
        )
    sock.close()


def stall(run: subprocess.Popen, which: str, ms: float) -> int:
    """SIGSTOP/SIGCONT the run's child whose command line holds `which`, until the run ends."""
    count = 0
    while run.poll() is None:
        time.sleep(random.uniform(0.2, 0.6))
        kids = subprocess.run(["pgrep", "-P", str(run.pid)], capture_output=True, text=True).stdout.split()
        for pid in map(int, kids):
            try:
                if which in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode():
                    os.kill(pid, signal.SIGSTOP)
                    time.sleep(ms / 1000)
                    os.kill(pid, signal.SIGCONT)
                    count += 1
            except (FileNotFoundError, ProcessLookupError):
                pass
    return count


def place(segments: list[dict], run_dir: Path) -> list[dict]:
    """Steady-window ok requests with their truth and wire times."""
    segments.sort(key=lambda s: s["t"])
    requests: dict[str, tuple[int, float]] = {}  # id -> (client port, last request segment)
    to_port: dict[int, list[dict]] = {}
    for s in segments:
        found = REQUEST_ID.search(s["payload"])
        if found:
            requests[found.group(1).decode()] = (s["sport"], s["t"])
        to_port.setdefault(s["dport"], []).append(s)
    truth = {r["request_id"]: r for r in map(json.loads, (run_dir / "truth.jsonl").read_text().splitlines())}
    with open(run_dir / "requests.csv", newline="") as f:
        records = list(csv.DictReader(f))
    ends = [float(r["start_wall"]) + float(r["e2e_ms"] or 0) / 1000 for r in records]
    start, end = min(float(r["start_wall"]) for r in records) + 3.0, max(ends) - 0.5
    rows = []
    for r, finished in zip(records, ends):
        t, wire = truth.get(r["request_id"]), requests.get(r["request_id"])
        if r["status"] != "ok" or not t or not wire or not (float(r["start_wall"]) >= start and finished <= end):
            continue
        port, sent = wire
        out = [s for s in to_port.get(port, []) if s["t"] > sent][:4]
        if not out or not out[0]["payload"].startswith(b"HTTP/1.1 200"):
            continue
        ttft = float(r["ttft_ms"])
        rows.append(
            {
                "id": r["request_id"],
                "ttft_err": ttft - (t["first_token"] - t["arrival"]) * 1000,
                "e2e_err": float(r["e2e_ms"]) - (t["last_token"] - t["arrival"]) * 1000,
                "truth_to_wire": (out[0]["t"] - t["first_token"]) * 1000,
                "client_to_wire": ttft - (out[0]["t"] - sent) * 1000,
                "arrival_lag": (t["arrival"] - sent) * 1000,
                "client_first": float(r["start_wall"]) + ttft / 1000,
                "segments": [s["t"] for s in out],
            }
        )
    return rows


def quantiles(values: list[float]) -> str:
    ordered = sorted(abs(v) for v in values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return f"{pick(0.5):7.3f} {pick(0.99):7.3f} {ordered[-1]:7.3f}"


def report(rows: list[dict]) -> None:
    print(f"{len(rows)} ok requests in the steady window; |p50| |p99| max in ms")
    for key, label in (
        ("ttft_err", "ttft error"),
        ("e2e_err", "e2e error"),
        ("truth_to_wire", "truth -> wire"),
        ("client_to_wire", "client -> wire"),
        ("arrival_lag", "arrival lag"),
    ):
        print(f"  {label:15s} {quantiles([r[key] for r in rows])}")
    print("worst TTFT errors: which server segment's wire time does the client's first token carry?")
    for r in sorted(rows, key=lambda r: -abs(r["ttft_err"]))[:5]:
        nearest = min(range(len(r["segments"])), key=lambda i: abs(r["segments"][i] - r["client_first"]))
        print(
            f"  {r['id'][-6:]} ttft {r['ttft_err']:+7.2f} e2e {r['e2e_err']:+6.2f} truth->wire "
            f"{r['truth_to_wire']:+.3f} arrival lag {r['arrival_lag']:+6.2f}: client first token = segment "
            f"{nearest + 1} {1000 * (r['client_first'] - r['segments'][nearest]):+.3f} ms"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--run-time", default="12s")
    parser.add_argument("--stall-client", type=float, default=0, metavar="MS")
    parser.add_argument("--stall-sim", type=float, default=0, metavar="MS")
    args = parser.parse_args()
    segments: list[dict] = []
    stop = threading.Event()
    sniffer = threading.Thread(target=capture, args=(segments, stop), daemon=True)
    sniffer.start()
    with tempfile.TemporaryDirectory() as out:
        cmd = [args.python, *RUN[:2], "run", "--run-time", args.run_time, "--out", out, *RUN[3:]]
        run = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        stallers = [
            threading.Thread(target=stall, args=(run, which, ms), daemon=True)
            for which, ms in (("locust", args.stall_client), ("loadline sim", args.stall_sim))
            if ms
        ]
        for thread in stallers:
            thread.start()
        try:
            stdout, _ = run.communicate(timeout=120)
        finally:
            if run.poll() is None:
                run.kill()
            stop.set()
            sniffer.join(5)
        report(place(segments, Path(stdout.strip().splitlines()[-1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
