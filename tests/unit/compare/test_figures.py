"""The figures of docs/numbers.md from hand-made records, and how they are shown."""

from __future__ import annotations

import pytest

from netprobe.compare.figures import Slo, level_figures, tpot_ms
from netprobe.compare.render import markdown, versus
from netprobe.compare.report import CompareReport, EndpointResult
from netprobe.compare.request import RequestRecord
from netprobe.compare.run import Level, LevelRun


def rec(ttft: float, e2e: float, tokens: int, *, start: float = 0.0, usage: bool = True) -> RequestRecord:
    gap = (e2e - ttft) / (tokens - 1) if tokens > 1 else 0.0
    return RequestRecord(sent_s=start, end_s=start + e2e / 1000, ok=True, ttft_ms=ttft, e2e_ms=e2e,
                         itl_ms=(gap,) * (tokens - 1), output_tokens=tokens, from_usage=usage)


def bad(kind: str, start: float = 0.0) -> RequestRecord:
    return RequestRecord(sent_s=start, end_s=start + 0.01, ok=False, error_kind=kind, error=f"{kind} text")


def test_tpot_is_e2e_less_ttft_over_tokens_less_one() -> None:
    assert tpot_ms(rec(100, 1090, 100)) == pytest.approx(10.0)
    assert tpot_ms(rec(100, 100, 1)) is None


def test_level_figures() -> None:
    records = (rec(100, 1090, 100), rec(300, 1290, 100, start=0.2), rec(200, 2180, 100, usage=False),
               bad("http_503"), bad("timeout"), bad("http_503"))
    f = level_figures(LevelRun(Level(concurrency=4), records, duration_s=2.0), Slo(ttft_ms=250))
    assert (f.requests, f.completed, f.failed) == (6, 3, 3)
    assert f.ttft_ms == {"p50": 200.0, "p95": pytest.approx(290.0), "p99": pytest.approx(298.0)}
    assert f.tpot_ms is not None and f.tpot_ms["p50"] == pytest.approx(10.0)
    assert f.tpot_ms["p99"] == pytest.approx(20.0, rel=0.02)
    assert f.itl_ms is not None and f.itl_ms["p50"] == pytest.approx(10.0)
    assert f.output_tokens == 300 and f.output_tokens_per_s == pytest.approx(150.0)
    assert f.requests_per_s == pytest.approx(1.5) and f.tokens_from_usage == 2
    assert f.request_tokens_per_s is not None
    assert f.request_tokens_per_s["p50"] == pytest.approx(100 / 1.29)
    # goodput: the two requests within 250 ms of TTFT; the failed ones miss it (GuideLLM's rule)
    assert f.slo_met_pct == pytest.approx(100 * 2 / 6) and f.goodput == pytest.approx(1.0)
    assert f.errors == {"http_503": 2, "timeout": 1}
    assert f.error_examples == {"http_503": "http_503 text", "timeout": "timeout text"}
    d = f.to_dict()
    assert d["concurrency"] == 4 and "rate" not in d
    assert set(d) >= {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "output_tokens_per_s", "requests_per_s",
                      "goodput", "errors"}


def test_tpot_target_must_be_met_too_and_no_slo_no_goodput() -> None:
    records = (rec(100, 1090, 100), rec(100, 2080, 100))
    both = level_figures(LevelRun(Level(rate=2.0), records, 1.0), Slo(ttft_ms=200, tpot_ms=15))
    assert both.slo_met_pct == 50.0 and both.goodput == 1.0 and both.to_dict()["rate"] == 2.0
    none = level_figures(LevelRun(Level(rate=2.0), records, 1.0), Slo())
    assert none.goodput is None and none.slo_met_pct is None


def test_all_failed_and_floor() -> None:
    f = level_figures(LevelRun(Level(concurrency=1), (bad("connect"),), 0.01), Slo(ttft_ms=100))
    assert f.ttft_ms is None and f.completed == 0 and f.goodput == 0.0 and f.output_tokens_per_s == 0.0
    assert EndpointResult("u", (f,)).all_failed
    g = level_figures(LevelRun(Level(concurrency=1), (rec(100, 200, 2), rec(20, 200, 2)), 1.0), Slo(),
                      floor_ms=30.0)
    # (70 + 0)/2: never below 0
    assert g.server_ttft_ms is not None and g.server_ttft_ms["p50"] == pytest.approx(35.0)


@pytest.mark.parametrize(("value", "base", "want"), [
    (180, 100, "1.8× / +80 %"), (65, 100, "0.65× / −35 %"), (100, 100, "1× / ±0 %"), (5, None, "–"),
    (5, 0, "–"),
])
def test_versus_the_baseline(value: float, base: float | None, want: str) -> None:
    assert versus(value, base) == want


def test_markdown_is_the_framework_table_against_the_first_endpoint() -> None:
    def endpoint(url: str, ttft: float, e2e: float) -> EndpointResult:
        run = LevelRun(Level(concurrency=1), (rec(ttft, e2e, 11),), 1.0)
        return EndpointResult(url, (level_figures(run, Slo()),))

    report = CompareReport((endpoint("http://a", 100, 200), endpoint("http://b", 200, 400)), "m", 1, 0,
                           "synthetic", None, None, None, 0)
    lines = markdown(report).splitlines()
    assert lines[0].startswith("| endpoint | load | TTFT P50 (ms) | TTFT vs first |")
    assert lines[2].split("|")[4].strip() == "baseline"
    row = [c.strip() for c in lines[3].split("|")]
    assert row[1:5] == ["http://b", "c=1", "200", "2× / +100 %"]
    assert row[7] == "1× / ±0 %"          # 11 tokens in the level's 1 s either way
