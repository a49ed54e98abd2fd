"""Delivery of notifications: one bounded queue and one sender task per notifier, so a receiver that
hangs delays only itself, and the evaluator (let alone probing) never waits for any of them.

Each delivery is retried with exponential backoff and full jitter (tenacity) a bounded number of times
(`retries`), each attempt bounded by the notifier's `timeout`; connection errors, timeouts, 429 and 5xx
are retried, other refusals (404, a bot's "bad signature") are not. A delivery that fails for good is
logged and counted, never raised. URLs (bot tokens live in them), headers and secrets are never logged.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import aiohttp
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from netprobe import __version__
from netprobe.alerts import formats
from netprobe.alerts.formats import Notification
from netprobe.config.alerts import NotifierConfig
from netprobe.logs import log_event

log = logging.getLogger("netprobe.alerts")

MAX_QUEUE = 1000              # notifications waiting per notifier; beyond it the oldest are dropped
BACKOFF = 1.0                 # first retry after up to this many seconds, doubling …
BACKOFF_MAX = 30.0            # … up to this
# bots answer HTTP 200 with an error code; these mean "too fast", worth another try
_RATE_LIMITED = {130101, 45009, 11232, 9499}


@dataclass(frozen=True, slots=True)
class Outcome:
    ok: bool
    error: str | None = None
    retryable: bool = False


@dataclass(slots=True)
class NotifierStats:
    sent: int = 0         # delivered (2xx, and the bot's own code 0)
    failed: int = 0       # given up after every attempt
    retries: int = 0      # failed attempts that were retried
    dropped: int = 0      # dropped from a full queue


class _Failed(Exception):
    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.error)
        self.outcome = outcome


class Notifier:
    """One configured notifier: how to reach it, its queue and counters."""

    def __init__(self, cfg: NotifierConfig, backoff: float = BACKOFF, max_queue: int = MAX_QUEUE) -> None:
        self.cfg = cfg
        self._secret = cfg.read_secret()          # SetupError now rather than at the first alert
        self._backoff = backoff
        self.queue: deque[Notification] = deque()
        self._max = max_queue
        self.wake = asyncio.Event()
        self.stats = NotifierStats()

    @property
    def name(self) -> str:
        return self.cfg.name

    def put(self, n: Notification) -> None:
        if len(self.queue) >= self._max:
            self.queue.popleft()
            self.stats.dropped += 1
            log_event(log, "error", "notification queue full: oldest dropped", notifier=self.name,
                      dropped=self.stats.dropped)
        self.queue.append(n)
        self.wake.set()

    async def attempt(self, session: aiohttp.ClientSession, n: Notification) -> Outcome:
        """One POST; every network failure comes back as an Outcome."""
        url, body = formats.request(self.cfg, self._secret, n)
        headers = {"User-Agent": f"netprobe/{__version__}", **self.cfg.headers}
        try:
            async with session.post(url, json=body, headers=headers,
                                    timeout=aiohttp.ClientTimeout(total=self.cfg.timeout)) as resp:
                status = resp.status
                text = (await resp.content.read(4096)).decode("utf-8", "replace")
        except TimeoutError:
            return Outcome(False, f"no answer within {self.cfg.timeout:g} s", retryable=True)
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            return Outcome(False, self._scrub(exc), retryable=True)
        if not 200 <= status < 300:
            return Outcome(False, f"HTTP {status}: {text[:200].strip()}",
                           retryable=status == 429 or status >= 500)
        return _bot_answer(text)

    async def deliver(self, session: aiohttp.ClientSession, n: Notification) -> Outcome:
        """Attempts with backoff until one succeeds, one fails for good, or `retries` run out."""
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.cfg.retries + 1),
            wait=wait_random_exponential(multiplier=self._backoff, max=BACKOFF_MAX),
            retry=retry_if_exception(lambda e: isinstance(e, _Failed) and e.outcome.retryable),
            reraise=True)
        attempts = 0
        try:
            async for attempt in retrying:
                with attempt:
                    attempts += 1
                    outcome = await self.attempt(session, n)
                    if not outcome.ok:
                        raise _Failed(outcome)
        except _Failed as exc:
            return exc.outcome
        finally:
            self.stats.retries += max(0, attempts - 1)
        return Outcome(True)

    def _scrub(self, exc: BaseException) -> str:
        # aiohttp's messages can quote the URL, whose query or path may hold the bot's token
        text = str(exc) or type(exc).__name__
        for secret in (self.cfg.url, self.cfg.url.split("?")[0], self._secret, *self.cfg.headers.values()):
            if secret:
                text = text.replace(secret, "<redacted>")
        return f"{type(exc).__name__}: {text}"[:300]


def _bot_answer(text: str) -> Outcome:
    """Feishu, DingTalk and WeCom answer 200 with their own code; anything else's 2xx is success."""
    try:
        answer = json.loads(text) if text.strip() else None
    except ValueError:
        return Outcome(True)
    if not isinstance(answer, dict):
        return Outcome(True)
    for key, msg in (("errcode", "errmsg"), ("code", "msg"), ("StatusCode", "StatusMessage")):
        code = answer.get(key)
        if isinstance(code, int) and code != 0:
            return Outcome(False, f"{key} {code}: {str(answer.get(msg, ''))[:200]}",
                           retryable=code in _RATE_LIMITED)
    return Outcome(True)


class Dispatcher:
    """Routes each notification to the notifiers its rule names, in the background."""

    def __init__(self, configs: Sequence[NotifierConfig], backoff: float = BACKOFF,
                 max_queue: int = MAX_QUEUE) -> None:
        self.notifiers = {c.name: Notifier(c, backoff, max_queue) for c in configs}
        self._session: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False

    def start(self) -> None:
        self._session = aiohttp.ClientSession()
        self._tasks = [asyncio.create_task(self._sender(n), name=f"notify:{n.name}")
                       for n in self.notifiers.values() if n.cfg.kind != "log"]

    def submit(self, n: Notification, names: Sequence[str]) -> None:
        """Queue `n` for each named notifier; returns at once. A repeat (a still-firing alert)
        goes only to Alertmanager, which forgets alerts that are not re-sent."""
        for name in names:
            notifier = self.notifiers.get(name)
            if notifier is None or (n.repeat and notifier.cfg.kind != "alertmanager"):
                continue
            if notifier.cfg.kind == "log":
                _log_line(n)
                notifier.stats.sent += 1
            else:
                notifier.put(n)

    def stats(self) -> dict[str, dict[str, int]]:
        """Per notifier: queued, sent, failed, retries, dropped (for /metrics)."""
        return {name: {"queued": len(n.queue), **asdict(n.stats)} for name, n in self.notifiers.items()}

    async def _sender(self, notifier: Notifier) -> None:
        assert self._session is not None
        while True:
            if not notifier.queue:
                if self._closing:
                    return
                await notifier.wake.wait()
                notifier.wake.clear()
                continue
            n = notifier.queue[0]
            try:
                outcome = await notifier.deliver(self._session, n)
            except Exception as exc:   # a bug in a payload must not end this notifier's sender
                outcome = Outcome(False, f"{type(exc).__name__}: {exc}")
            if notifier.queue and notifier.queue[0] is n:
                notifier.queue.popleft()
            if outcome.ok:
                notifier.stats.sent += 1
                log_event(log, "info", "notification sent", notifier=notifier.name, alert=n.id, state=n.state,
                          repeat=n.repeat)
            else:
                notifier.stats.failed += 1
                log_event(log, "error", "notification failed", notifier=notifier.name, kind=notifier.cfg.kind,
                          alert=n.id, state=n.state, error=outcome.error)

    async def send_now(self, n: Notification) -> dict[str, Outcome]:
        """One attempt at `n` for every notifier at once, no retries (`netprobe alerts test`)."""
        async with aiohttp.ClientSession() as session:
            names = list(self.notifiers)

            async def one(notifier: Notifier) -> Outcome:
                if notifier.cfg.kind == "log":
                    _log_line(n)
                    return Outcome(True)
                return await notifier.attempt(session, n)

            outcomes = await asyncio.gather(*(one(self.notifiers[name]) for name in names))
        return dict(zip(names, outcomes, strict=True))

    async def close(self, timeout: float) -> None:
        """Let queued notifications go out for up to `timeout` seconds, then stop; never longer."""
        self._closing = True
        for notifier in self.notifiers.values():
            notifier.wake.set()
        if self._tasks:
            _, late = await asyncio.wait(self._tasks, timeout=timeout)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=0.1)
        left = sum(len(n.queue) for n in self.notifiers.values())
        if left:
            log_event(log, "warning", "shutdown left notifications unsent", unsent=left)
        if self._session is not None:
            await self._session.close()


def _log_line(n: Notification) -> None:
    log_event(log, "warning" if n.state == "firing" else "info", f"alert {n.state}", alert=n.rule.name,
              agent=n.agent, target=n.target, metric=n.rule.metric, value=n.value, op=n.rule.op,
              threshold=n.rule.threshold, clear_threshold=n.rule.clear_at, probe=n.probe,
              started_at=formats.iso_or_none(n.started_at), ended_at=formats.iso_or_none(n.ended_at),
              window_end=formats.iso_or_none(n.window_end),
              **({"local": n.local, "agents": ",".join(n.agreement.agents),
                  "datacenter": n.agreement.group.datacenter, "line": n.agreement.group.line}
                 if n.agreement is not None else {}))
