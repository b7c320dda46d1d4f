"""The OpenAI-compatible front end: routes, auth, the gateway's connection cap, admission to a replica.

Every generation request gets a truth record, including the ones turned away (rejected) here.
"""

from __future__ import annotations

import hmac
import itertools
import json
from collections import Counter
from collections.abc import Callable

from loadline.simulator.config import SimConfig
from loadline.simulator.engine import Engine
from loadline.simulator.faults import FaultState
from loadline.simulator.http import STREAM_HEAD, BadRequest, Connection, Request, response
from loadline.simulator.lb import LoadBalancer
from loadline.simulator.openai_api import ApiError, parse_generation
from loadline.simulator.quirks import CLOSE_DELAY_S, KEEP_ALIVE_HEADER, Quirks, is_uuid
from loadline.simulator.reasoning import ReplyShaper
from loadline.simulator.sequence import Sequence
from loadline.simulator.stream import ResponseSink
from loadline.simulator.tokenize_api import TOKENIZE_ROUTES
from loadline.simulator.tokenizer import Tokenizer
from loadline.simulator.truth import TruthLog, new_record
from loadline.simulator.wire import error_body

GENERATE = {"/v1/chat/completions": True, "/v1/completions": False}


class SimApp:
    def __init__(
        self,
        config: SimConfig,
        faults: FaultState,
        engines: list[Engine],
        truth: TruthLog,
        api_key: str | None,
        metrics_text: Callable[[], bytes],
    ) -> None:
        self.config = config
        self.faults = faults
        self.engines = engines
        self.lb = LoadBalancer(engines, config.lb)
        self.truth = truth
        self._api_key = f"Bearer {api_key}".encode() if api_key else None
        self.metrics_text = metrics_text
        self.connections: set[Connection] = set()
        self.http_requests: Counter = Counter()  # (handler, method, status) -> count
        self.gateway_rejected = 0
        self._ids = itertools.count(1)
        self.quirks = Quirks.parse(config.quirks)
        # streamed responses announce keep-alive and are closed after all, like llama-server's
        self.stream_head = (
            STREAM_HEAD[:-2] + KEEP_ALIVE_HEADER + b"\r\n" if self.quirks.close_after_stream else STREAM_HEAD
        )
        self.streams: dict[ResponseSink, tuple[Sequence, Engine]] = {}  # in flight (interrupt quirk)
        self.tokenizer = Tokenizer(config.tokenizer_piece_chars)
        self.shaper = ReplyShaper(config.reply_options(), config.seed)  # reasoning, tool calls (reasoning.py)

    # ---- connection lifecycle (gateway faults) -------------------------------------------
    def on_connect(self, conn: Connection) -> None:
        # The cap models a gateway in front of the API; /metrics and /health are exempt because
        # scrapers and probes reach the pod directly, and a drill must not blind its own scraper.
        cap = self.faults.max_connections
        if cap and len(self.connections) >= cap:
            conn.rejected = True  # read the request (for its id), answer 503, close
        self.connections.add(conn)
        if self.faults.accept_delay_ms > 0:
            conn.hold(self.faults.accept_delay_ms * 1e-3 / self.config.time_scale)

    def on_close(self, conn: Connection) -> None:
        self.connections.discard(conn)

    def on_bad_request(self, conn: Connection, error: BadRequest) -> None:
        self._reply(conn, "other", "?", error.status, error_body(str(error), error.status))

    def close_all(self) -> None:
        for conn in list(self.connections):
            conn.close()

    # ---- routing -------------------------------------------------------------------------
    def _reply(
        self,
        conn: Connection,
        handler: str,
        method: str,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        extra: dict[str, str] | None = None,
    ) -> None:
        self.http_requests[(handler, method, str(status))] += 1
        conn.write(response(status, body, content_type, extra, conn.keep_alive))
        conn.finish_response()

    def handle(self, conn: Connection, req: Request) -> None:
        path, method = req.path, req.method
        if self.quirks.uuid_request_id and "x-request-id" in req.headers and not is_uuid(req.headers["x-request-id"]):
            return self._refuse_request_id(conn, req)
        if path in GENERATE:
            if method != "POST":
                return self._reply(conn, path, method, 405, error_body("use POST", 405))
            return self._generate(conn, req, GENERATE[path])
        if conn.rejected and path.startswith("/v1/"):
            conn.keep_alive = False
            return self._reply(
                conn,
                path,
                method,
                503,
                error_body("gateway: too many connections", 503),
                extra={"Retry-After": str(self.config.retry_after_s)},
            )
        if path in TOKENIZE_ROUTES and method == "POST" and self.config.serve_tokenize:
            return self._tokenize(conn, req)
        if method != "GET":
            status = 405 if path in ROUTES else 404
            return self._reply(conn, "other", method, status, error_body(f"{method} {path} is not served", status))
        if path == "/metrics":
            return self._reply(conn, path, method, 200, self.metrics_text(), "text/plain; version=0.0.4; charset=utf-8")
        if path == "/health":
            up = any(e.up for e in self.engines)
            return self._reply(conn, path, method, 200 if up else 503, b"" if up else error_body("no replica up", 503))
        if path == "/v1/models":
            if not self._authorized(req):
                return self._reply(conn, path, method, 401, error_body("Unauthorized", 401))
            return self._reply(conn, path, method, 200, json.dumps(self._models()).encode())
        if path == "/props" and self.quirks.llamacpp_api:
            cfg = self.config
            props = {
                "default_generation_settings": {"n_ctx": cfg.max_model_len},
                "total_slots": cfg.max_num_seqs,
                "model_path": cfg.model_name,
            }
            return self._reply(conn, path, method, 200, json.dumps(props).encode())
        return self._reply(conn, "other", method, 404, error_body(f"{path} not found", 404))

    def _tokenize(self, conn: Connection, req: Request) -> None:
        """POST /tokenize and /detokenize, in llama-server's and vLLM's shapes (tokenize_api.py)."""
        if not self._authorized(req):
            return self._reply(conn, req.path, "POST", 401, error_body("Unauthorized", 401))
        try:
            answer = TOKENIZE_ROUTES[req.path](
                req.body, self.tokenizer, self.config.max_model_len, self.quirks.llamacpp_api
            )
        except ApiError as exc:
            return self._reply(conn, req.path, "POST", exc.status, error_body(str(exc), exc.status, exc.param))
        self._reply(conn, req.path, "POST", 200, json.dumps(answer).encode())

    def _models(self) -> dict:
        """GET /v1/models as vLLM lists it, or as llama-server does (llamacpp-api quirk)."""
        cfg = self.config
        model = {"id": cfg.model_name, "object": "model", "created": 0, "owned_by": "loadline-sim"}
        if self.quirks.llamacpp_api:  # the whole context (all slots) and the trained one, no max_model_len
            model["meta"] = {"n_ctx": cfg.max_model_len * cfg.max_num_seqs, "n_ctx_train": cfg.max_model_len}
        else:
            model.update(root=cfg.model_name, max_model_len=cfg.max_model_len)
        return {"object": "list", "data": [model]}

    def _refuse_request_id(self, conn: Connection, req: Request) -> None:
        """llama-cpp-python's answer to a non-UUID X-Request-Id: 400, empty body, before any route."""
        if req.path in GENERATE:
            record = new_record(req.headers["x-request-id"], req.received_at, req.path, self.faults.active())
            record.update(status=400, outcome="rejected")
            self.truth.add(record)
        self._reply(conn, req.path if req.path in ROUTES else "other", req.method, 400, b"", content_type="")

    def _authorized(self, req: Request) -> bool:
        if self._api_key is None:
            return True
        return hmac.compare_digest(req.headers.get("authorization", "").encode(), self._api_key)

    # ---- generation ----------------------------------------------------------------------
    def _generate(self, conn: Connection, req: Request, chat: bool) -> None:
        request_id = req.headers.get("x-request-id") or f"sim-{next(self._ids)}"
        if self.quirks.interrupt:  # a new request cuts every stream in flight
            for sink, (seq, owner) in list(self.streams.items()):
                sink.interrupt(seq, owner.abort)
        record = new_record(request_id, req.received_at, req.path, self.faults.active())  # kernel_rx.py

        def reject(
            status: int,
            message: str,
            extra: dict[str, str] | None = None,
            param: str | None = None,
            body: bytes | None = None,
        ) -> None:
            record.update(status=status, outcome="rejected")
            self.truth.add(record)
            if status == 503 and conn.rejected:
                conn.keep_alive = False
                self.gateway_rejected += 1
            self._reply(conn, req.path, "POST", status, body or error_body(message, status, param), extra=extra)

        retry = {"Retry-After": str(self.config.retry_after_s)}
        if conn.rejected:
            return reject(503, "gateway: too many connections", retry)
        if not self._authorized(req):
            return reject(401, "Unauthorized: missing or wrong API key")
        engine = self.lb.pick()
        if engine is None:
            return reject(503, "no replica is up", retry)
        record["replica"] = engine.index
        cfg = self.config
        try:
            gen = parse_generation(
                chat,
                req.body,
                cfg.model_name,
                cfg.max_model_len,
                cfg.block_size,
                cfg.enable_prefix_caching,
                engine.draw_output_len,
                self.tokenizer,
                self.quirks.llamacpp_api,
            )
        except ApiError as exc:
            if (n_prompt := exc.fields.get("n_prompt_tokens")) is not None:
                record["prompt_tokens"] = n_prompt
            return reject(
                exc.status, str(exc), body=error_body(str(exc), exc.status, exc.param, exc.error_type, exc.fields)
            )
        record.update(prompt_tokens=gen.prompt_len, stream=gen.stream)
        if cfg.max_num_queued_reqs and engine.num_waiting >= cfg.max_num_queued_reqs:
            return reject(cfg.queue_full_status, "the server's waiting queue is full; retry later", retry)
        response_id = f"{'chatcmpl' if chat else 'cmpl'}-{request_id}"
        sink = ResponseSink(
            conn,
            gen,
            response_id,
            int(record["arrival"]),
            record,
            self._finished,
            self.stream_head,
            self.shaper.shape(chat, gen.stream, gen.output_target, request_id),
        )
        seq = Sequence(
            request_id,
            gen.prompt_len,
            gen.output_target,
            gen.finish_reason,
            sink,
            gen.hashes,
            engine.draw_fault(gen.output_target),
        )
        if gen.stream and self.quirks.interrupt:
            self.streams[sink] = (seq, engine)
        engine.in_flight += 1
        conn.on_lost = lambda: sink.client_gone(seq, engine.abort)
        engine.submit(seq)

    def _finished(self, sink: ResponseSink, record: dict) -> None:
        self.streams.pop(sink, None)
        if self.quirks.close_after_stream and record["stream"] and record["status"] == 200:
            sink.conn.close_soon(CLOSE_DELAY_S)
        self.engines[record["replica"]].in_flight -= 1
        self.http_requests[(record["endpoint"], "POST", str(record["status"]))] += 1
        self.truth.add(record)


ROUTES = ("/metrics", "/health", "/v1/models", *GENERATE, *TOKENIZE_ROUTES)
