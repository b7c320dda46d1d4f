"""A small asyncio streaming client for the simulator tests: real sockets, bounded in time."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from dataclasses import dataclass, field
from urllib.parse import urlparse

from prometheus_client.parser import text_string_to_metric_families


@dataclass
class StreamResult:
    status: int = 0
    tokens: int = 0
    chunk_times: list[float] = field(default_factory=list)  # perf_counter of each content chunk
    start: float = 0.0
    error: str = ""
    done: bool = False
    headers: dict[str, str] = field(default_factory=dict)  # lower-cased names

    @property
    def ttft(self) -> float:
        return self.chunk_times[0] - self.start

    @property
    def itls(self) -> list[float]:
        return [b - a for a, b in zip(self.chunk_times[:-1], self.chunk_times[1:], strict=True)]


async def stream_chat(
    url: str, body: dict, request_id: str = "", timeout: float = 30.0, stop_after_tokens: int | None = None
) -> StreamResult:
    """POST a streaming request and read it to [DONE]; optionally hang up after some tokens."""
    parsed = urlparse(url)
    result = StreamResult()
    payload = json.dumps({"stream": True, **body}).encode()
    head = (
        f"POST {parsed.path} HTTP/1.1\r\nHost: {parsed.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nX-Request-Id: {request_id}\r\n\r\n"
    ).encode()
    reader, writer = await asyncio.wait_for(asyncio.open_connection(parsed.hostname, parsed.port), timeout)
    try:
        result.start = time.perf_counter()
        writer.write(head + payload)
        await asyncio.wait_for(_read(reader, result, stop_after_tokens), timeout)
    finally:
        writer.close()
    return result


async def _read(reader: asyncio.StreamReader, result: StreamResult, stop_after: int | None) -> None:
    status_line = await reader.readline()
    result.status = int(status_line.split()[1])
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        result.headers[name.strip().lower()] = value.strip()
    if result.status != 200:
        return
    while True:
        line = await reader.readline()
        if not line:
            return
        if not line.startswith(b"data: "):
            continue
        data = line[6:].strip()
        if data == b"[DONE]":
            result.done = True
            return
        event = json.loads(data)
        if "error" in event:
            result.error = event["error"]["message"]
            continue
        choices = event.get("choices") or []
        if choices and (choices[0].get("delta", {}).get("content") or choices[0].get("text")):
            result.chunk_times.append(time.perf_counter())
            result.tokens += 1
            if stop_after is not None and result.tokens >= stop_after:
                return


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """/metrics as {(sample name, sorted labels): value}."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def metric(samples: dict, name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels`."""
    return sum(v for (n, lab), v in samples.items() if n == name and set(labels.items()) <= set(lab))


def post_json(url: str, body: dict | None = None, timeout: float = 10.0) -> dict:
    data = json.dumps(body or {}).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def read_truth(path) -> list[dict]:
    return [json.loads(line) for line in open(path)] if path.exists() else []


async def run_streams(
    url: str, bodies: list[dict], prefix: str, poll_metrics: bool = True, timeout: float = 60.0
) -> tuple[list[StreamResult], list[dict]]:
    """Run every body as one concurrent stream; meanwhile scrape /metrics every 50 ms."""
    scrapes: list[dict] = []
    tasks = [
        asyncio.ensure_future(stream_chat(url + "/v1/chat/completions", body, f"{prefix}-{i}", timeout))
        for i, body in enumerate(bodies)
    ]
    deadline = time.monotonic() + timeout
    while poll_metrics and not all(t.done() for t in tasks) and time.monotonic() < deadline:
        scrapes.append(await asyncio.to_thread(scrape, url))
        await asyncio.sleep(0.05)
    results = await asyncio.gather(*tasks)
    return list(results), scrapes


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]
