"""POST /v1/chat/completions: an OpenAI-compatible endpoint that "generates" on a fixed schedule.

A stream is: role chunk, `reasoning_tokens` reasoning_content chunks, `max_tokens` content chunks
(one token each, `interval_ms` apart on a drift-free schedule), a finish chunk, a usage chunk when
`stream_options.include_usage`, then `data: [DONE]`, in OpenAI's exact chunk format.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from netprobe.net.pacing import sleep_until
from netprobe.probes.sse.model import Server
from netprobe.probes.sse.params import Limits, ParamError, int_param
from netprobe.probes.sse.stream import CONFIG, send, start_stream, wait_with_comments

DEFAULT_MODEL = "netprobe-target"
_EXTRAS = ("think_ms", "ping_ms", "interval_ms", "reasoning_tokens")


class BodyTooLarge(ParamError):
    """The request body is over Limits.max_body_bytes (413, not 400)."""


def error(status: int, message: str, *, param: str | None = None, code: str | None = None,
          kind: str = "invalid_request_error") -> web.Response:
    """An error in OpenAI's shape, which its SDKs turn into the matching exception."""
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return web.json_response(body, status=status)


@dataclass(frozen=True)
class ChatParams:
    model: str
    stream: bool
    include_usage: bool
    max_tokens: int
    reasoning_tokens: int
    think_ms: int | None        # None: the server's own prefill (netprobe.probes.sse.model)
    ping_ms: int
    interval_ms: int
    prompt_tokens: int

    def duration_s(self, think_s: float) -> float:
        """Think time, then one token per interval: when the last token is due."""
        tokens = self.reasoning_tokens + self.max_tokens
        return think_s + max(tokens - 1, 0) * self.interval_ms / 1000


def _prompt_tokens(messages: list[Any]) -> int:
    """Whitespace-separated words of every text part: a stand-in for a tokenizer."""
    words = 0
    for message in messages:
        content = message.get("content")
        parts = content if isinstance(content, list) else [content]
        for part in parts:
            text = part.get("text") if isinstance(part, dict) else part
            if isinstance(text, str):
                words += len(text.split())
    return words


def parse_chat(body: Any, query: Mapping[str, str], limits: Limits, token_ms: int = 20) -> ChatParams:
    if not isinstance(body, dict):
        raise ParamError("body", "must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or \
            not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        raise ParamError("messages", "required: a non-empty array of {role, content} objects")
    model = body.get("model", DEFAULT_MODEL)
    if not isinstance(model, str) or not model:
        raise ParamError("model", "must be a non-empty string")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ParamError("stream", "must be true or false")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict) or not isinstance(options.get("include_usage", False), bool):
        raise ParamError("stream_options", 'must be an object like {"include_usage": true}')
    # Newer SDKs send max_completion_tokens; older ones max_tokens.
    tokens_key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    # netprobe extras: body keys (extra_body=) win over query parameters (extra_query=, a probe URL).
    extras = {name: body[name] if name in body else query.get(name) for name in _EXTRAS}
    return ChatParams(
        model=model,
        stream=stream,
        include_usage=bool(options.get("include_usage", False)),
        max_tokens=int_param(body, tokens_key, 16, 1, limits.max_tokens),
        reasoning_tokens=int_param(extras, "reasoning_tokens", 0, 0, limits.max_tokens),
        think_ms=None if extras["think_ms"] is None else
        int_param(extras, "think_ms", 0, 0, limits.max_wait_ms),
        ping_ms=int_param(extras, "ping_ms", 1000, 0, limits.max_ping_ms),
        interval_ms=int_param(extras, "interval_ms", token_ms, limits.min_interval_ms,
                              limits.max_interval_ms),
        prompt_tokens=_prompt_tokens(messages),
    )


def _authorized(request: web.Request, key: str | None) -> bool:
    if key is None:
        return True
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), key.encode())


def _usage(p: ChatParams) -> dict[str, Any]:
    completion = p.max_tokens + p.reasoning_tokens  # OpenAI counts reasoning in completion_tokens
    return {"prompt_tokens": p.prompt_tokens, "completion_tokens": completion,
            "total_tokens": p.prompt_tokens + completion,
            "completion_tokens_details": {"reasoning_tokens": p.reasoning_tokens}}


def _token(p: ChatParams, k: int) -> dict[str, Any]:
    """Delta of the k-th generated token: reasoning first (DeepSeek's reasoning_content), then content."""
    if k < p.reasoning_tokens:
        return {"content": None, "reasoning_content": f"think{k + 1} "}
    return {"content": f"tok{k - p.reasoning_tokens + 1} "}


async def _read_json(request: web.Request, limits: Limits) -> Any:
    too_big = BodyTooLarge("body", f"larger than {limits.max_body_bytes} bytes")
    if request.content_length is not None and request.content_length > limits.max_body_bytes:
        raise too_big
    try:
        raw = await request.read()  # the app's client_max_size stops a chunked body at the cap
    except web.HTTPRequestEntityTooLarge:
        raise too_big from None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ParamError("body", f"not valid JSON ({exc})") from None


async def handle_chat(request: web.Request) -> web.StreamResponse:
    config = request.app[CONFIG]
    if not _authorized(request, config.api_key):
        return error(401, "Incorrect API key provided.", code="invalid_api_key")
    try:
        p = parse_chat(await _read_json(request, config.limits), request.query, config.limits,
                       config.server.model.token_ms)
    except ParamError as exc:
        return error(413 if isinstance(exc, BodyTooLarge) else 400, str(exc), param=exc.name)
    ident, created = f"chatcmpl-{secrets.token_hex(12)}", int(time.time())
    if not p.stream:
        async with config.server.slot():
            await asyncio.sleep(p.duration_s(_think_s(p, config.server)))
        return web.json_response(_completion(p, ident, created))
    return await _stream(request, p, ident, created, config.server)


def _think_s(p: ChatParams, server: Server) -> float:
    return server.prefill_s() if p.think_ms is None else p.think_ms / 1000


def _completion(p: ChatParams, ident: str, created: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "".join(
        f"tok{i + 1} " for i in range(p.max_tokens)), "refusal": None}
    if p.reasoning_tokens:
        message["reasoning_content"] = "".join(f"think{i + 1} " for i in range(p.reasoning_tokens))
    return {"id": ident, "object": "chat.completion", "created": created, "model": p.model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}],
            "usage": _usage(p)}


async def _stream(request: web.Request, p: ChatParams, ident: str, created: int, server: Server
                  ) -> web.StreamResponse:
    base: dict[str, Any] = {"id": ident, "object": "chat.completion.chunk", "created": created,
                            "model": p.model}
    if p.include_usage:
        base["usage"] = None  # as OpenAI does: null on every chunk but the usage chunk

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return b"data: " + json.dumps({**base, "choices": [choice]}).encode() + b"\n\n"

    resp = await start_stream(request)    # headers at once, as servers do while a request waits
    loop = asyncio.get_running_loop()
    try:
        async with server.slot():         # queued (the wait is part of the first token's time)
            start = loop.time() + _think_s(p, server)
            await wait_with_comments(request, resp, start, p.ping_ms, b": keep-alive\n\n")
            await send(request, resp, chunk({"role": "assistant", "content": ""}))
            for k in range(p.reasoning_tokens + p.max_tokens):
                await sleep_until(start + k * p.interval_ms / 1000)  # drift-free, like /sse
                await send(request, resp, chunk(_token(p, k)))
        await send(request, resp, chunk({}, "stop"))
        if p.include_usage:
            usage = {**base, "choices": [], "usage": _usage(p)}
            await send(request, resp, b"data: " + json.dumps(usage).encode() + b"\n\n")
        await send(request, resp, b"data: [DONE]\n\n")
        await resp.write_eof()
    except ConnectionResetError:
        pass  # the client left mid-stream
    return resp
