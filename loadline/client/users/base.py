"""The shared base of every Loadline user: one HTTP attempt -> one exact RequestRecord.

Users own a lean keep-alive connection (connection.py; one per user like a browser tab) instead of
Locust's HttpSession, because the per-token path must stay cheap and exactly timed, and because we
fire the Locust request event ourselves: exactly one E2E event
per finished attempt (so the Aggregated row counts one per request), none for a cancelled stream.
TTFT, TPOT and ITL are logged straight into their own stats rows (loadline/client/locust_stats.py),
which Locust's web UI, CSV and HTML show but which never enter the Aggregated row (see README,
"Locust stats").
"""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import dataclass
from time import perf_counter

import gevent
import orjson
import requests
from gevent import GreenletExit
from locust import User, constant
from locust.exception import StopUser

from loadline.client.connection import Connection, ConnectTimeout, ReadTimeout, Response
from loadline.client.discovery import discover, learn_from_refusal, learned_context
from loadline.client.failures import TRANSPORT_EXCEPTIONS, classify, exception_chain, invalid_request
from loadline.client.keepalive import stale_retried
from loadline.client.locust_stats import report_attempt
from loadline.client.measure import fill_timings
from loadline.client.options import INVALID, UserSettings
from loadline.client.refusal import one_line, read_refusal
from loadline.client.reply_checks import is_event_stream, short_reply
from loadline.client.sizing import TokenSpace, open_space, prompt_budget
from loadline.client.streaming import StreamFailure, StreamResult, chat_content, read_stream, valid_usage
from loadline.core.errors import UsageError
from loadline.core.identity import next_request_id, next_user_id, worker_id
from loadline.core.records import CANCELLED, ERROR, OK, ErrorClass, RequestRecord
from loadline.core.redact import SAMPLE_CHARS, sample

log = logging.getLogger("loadline")


class TotalTimeout(Exception):
    """The whole attempt took longer than --request-timeout."""


def settings_for(environment) -> UserSettings | None:
    """Settings built once per test start by the plugin (or here, for users run without it)."""
    settings = getattr(environment, "loadline_settings", None)
    if settings == INVALID:
        return None  # the reason was logged once at test start; the user's task stops it quietly
    if settings is None:
        settings = UserSettings.from_options(environment.parsed_options)
        environment.loadline_settings = settings
    return settings


@dataclass
class PromptPlan:
    """One request's prompt and lengths, decided before it is sent."""

    messages: list[dict]
    tokens: int  # the whole prompt in the target's tokens, as built and counted (prompt_tokens_requested)
    max_tokens: int  # the reply's cap sent (0 = the server decides)


@dataclass
class Lane:
    """One open-loop request slot: its own keep-alive connection, and when its current request was due."""

    conn: Connection
    due_wall: float | None = None  # time.time() the arrival schedule said the request was due
    trace_index: int | None = None  # trace replays: the trace request being sent


def user_streams(seed: int, worker: int, user: str) -> tuple[random.Random, random.Random]:
    """A user's two random streams: its workload (prompt and reply lengths, think times, sessions) and
    its texts' words. With a seed, user k of worker w always draws the same workload and says the same
    things (and differs from other workers). Apart because building a text to a length draws as many
    words as the target's tokenizer needs: on one stream a server that counts differently would shift
    every later length and think time, and a twin replaying the run's seed would draw another load."""
    if not seed:
        return random.Random(), random.Random()
    return random.Random(f"{seed}-{worker}-{user}"), random.Random(f"{seed}-{worker}-{user}-text")


class LLMUser(User):
    """Abstract: subclasses define the request body and which endpoint they call."""

    abstract = True
    wait_time = constant(0)  # pacing (think time, event intervals) is done inside the tasks
    endpoint = "/v1/chat/completions"
    kind = "chat"
    template = "chat"  # how the server wraps the messages: "chat" (its chat template) or "completion" (none)
    content_of = staticmethod(chat_content)

    def on_start(self) -> None:
        self.conn: Connection | None = None
        settings = settings_for(self.environment)
        # None: the options failed validation; every task stops the user first (check_settings), so the
        # methods below, which run after it, narrow it with an assert
        self.settings: UserSettings | None = settings
        if settings is None:
            return
        self.user_id = next_user_id()
        worker = getattr(self.environment.runner, "worker_index", 0)
        self.rng, self.text_rng = user_streams(settings.seed, worker, self.user_id.split("-u")[-1])
        self.auth = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self.base_url = (self.host or "").rstrip("/")
        self.served = self._discover()
        try:
            self.tokens: TokenSpace = open_space(
                self._session, self.base_url, settings.tokenizer, settings.connect_timeout
            )
        except UsageError as exc:
            log.error("loadline: %s", exc)
            raise StopUser() from None
        self.model = settings.model or self.served.name
        self.stats_name = f"{self.endpoint} [{self.kind}]"
        self.conn = self._connection()

    def _discover(self):
        with self._session() as session:
            return discover(session, self.base_url, self.settings.connect_timeout)

    def _session(self) -> requests.Session:
        # The cold path (a few GETs per process and host, /tokenize between requests) keeps requests;
        # like the token path it goes straight to the target (no proxy variables: a proxy would be
        # measured as the service).
        session = requests.Session()
        session.trust_env = False
        session.headers.update(self.auth)
        return session

    def _connection(self) -> Connection:
        s = self.settings
        assert s is not None  # on_start had settings; open_lane runs after check_settings
        try:
            return Connection(self.base_url, s.connect_timeout, s.first_token_timeout, self.auth)
        except ValueError as exc:  # not an http(s) URL: the precheck says so before any load; a user stops
            log.error("loadline: %s", exc)
            raise StopUser() from None

    def prompt_budget(self, max_tokens: int) -> int:
        """The most tokens (the target's) a prompt may have beside a reply of max_tokens; 0 = no limit known."""
        s = self.settings
        assert s is not None  # check_settings passed
        exact = self.tokens.exact
        if s.max_context_tokens >= 0:
            return prompt_budget(s.max_context_tokens, max_tokens, exact=exact)
        known = [c for c in (self.served.context, learned_context(self.base_url)) if c]
        return prompt_budget(min(known), max_tokens, self.served.max_input, exact) if known else 0

    def system_messages(self) -> list[dict]:
        """The shared system prompt (--system-prompt-tokens of the target's tokens), or none."""
        s = self.settings
        assert s is not None  # check_settings passed
        n = s.prompts.system_prompt_tokens
        return [{"role": "system", "content": self.tokens.fixed_text(n)}] if n > 0 else []

    def plan(self, history: list[dict], text: str | None = None, whole: bool = True) -> PromptPlan:
        """The next request: `history` plus a user message (`text`, else built to a drawn length), the
        reply's cap drawn, all trimmed to fit the context in the target's tokens.

        `whole`: the drawn length is the whole prompt's (history and template included: single-shot
        users), else the new message's alone (a chat turn; its history comes on top)."""
        s, space = self.settings, self.tokens
        assert s is not None  # check_settings passed
        max_tokens = s.output.sample(self.rng) if s.output is not None else s.max_tokens
        budget = self.prompt_budget(max_tokens)
        if text is None:
            target = s.prompts.draw_tokens(self.rng)
            empty = [{"role": "user", "content": ""}]
            if whole:
                target -= space.prompt_tokens(self.template, history + empty)
            if budget:  # a message longer than the context can hold beside the system prompt is never sent
                system = [m for m in history[:1] if m["role"] == "system"]
                target = min(target, budget - space.prompt_tokens(self.template, system + empty))
            text, _ = space.build(self.text_rng, max(1, target))
        messages = space.fit(self.template, history + [{"role": "user", "content": text}], budget)
        return PromptPlan(messages, space.prompt_tokens(self.template, messages), max_tokens)

    def on_stop(self) -> None:
        if self.conn is not None:
            self.conn.close()

    def open_lane(self) -> Lane:
        """A new connection with this user's headers (open-loop users run one per request in flight)."""
        return Lane(self._connection())

    def check_settings(self) -> None:
        """Tasks call this first: a user whose options failed validation stops without a traceback."""
        if self.settings is None:
            raise StopUser()

    # -- request bodies -------------------------------------------------------------------------
    def body(self, prompt: str | list[dict], max_tokens: int | None = None) -> dict:
        """Chat body from a message list; subclasses override for other endpoints."""
        s = self.settings
        assert s is not None  # check_settings passed
        body: dict = {"model": self.model, "messages": prompt, "stream": s.stream}
        return self._common(body, max_tokens)

    def _common(self, body: dict, max_tokens: int | None = None) -> dict:
        s = self.settings
        assert s is not None  # check_settings passed
        max_tokens = s.max_tokens if max_tokens is None else max_tokens
        if max_tokens > 0:
            body["max_tokens"] = max_tokens
        if s.ignore_eos:
            # exact reply lengths: vLLM, SGLang and llama.cpp read ignore_eos; vLLM and SGLang also
            # min_tokens (REFERENCE-workloads.md section 3); TGI has neither and may stop early
            body["ignore_eos"] = True
            if max_tokens > 0:
                body["min_tokens"] = max_tokens
        if s.stream:
            body["stream_options"] = {"include_usage": True}
        return body

    # -- sending --------------------------------------------------------------------------------
    def send(
        self, body: dict, session_id: str = "", turn: int = 0, lane: Lane | None = None, plan: PromptPlan | None = None
    ) -> StreamResult | None:
        """One logical request: attempts with capped, Retry-After-honouring retries on 429/503.

        `lane`: open-loop users' connection and due time for this request (users/arrivals.py).
        `plan`: the lengths asked for (recorded beside what came back; the server's prompt count
        refines the token counting)."""
        payload = _json_body(body)
        attempt = 0
        result, retry_after = self._attempt(payload, session_id, turn, attempt, lane, plan)
        s = self.settings
        assert s is not None  # check_settings passed
        while retry_after is not None and attempt < s.max_retries:
            gevent.sleep(min(retry_after, s.retry_cap))
            attempt += 1
            result, retry_after = self._attempt(payload, session_id, turn, attempt, lane, plan)
        if result is not None and plan is not None and result.usage:
            prompt_tokens = result.usage.get("prompt_tokens")
            if isinstance(prompt_tokens, int) and prompt_tokens > 0:
                self.tokens.observe(self.template, plan.messages, prompt_tokens)
        return result

    def _attempt(
        self,
        payload: bytes,
        session_id: str,
        turn: int,
        attempt: int,
        lane: Lane | None = None,
        plan: PromptPlan | None = None,
    ) -> tuple[StreamResult | None, float | None]:
        s = self.settings
        conn = lane.conn if lane is not None else self.conn
        rec = RequestRecord(
            request_id=next_request_id(),
            worker_id=worker_id(),
            user_id=self.user_id,
            user_class=type(self).__name__,
            session_id=session_id,
            turn=turn,
            endpoint=self.endpoint,
            model=self.model,
            start_wall=0.0,
            attempt=attempt,
            due_wall=lane.due_wall if lane is not None else None,
            trace_index=lane.trace_index if lane is not None else None,
        )
        assert s is not None  # check_settings passed
        max_tokens = plan.max_tokens if plan is not None else s.max_tokens
        if plan is not None:
            rec.prompt_tokens_requested, rec.token_counter = plan.tokens, self.tokens.source
        rec.output_tokens_requested = max_tokens or None
        self.environment.loadline_records.begin()  # in flight until _finish adds the row (a lost worker's count)
        result = StreamResult()
        retry_after: float | None = None
        response: Response | None = None
        headers = {"Content-Type": "application/json"}
        if s.request_id_header:
            headers[s.request_id_header] = rec.request_id
        rec.start_wall = time.time()
        t0 = perf_counter()
        try:
            with gevent.Timeout(s.request_timeout, TotalTimeout):
                assert conn is not None  # on_start opened it when it had settings
                response = conn.post(self.endpoint, payload, headers)
                # the clock starts when the request's last byte left (connection.py), not before
                # this user's own Python ran
                t0, rec.start_wall, headers_at = response.sent_perf, response.sent_wall, response.headers_at
                rec.connect_ms = response.connect_ms
                rec.ttfb_ms = (headers_at - t0) * 1000
                rec.http_status = response.status
                content_type = response.header("Content-Type")
                rec.content_type = content_type[:100]
                rec.stale_retries = response.stale_retries
                if response.status != 200:
                    retry_after = self._http_failure(rec, response)
                elif s.stream and not is_event_stream(content_type):
                    self._fail(
                        rec,
                        ErrorClass.NOT_EVENT_STREAM,
                        f"HTTP 200 but Content-Type {content_type[:60]!r}, "
                        "not text/event-stream (a login page? a proxy?)",
                    )
                    # what came instead, for the report (validity): the first bytes, redacted
                    rec.error_detail = sample(response.read_all(4 * SAMPLE_CHARS), (s.api_key,))
                elif s.stream:
                    read_stream(response, self.content_of, result)
                    if short := short_reply(result, max_tokens if s.ignore_eos else 0):
                        self._fail(rec, ErrorClass.TRUNCATED, f"reply cut short: {short}")
                else:
                    try:
                        self._read_whole(response, result)
                    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                        json_body = "json" in content_type.lower() or not content_type
                        self._fail(
                            rec,
                            ErrorClass.MALFORMED if json_body else ErrorClass.NOT_EVENT_STREAM,
                            f"the response ({content_type[:60] or 'no Content-Type'}) is not an OpenAI "
                            "completion object",
                        )
        except GreenletExit:
            self._fail(rec, ErrorClass.CANCELLED, "test stopped while the request was in flight", CANCELLED)
            self._finish(rec, result, t0)
            raise
        except TotalTimeout:
            self._fail(rec, ErrorClass.TIMEOUT, f"request took longer than {s.request_timeout} s")
        except StreamFailure as exc:
            error_class = exc.error_class
            if error_class == ErrorClass.STREAM_ERROR:  # llama-cpp-python refuses long prompts in the stream
                learn_from_refusal(self.base_url, str(exc))
                if invalid_request(200, str(exc)):
                    error_class = ErrorClass.INVALID_REQUEST
            self._fail(rec, error_class, str(exc))
        except ConnectTimeout:
            self._fail(rec, ErrorClass.TIMEOUT, f"no connection within {s.connect_timeout} s")
        except ReadTimeout:
            self._fail(rec, ErrorClass.TIMEOUT, f"no response within {s.first_token_timeout} s")
        except TRANSPORT_EXCEPTIONS as exc:
            rec.stale_retries = int(stale_retried(exception_chain(exc)))
            self._fail(rec, classify(exc), one_line(exc))
        except Exception as exc:  # a client bug must not kill the user nor lose the record
            # type only: an exception's text can quote request headers, i.e. the API key
            log.error("loadline client error: %s", type(exc).__name__)
            self._fail(rec, ErrorClass.CLIENT, type(exc).__name__)
        finally:
            if response is not None:
                response.close()  # the connection is kept only when the reply's body really ended
        self._finish(rec, result, t0)
        return (result if rec.status == OK else None), retry_after

    def _http_failure(self, rec: RequestRecord, response: Response) -> float | None:
        s = self.settings
        assert s is not None  # check_settings passed
        refused = read_refusal(response, (s.api_key,), self.base_url)
        rec.error_detail = refused.detail
        self._fail(rec, refused.error_class, refused.message)
        return refused.retry_after

    def _read_whole(self, response: Response, result: StreamResult) -> None:
        data = json.loads(response.read_all())
        choice = data["choices"][0]
        if "message" in choice:
            message = choice["message"]
            text = message.get("content")
            result.tool_calls = len(message.get("tool_calls") or [])  # a tool-call reply: no content, complete
        else:
            text = choice.get("text")
        result.pieces.append(text or "")
        result.usage = valid_usage(data["usage"]) if data.get("usage") else None
        result.finish_reason = choice.get("finish_reason") or ""
        result.done = True
        result.ended_at = response.arrival

    @staticmethod
    def _fail(rec: RequestRecord, error_class: ErrorClass, message: str, status: str = ERROR) -> None:
        rec.status, rec.error_class, rec.error_message = status, error_class, message[:300]

    def _finish(self, rec: RequestRecord, result: StreamResult, t0: float) -> None:
        gaps = fill_timings(rec, result, t0, result.ended_at or perf_counter())
        if rec.due_wall is not None and rec.start_wall:
            rec.lateness_ms = max(0.0, (rec.start_wall - rec.due_wall) * 1000)
        self.environment.loadline_records.add(rec)
        if rec.status != CANCELLED:
            report_attempt(self.environment, self.stats_name, self.endpoint, rec, gaps)


def _json_body(body: dict) -> bytes:
    """The request's JSON: orjson's (a fifth of json.dumps' time, UTF-8 and no spaces), or json's for
    what orjson refuses (a dataset's lone surrogate), which escapes it."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body).encode()
