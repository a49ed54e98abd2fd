"""`netprobe target`'s server model (--prefill-ms, --token-ms, --slots): what a client measures through
real HTTP matches what was configured."""

from __future__ import annotations

import asyncio
import itertools
import random
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import openai
import pytest

from netprobe.errors import UsageError
from netprobe.farend.server import make_app, start
from netprobe.probes.sse.model import Server, ServerModel
from netprobe.stats import LogNormal, lognormal_option, percentile


def test_prefill_is_a_constant_or_a_lognormal_through_p50_and_p95() -> None:
    assert lognormal_option("250", "--prefill-ms").quantile(0.95) == pytest.approx(250.0)
    ln = lognormal_option("200,400", "--prefill-ms")
    assert (ln.quantile(0.5), ln.quantile(0.95)) == (pytest.approx(200.0), pytest.approx(400.0))
    server = Server(ServerModel(prefill=ln, seed=7))
    draws = sorted(server.prefill_s() * 1000 for _ in range(20_000))
    assert percentile(draws, 50) == pytest.approx(200.0, rel=0.03)
    assert percentile(draws, 95) == pytest.approx(400.0, rel=0.04)
    again = [Server(ServerModel(prefill=ln, seed=7)).prefill_s() for _ in range(2)]
    assert again[0] == again[1]                       # seeded: the same server draws the same times
    assert lognormal_option("0", "--prefill-ms").draw(random.Random(1)) == 0.0


@pytest.mark.parametrize(("text", "needle"), [
    ("fast", "expected P50 or P50,P95"), ("1,2,3", "expected P50 or P50,P95"), ("-5", "not negative"),
    ("300,200", "below the P50"), ("0,100", "positive P50"), ("inf", "finite"),
])
def test_bad_prefill_names_the_option(text: str, needle: str) -> None:
    with pytest.raises(UsageError, match="--prefill-ms") as err:
        lognormal_option(text, "--prefill-ms")
    assert needle in str(err.value)


def test_cli_rejects_a_bad_prefill_with_exit_2() -> None:
    done = subprocess.run([sys.executable, "-m", "netprobe.cli", "target", "--listen", "127.0.0.1:0",
                           "--prefill-ms", "300,200"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--prefill-ms" in done.stderr


async def _client(model: ServerModel) -> AsyncIterator[openai.AsyncOpenAI]:
    runner = await start(make_app(model=model), "127.0.0.1", 0, grace=0.5)
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    async with openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0) as c:
        await _times(c, 1, {"think_ms": 0})   # the client's first request pays its own set-up
        yield c
    await runner.cleanup()


async def _times(ai: openai.AsyncOpenAI, tokens: int, body: dict[str, int] | None = None) -> list[float]:
    """Seconds from the request to each content token."""
    t0 = time.monotonic()
    stream = await ai.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                              stream=True, max_tokens=tokens, extra_body=body)
    return [time.monotonic() - t0 async for c in stream if c.choices and c.choices[0].delta.content]


@pytest.fixture
async def framework() -> AsyncIterator[openai.AsyncOpenAI]:
    async for c in _client(ServerModel(prefill=LogNormal.through(150, 150), token_ms=30)):
        yield c


async def test_prefill_and_token_pace_are_what_the_client_sees(framework: openai.AsyncOpenAI) -> None:
    times = await _times(framework, 6)
    assert len(times) == 6
    assert 0.148 <= times[0] < 0.25                                  # 150 ms to the first token
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert statistics.median(gaps) == pytest.approx(0.030, abs=0.008)  # then one every 30 ms
    own = await _times(framework, 2, {"think_ms": 20, "interval_ms": 5})   # a request's extras win
    assert own[0] < 0.12


async def test_slots_queue_requests_in_order() -> None:
    async for ai in _client(ServerModel(prefill=LogNormal.through(100, 100), token_ms=20, slots=1)):
        got = await asyncio.gather(*(_times(ai, 3) for _ in range(3)))
        firsts = sorted(t[0] for t in got)
        # one at a time: each waits for the one before to finish (100 ms + 2 × 20 ms)
        assert firsts[0] == pytest.approx(0.10, abs=0.05)
        assert firsts[1] == pytest.approx(0.24, abs=0.06)
        assert firsts[2] == pytest.approx(0.38, abs=0.08)
    async for ai in _client(ServerModel(prefill=LogNormal.through(100, 100), token_ms=20, slots=3)):
        got = await asyncio.gather(*(_times(ai, 3) for _ in range(3)))
        assert max(t[0] for t in got) < 0.2                          # enough slots: nobody waits
