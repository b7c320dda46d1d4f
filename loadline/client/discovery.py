"""What the target serves: the model's name and how many tokens of context a request may use.

Asked once per process and host (users spawn together: one round of GETs for all of them). Every
engine says its context length somewhere else:
- vLLM and SGLang: `max_model_len` in GET /v1/models;
- llama.cpp's llama-server: `meta.n_ctx` in /v1/models (the whole context) and, per slot (what one
  request may use), `default_generation_settings.n_ctx` in GET /props;
- SGLang's native API: GET /get_model_info (and /get_server_info's `context_length`);
- TGI: GET /info `max_total_tokens` (prompt + output) and `max_input_tokens` (older:
  `max_input_length`) for the prompt alone.
The smallest number found wins. A server that answers none of these (llama-cpp-python's) has no
known limit until it refuses a prompt: the 400 then states the limit, and `learn_from_refusal`
keeps it for the next prompts to that host.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import gevent.lock
import requests

# (path, key paths into its JSON) tried after /v1/models when that did not give max_model_len
_CONTEXT_ROUTES: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...] = (
    ("/props", (("default_generation_settings", "n_ctx"),)),  # llama.cpp, per slot
    ("/get_model_info", (("max_context_length",), ("context_length",))),  # SGLang
    ("/get_server_info", (("context_length",),)),  # SGLang server args
    ("/info", (("max_total_tokens",),)),  # TGI
)
_INPUT_KEYS = (("max_input_tokens",), ("max_input_length",))  # TGI's prompt limit in /info
# How a refused prompt states the context length (HTTP 400); llama-server's error object also
# carries it as a field, `n_ctx` (type exceed_context_size_error).
_LIMIT_IN_REFUSALS = (
    re.compile(
        r"exceeds? context window of (\d+)"
    ),  # llama-cpp-python: "Requested tokens (N) exceed context window of 2048"
    re.compile(r"maximum context length is (\d+)"),  # vLLM, OpenAI
    re.compile(r"available context size \((\d+) tokens\)"),  # llama-server
)


@dataclass(frozen=True)
class ServedModel:
    name: str = "default"
    context: int = 0  # prompt + output tokens one request may use; 0 = unknown
    max_input: int = 0  # a separate cap on the prompt alone (TGI); 0 = none
    source: str = ""  # where `context` was read, for the log


def _dig(data: object, path: tuple[str, ...]) -> int:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, int) and not isinstance(data, bool) and data > 0 else 0


def _get_json(session: requests.Session, url: str, timeout: float) -> object:
    try:
        response = session.get(url, timeout=timeout)
        return response.json() if response.status_code == 200 else None
    except (requests.RequestException, ValueError):
        return None


def probe(session: requests.Session, host: str, timeout: float) -> ServedModel | None:
    """Ask the server; None when /v1/models did not answer (not cached: the next user asks again)."""
    listing = _get_json(session, f"{host}/v1/models", timeout)
    try:
        model = listing["data"][0]  # type: ignore[index]
        name = str(model["id"])
    except (TypeError, KeyError, IndexError):
        return None
    found: list[tuple[int, str]] = []
    if max_model_len := _dig(model, ("max_model_len",)):
        return ServedModel(name, max_model_len, 0, "/v1/models max_model_len")
    if n_ctx := _dig(model, ("meta", "n_ctx")):
        found.append((n_ctx, "/v1/models meta.n_ctx"))
    max_input = 0
    for path, keys in _CONTEXT_ROUTES:
        data = _get_json(session, host + path, timeout)
        hits = [(value, f"{path} {'.'.join(key)}") for key in keys if (value := _dig(data, key))]
        if hits:
            found.append(hits[0])
            max_input = next((v for key in _INPUT_KEYS if (v := _dig(data, key))), 0) if path == "/info" else 0
            break
    if not found:
        return ServedModel(name)
    context, source = min(found)
    return ServedModel(name, context, max_input, source)


def discover(session: requests.Session, host: str, timeout: float) -> ServedModel:
    """The served model, cached per process and host; ServedModel() ('default', no limit) on failure."""
    with _lock:
        if host not in _cache:
            served = probe(session, host, timeout)
            if served is None:
                return ServedModel()  # any real failure shows up, more usefully, in the first request
            _cache[host] = served
        return _cache[host]


def context_in_refusal(body: str) -> int:
    """The context length a 400's body states (0 when it states none)."""
    try:
        if n_ctx := _dig(json.loads(body), ("error", "n_ctx")):
            return n_ctx
    except ValueError:
        pass
    for pattern in _LIMIT_IN_REFUSALS:
        if match := pattern.search(body):
            return int(match.group(1))
    return 0


def learn_from_refusal(host: str, body: str) -> None:
    """Remember the context length a refused request's body states, for this host's next prompts."""
    if limit := context_in_refusal(body):
        _learned[host] = min(limit, _learned.get(host) or limit)


def learned_context(host: str) -> int:
    return _learned.get(host, 0)


_cache: dict[str, ServedModel] = {}
_learned: dict[str, int] = {}  # host -> context length stated in a 400 (greenlets of one process share it)
_lock = gevent.lock.BoundedSemaphore()
