"""One streamed chat completion, timed from the moment it is sent (as vllm bench serve and GuideLLM
time it: connection set-up, when one is needed, is part of what the user waits for)."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from netprobe.compare.session import stream
from netprobe.probes.sse.client import Limits
from netprobe.probes.sse.parser import SseEvent
from netprobe.probes.sse.runtime import OpenAiChunks

if TYPE_CHECKING:
    import aiohttp

    from netprobe.compare.load import Prompt


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str                     # as given (the label in every output)
    post_url: str                # …/chat/completions
    model: str
    headers: dict[str, str]      # Authorization here, never in a log or an output
    extra_body: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request. ok: a complete stream ([DONE] seen) with at least one token."""

    sent_s: float                      # monotonic send time
    end_s: float
    ok: bool
    error_kind: str | None = None
    error: str | None = None
    ttft_ms: float | None = None       # first token (reasoning or content)
    e2e_ms: float | None = None        # sent → last token
    itl_ms: tuple[float, ...] = ()     # gaps between token chunks
    output_tokens: int = 0
    from_usage: bool = False


class _Chunks(OpenAiChunks):
    """The sse probe's openai-mode reading (tokens stamped by network read, usage, reasoning_content),
    plus whether the stream ended with [DONE]: one cut short at a chunk boundary looks complete."""

    def __init__(self) -> None:
        super().__init__()
        self.done = False

    def on_event(self, ev: SseEvent) -> bool:
        if ev.data.strip() == "[DONE]":
            self.done = True
        return super().on_event(ev)


async def send(session: aiohttp.ClientSession, ep: Endpoint, prompt: Prompt, limits: Limits) -> RequestRecord:
    """Every failure (HTTP status, connect, timeout, a broken stream) is a record, never an exception."""
    body = {"model": ep.model, "messages": list(prompt.messages), "max_tokens": prompt.max_tokens,
            "stream": True, "stream_options": {"include_usage": True}, **ep.extra_body}
    headers = {"Accept": "text/event-stream", "Accept-Encoding": "identity", **ep.headers}
    chunks = _Chunks()
    sent = time.monotonic()
    cap = await stream(session, ep.post_url, headers=headers, body=body, limits=limits,
                       on_event=chunks.on_event)
    end = time.monotonic()
    times = [(t - cap.start_ns) / 1e6 for t in chunks.times_ns]
    usage = (chunks.tokens or {}).get("completion_tokens")
    tokens = usage if usage is not None else len(times)
    kind, error = cap.error_kind, cap.error
    if kind is None and chunks.problem is not None:
        kind, error = "malformed", chunks.problem
    elif kind is None and not chunks.done:
        kind, error = "incomplete", "the stream ended without data: [DONE]"
    elif kind is None and not times:
        kind, error = "no_tokens", "the stream ended without a token"
    return RequestRecord(
        sent_s=sent, end_s=end, ok=kind is None, error_kind=kind, error=error,
        ttft_ms=times[0] if times else None, e2e_ms=times[-1] if times else None,
        itl_ms=tuple(b - a for a, b in itertools.pairwise(times)), output_tokens=tokens,
        from_usage=usage is not None)
