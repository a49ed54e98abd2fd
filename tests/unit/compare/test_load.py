"""What compare sends and when: prompts the same for every endpoint, vllm's arrival schedule."""

from __future__ import annotations

import itertools
import math
import statistics
from pathlib import Path

import pytest

from netprobe.compare.load import cycle, from_jsonl, parse_levels, rate_offsets, synthetic
from netprobe.errors import UsageError


def _gaps(offsets: list[float]) -> list[float]:
    return [offsets[0], *(b - a for a, b in itertools.pairwise(offsets))]


def test_poisson_arrivals_last_on_n_over_rate_mean_gap_one_over_rate() -> None:
    off = rate_offsets(4000, rate=5.0, burstiness=1.0, seed=1)
    assert off == sorted(off) and off[-1] == pytest.approx(4000 / 5.0)     # vllm rescales onto n/rate
    gaps = _gaps(off)
    assert statistics.fmean(gaps) == pytest.approx(0.2, rel=1e-9)
    # exponential: coefficient of variation 1
    assert statistics.pstdev(gaps) / statistics.fmean(gaps) == pytest.approx(1.0, abs=0.06)


@pytest.mark.parametrize("burstiness", [0.25, 4.0])
def test_burstiness_is_the_gamma_shape(burstiness: float) -> None:
    """gamma(k, 1/(rate·k)): the mean stays 1/rate, the CV is 1/√k (k < 1 burstier, > 1 more even)."""
    gaps = _gaps(rate_offsets(8000, rate=10.0, burstiness=burstiness, seed=2))
    assert statistics.fmean(gaps) == pytest.approx(0.1, rel=1e-9)
    cv = statistics.pstdev(gaps) / statistics.fmean(gaps)
    assert cv == pytest.approx(1 / math.sqrt(burstiness), rel=0.08)


def test_seeded_and_constant_at_infinite_burstiness() -> None:
    assert rate_offsets(50, 3.0, 0.5, seed=9) == rate_offsets(50, 3.0, 0.5, seed=9)
    assert rate_offsets(50, 3.0, 0.5, seed=9) != rate_offsets(50, 3.0, 0.5, seed=10)
    assert rate_offsets(4, 2.0, math.inf) == [0.5, 1.0, 1.5, 2.0]
    assert rate_offsets(0, 2.0) == []


@pytest.mark.parametrize(("text", "kind", "want"),
                         [("1,4,16", int, [1, 4, 16]), ("0.5, 2", float, [0.5, 2.0])])
def test_levels(text: str, kind: type[int] | type[float], want: list[float]) -> None:
    assert parse_levels(text, "--x", kind) == want


@pytest.mark.parametrize(("text", "kind", "needle"), [
    ("1,a", int, "not a comma-separated list"), ("0", int, "above 0"), ("2000", int, "at most 1024"),
    ("", int, "at least one"), ("-1", float, "above 0"), ("nan", float, "above 0"), ("inf", float, "above 0"),
])
def test_bad_levels_name_the_option(text: str, kind: type[int] | type[float], needle: str) -> None:
    with pytest.raises(UsageError, match="--rate") as err:
        parse_levels(text, "--rate", kind)
    assert needle in str(err.value)


def test_synthetic_prompts_have_n_words_differ_per_request_and_repeat_per_seed() -> None:
    a = synthetic(5, 100, 32, seed=3)
    assert all(len(str(p.messages[0]["content"]).split()) == 100 and p.max_tokens == 32 for p in a)
    assert len({str(p.messages[0]["content"]) for p in a}) == 5
    assert a == synthetic(5, 100, 32, seed=3)
    assert [p.messages[0]["content"] for p in cycle(a[:2], 5)] == [a[i % 2].messages[0]["content"]
                                                                   for i in range(5)]


def test_jsonl_prompts(tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text('{"prompt": "hello"}\n\n{"messages": [{"role": "system", "content": "s"}, '
                 '{"role": "user", "content": "u"}], "max_tokens": 7}\n')
    got = from_jsonl(f, 64)
    assert got[0].messages == ({"role": "user", "content": "hello"},) and got[0].max_tokens == 64
    assert len(got[1].messages) == 2 and got[1].max_tokens == 7


@pytest.mark.parametrize(("text", "needle"), [
    ("not json\n", "line 1: not JSON"), ('[1]\n', "expected an object"), ('{"x": 1}\n', 'needs "prompt"'),
    ('{"prompt": "a", "max_tokens": 0}\n', "max_tokens"), ("\n", "holds no prompt"),
])
def test_bad_jsonl_names_the_option_and_line(tmp_path: Path, text: str, needle: str) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text(text)
    with pytest.raises(UsageError, match="--prompts") as err:
        from_jsonl(f, 64)
    assert needle in str(err.value)
    with pytest.raises(UsageError, match="cannot read"):
        from_jsonl(tmp_path / "missing.jsonl", 64)
