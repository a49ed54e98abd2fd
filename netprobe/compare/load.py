"""What is sent and when: the prompts (the same for every endpoint), the key and the arrival schedule of a
request-rate level (vllm bench serve's model)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netprobe.errors import UsageError

MAX_LEVEL = 1024


@dataclass(frozen=True, slots=True)
class Prompt:
    messages: tuple[dict[str, Any], ...]
    max_tokens: int


def rate_offsets(n: int, rate: float, burstiness: float = 1.0, seed: int = 0) -> list[float]:
    """Send times (s after the level starts) of n requests at `rate` per second.

    As vllm bench serve: inter-arrival times are gamma(shape=burstiness, scale=1/(rate × burstiness)),
    mean 1/rate whatever the burstiness (1: Poisson, < 1 burstier, > 1 more even, inf: constant);
    the first request waits one draw too, and the cumulative times are rescaled so the last one lands
    on n/rate exactly (a sum of draws misses it by a few %, which would move the throughput).
    """
    if n <= 0:
        return []
    if burstiness == float("inf"):
        return [(i + 1) / rate for i in range(n)]
    draw = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        t += draw.gammavariate(burstiness, 1.0 / (rate * burstiness))
        out.append(t)
    scale = (n / rate) / out[-1] if out[-1] > 0 else 1.0
    return [x * scale for x in out]


def parse_levels(text: str, option: str, kind: type[int] | type[float]) -> list[Any]:
    """--concurrency 1,4,16 or --rate 2,5: the levels, each positive (concurrency ≤ 1024)."""
    try:
        levels = [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{option}: {text!r} is not a comma-separated list of numbers") from None
    if not levels:
        raise UsageError(f"{option}: give at least one level")
    for v in levels:
        if not v > 0 or v != v or v == float("inf") or (kind is int and v > MAX_LEVEL):
            high = f" and at most {MAX_LEVEL}" if kind is int else ""
            raise UsageError(f"{option}: every level must be above 0{high}, got {v:g}")
    return levels


def synthetic(n: int, words: int, max_tokens: int, seed: int = 0) -> list[Prompt]:
    """n prompts of `words` words each, different per request (no shared prefix for a cache to reuse)
    and the same for a given seed, so every endpoint gets the same ones."""
    draw = random.Random(seed)
    out = []
    for i in range(n):
        body = " ".join(_VOCAB[draw.randrange(len(_VOCAB))] for _ in range(max(words - 1, 0)))
        text = f"r{i} {body}".strip() if words > 0 else ""
        out.append(Prompt(({"role": "user", "content": text},), max_tokens))
    return out


def from_jsonl(path: Path, max_tokens: int) -> list[Prompt]:
    """One prompt a line: {"prompt": "text"} or {"messages": [...]}, optionally "max_tokens"."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--prompts: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    out = [_prompt(line, i, path, max_tokens) for i, line in enumerate(lines, 1) if line.strip()]
    if not out:
        raise UsageError(f"--prompts: {path} holds no prompt")
    return out


def read_key_file(path: Path | str) -> str:
    """--api-key-file's key (diagnose reads it too, to fail before measuring anything)."""
    try:
        key = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise UsageError(f"--api-key-file: cannot read {path}: {reason}") from None
    if not key:
        raise UsageError(f"--api-key-file: {path} is empty")
    return key


def _prompt(line: str, number: int, path: Path, max_tokens: int) -> Prompt:
    where = f"--prompts: {path} line {number}"
    try:
        item = json.loads(line)
    except ValueError as exc:
        raise UsageError(f"{where}: not JSON ({exc})") from None
    if not isinstance(item, dict):
        raise UsageError(f'{where}: expected an object like {{"prompt": "…"}}')
    tokens = item.get("max_tokens", max_tokens)
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1:
        raise UsageError(f"{where}: max_tokens must be a positive integer")
    if isinstance(item.get("prompt"), str):
        return Prompt(({"role": "user", "content": item["prompt"]},), tokens)
    messages = item.get("messages")
    if isinstance(messages, list) and messages and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        return Prompt(tuple(messages), tokens)
    raise UsageError(f'{where}: needs "prompt" (text) or "messages" (a list of {{role, content}})')


def cycle(prompts: Sequence[Prompt], n: int) -> list[Prompt]:
    """n requests' prompts, going round the list."""
    return [prompts[i % len(prompts)] for i in range(n)]


_VOCAB = ("route", "latency", "token", "model", "server", "answer", "question", "network", "region",
          "shanghai", "tokyo", "window", "evening", "packet", "stream", "budget", "prefill", "decode",
          "cache", "batch", "request", "user", "time", "first", "queue", "gpu", "carrier", "line")
