"""Each alert metric's window value from real stored envelopes: SQLite here, the same scenarios on
PostgreSQL below (marked postgres), and one engine run end to end on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from netprobe.alerts.engine import AlertEngine
from netprobe.alerts.formats import Notification
from netprobe.alerts.values import Value, WindowReader
from netprobe.config.alerts import AlertRule
from netprobe.probes.results import envelope
from netprobe.probes.sse.runtime import SseResult
from netprobe.probes.tcp.runtime import TcpResult
from netprobe.stats import jitter, loss_pct, rtt_stats
from netprobe.store import Store, open_store
from tests.support.path_events import C163, CN2, GT, mtr_envelope
from tests.support.pg import scratch_database
from tests.support.store import AGENT, TARGET, icmp_envelope, owd_envelope, path_events, typed

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
W = timedelta(minutes=5)


def t(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def tcp_envelope(started_at: datetime, samples: list[float | None], target: str) -> dict[str, Any]:
    got = [s for s in samples if s is not None]
    result = TcpResult(probe="tcp", host=TARGET["host"], started_at=started_at,
                       status="ok" if got else "down", port=443, sent=len(samples), received=len(got),
                       loss_pct=loss_pct(len(samples), len(got)), connect_ms=rtt_stats(got),
                       jitter_ms=jitter(samples), samples_ms=samples)
    return envelope(result, AGENT, {**TARGET, "id": target})


def sse_envelope(started_at: datetime, stalls: int, seconds: float, status: str = "ok") -> dict[str, Any]:
    result = SseResult(probe="sse", host="h", started_at=started_at, status=status,  # type: ignore[arg-type]
                       first_event_ms=120.0, gaps_ms={"p50": 20.0, "p95": 40.0, "p99": 60.0, "max": 900.0},
                       stalls=stalls, duration_s=seconds, sent=1, received=int(status == "ok"),
                       loss_pct=0.0 if status == "ok" else 100.0,
                       samples_ms=[120.0] if status == "ok" else [])
    return envelope(result, AGENT, TARGET)


class ValueScenarios:
    """Subclasses provide `url`: a fresh database per test."""

    @pytest.fixture
    async def store(self, url: str) -> AsyncIterator[Store]:
        s = await open_store(url)
        yield s
        await s.close()

    async def test_loss_pct_over_the_windows_rounds(self, store: Store) -> None:
        await store.write(typed([icmp_envelope(t(0), [30.0, None, 31.0, None]),    # 2 of 4 lost
                                 icmp_envelope(t(4), [30.0] * 6),                    # 0 of 6
                                 icmp_envelope(t(5), [None] * 10)]))                 # next window
        got = await WindowReader(store, None).values("loss_pct", T0, T0 + W)
        assert got == {("sh-ct-1", "hk-cn2"): Value(20.0, "icmp")}                 # 100·2/10
        nxt = await WindowReader(store, "sh-ct-1").values("loss_pct", T0 + W, T0 + 2 * W)
        assert nxt == {("sh-ct-1", "hk-cn2"): Value(100.0, "icmp")}
        assert await WindowReader(store, "other-agent").values("loss_pct", T0, T0 + W) == {}

    async def test_icmp_is_preferred_and_mtr_path_loss_stands_in(self, store: Store) -> None:
        await store.write(typed([icmp_envelope(t(1), [30.0] * 10),                   # hk-cn2: icmp and mtr
                                 mtr_envelope(t(1), CN2, reached=False),             # mtr: 100 % path loss
                                 mtr_envelope(t(2), CN2, target="mtr-only", reached=False)]))
        got = await WindowReader(store, None).values("loss_pct", T0, T0 + W)
        assert got == {("sh-ct-1", "hk-cn2"): Value(0.0, "icmp"),
                       ("sh-ct-1", "mtr-only"): Value(100.0, "mtr")}

    async def test_rtt_p95_from_merged_sketches_and_tcp_as_the_last_resort(self, store: Store) -> None:
        rng = np.random.default_rng(7)
        rounds = [list(rng.lognormal(np.log(60), 0.3, 20)) for _ in range(5)]
        await store.write(typed([icmp_envelope(t(i), r) for i, r in enumerate(rounds)]))
        await store.write(typed([tcp_envelope(t(1), [40.0, 42.0, None, 44.0], "tcp-only")]))
        got = await WindowReader(store, None).values("rtt_p95_ms", T0, T0 + W)
        exact = float(np.percentile(np.concatenate(rounds), 95))
        icmp = got[("sh-ct-1", "hk-cn2")]
        assert icmp.probe == "icmp" and icmp.value == pytest.approx(exact, rel=0.03)   # DDSketch, 1 %
        tcp = got[("sh-ct-1", "tcp-only")]
        # three samples: the sketch's rank-based quantile, not an interpolated one
        assert tcp.probe == "tcp" and tcp.value is not None and 40.0 <= tcp.value <= 44.0 * 1.01

    async def test_rtt_of_a_window_with_nothing_received_is_no_value(self, store: Store) -> None:
        await store.write(typed([icmp_envelope(t(0), [None] * 5)]))
        got = await WindowReader(store, None).values("rtt_p95_ms", T0, T0 + W)
        assert got == {("sh-ct-1", "hk-cn2"): Value(None, "icmp")}

    async def test_jitter_is_the_mean_of_the_rounds(self, store: Store) -> None:
        await store.write(typed([icmp_envelope(t(0), [30.0, 32.0, 30.0]),            # jitter 2
                                 icmp_envelope(t(1), [30.0, 36.0])]))                # jitter 6
        got = await WindowReader(store, None).values("jitter_ms", T0, T0 + W)
        assert got == {("sh-ct-1", "hk-cn2"): Value(4.0, "icmp")}

    async def test_stalls_per_min_of_sse_streams(self, store: Store) -> None:
        await store.write(typed([sse_envelope(t(0), 1, 60.0), sse_envelope(t(2), 3, 60.0),
                                 sse_envelope(t(3), 9, 9.0, status="down")]))        # not a stream
        got = await WindowReader(store, None).values("stalls_per_min", T0, T0 + W)
        assert got == {("sh-ct-1", "hk-cn2"): Value(2.0, "sse")}                    # 4 stalls in 2 min

    async def test_loss_per_direction_from_owd_rounds(self, store: Store) -> None:
        await store.write(typed([owd_envelope(t(0), sent=10, fwd_lost=(1, 2), ret_lost=(5,)),
                                 owd_envelope(t(1), sent=30, fwd_lost=(), ret_lost=(3, 4, 6))]))
        reader = WindowReader(store, None)
        # lost requests over all sent in the window: 2/40 out, 4/40 back (not the mean of the rounds)
        assert await reader.values("fwd_loss_pct", T0, T0 + W) == {("sh-ct-1", "hk-cn2"): Value(5.0, "owd")}
        assert await reader.values("ret_loss_pct", T0, T0 + W) == {("sh-ct-1", "hk-cn2"): Value(10.0, "owd")}
        # and owd stands in for a target no icmp or mtr measured
        assert await reader.values("loss_pct", T0, T0 + W) == {("sh-ct-1", "hk-cn2"): Value(15.0, "owd")}

    async def test_attainment_from_the_windows_rtt_samples_and_loss(self, store: Store) -> None:
        # 100 ms RTTs: 3 round trips take 300 ms, within a 1 s TTFT; 10 % of requests lost
        await store.write(typed([icmp_envelope(t(0), [100.0] * 9 + [None]),
                                 tcp_envelope(t(1), [400.0] * 4, "tcp-only")]))
        reader = WindowReader(store, None)
        got = await reader.values("attainment_pct", T0, T0 + W, slo_ttft_ms=1000)
        hk, far = got[("sh-ct-1", "hk-cn2")], got[("sh-ct-1", "tcp-only")]
        # a lost SYN (the first trip) waits 1 s and misses; a later trip lost once (RTO 200 + 100 ms)
        # still fits, lost twice (the RTO doubled: 900 ms more) it does not: 0.9 × (1 − 0.1²)²
        assert hk.probe == "icmp" and hk.value == pytest.approx(100 * 0.9 * 0.99 ** 2, abs=0.01)
        assert far.probe == "tcp" and far.value == pytest.approx(0.0, abs=1e-6)    # 3 × 400 ms > 1 s
        # the rule's target decides: at 250 ms nothing fits 3 × 100 ms
        tight = await WindowReader(store, None).values("attainment_pct", T0, T0 + W, slo_ttft_ms=250)
        assert tight[("sh-ct-1", "hk-cn2")].value == pytest.approx(0.0, abs=1e-6)

    async def test_route_events_count_per_window(self, store: Store) -> None:
        await store.write(typed([mtr_envelope(t(0), CN2), mtr_envelope(t(6), GT), mtr_envelope(t(11), GT),
                                 mtr_envelope(t(12), CN2, target="other")]))
        reader = WindowReader(store, None)
        assert await reader.values("path_change", T0, T0 + W) == {("sh-ct-1", "hk-cn2"): Value(0.0, "mtr")}
        assert await reader.values("path_change", T0 + W, T0 + 2 * W) == \
            {("sh-ct-1", "hk-cn2"): Value(1.0, "mtr")}
        # declared cn2-gia, detected cn2-gt: one mismatch when it starts, none while it persists
        assert await reader.values("line_mismatch", T0 + W, T0 + 2 * W) == \
            {("sh-ct-1", "hk-cn2"): Value(1.0, "mtr")}
        later = await reader.values("line_mismatch", T0 + 2 * W, T0 + 3 * W)
        assert later == {("sh-ct-1", "hk-cn2"): Value(0.0, "mtr"), ("sh-ct-1", "other"): Value(0.0, "mtr")}
        assert await reader.values("path_change", T0 + 3 * W, T0 + 4 * W) == {}     # no mtr: no data


    async def test_path_changes_of_both_directions_count(self, store: Store) -> None:
        """path_change counts the way back's changes too (rmtr), for a target traced either way; the
        way back not being the line sold is return_line_mismatch's, not line_mismatch's."""
        await store.write(typed([
            mtr_envelope(t(0), CN2), mtr_envelope(t(1), CN2, probe="rmtr"),
            mtr_envelope(t(6), CN2), mtr_envelope(t(7), GT, probe="rmtr"),       # the way back moves
            mtr_envelope(t(2), CN2, target="back-only", probe="rmtr", mismatch=False),
            mtr_envelope(t(8), GT, target="back-only", probe="rmtr", mismatch=False)]))
        reader = WindowReader(store, None)
        assert await reader.values("path_change", T0, T0 + W) == {
            ("sh-ct-1", "hk-cn2"): Value(0.0, "mtr"), ("sh-ct-1", "back-only"): Value(0.0, "rmtr")}
        assert await reader.values("path_change", T0 + W, T0 + 2 * W) == {
            ("sh-ct-1", "hk-cn2"): Value(1.0, "mtr"), ("sh-ct-1", "back-only"): Value(1.0, "rmtr")}
        assert await reader.values("line_mismatch", T0 + W, T0 + 2 * W) == {
            ("sh-ct-1", "hk-cn2"): Value(0.0, "mtr")}
        [back] = await path_events(store, target_id="hk-cn2", kind="return_line_mismatch")
        assert back.direction == "return" and back.label == "cn2-gt"
        # counted as its own metric, for the pairs rmtr ran for
        assert await reader.values("return_line_mismatch", T0 + W, T0 + 2 * W) == {
            ("sh-ct-1", "hk-cn2"): Value(1.0, "rmtr"), ("sh-ct-1", "back-only"): Value(0.0, "rmtr")}

    async def test_asymmetric_compares_the_latest_line_of_each_direction(self, store: Store) -> None:
        await store.write(typed([
            mtr_envelope(t(0), CN2), mtr_envelope(t(1), CN2, probe="rmtr"),          # both ways CN2 GIA
            mtr_envelope(t(6), CN2), mtr_envelope(t(7), C163, probe="rmtr"),         # back on 163 now
            mtr_envelope(t(2), C163, target="back-only", probe="rmtr", mismatch=False)]))
        reader = WindowReader(store, None)
        # no forward trace of back-only: no value; one rmtr window later, it counts only if rmtr ran
        assert await reader.values("asymmetric", T0, T0 + W) == {
            ("sh-ct-1", "hk-cn2"): Value(0.0, "rmtr"), ("sh-ct-1", "back-only"): Value(None, "rmtr")}
        assert await reader.values("asymmetric", T0 + W, T0 + 2 * W) == {
            ("sh-ct-1", "hk-cn2"): Value(1.0, "rmtr")}
        assert await reader.values("asymmetric", T0 + 2 * W, T0 + 3 * W) == {}       # rmtr did not run


class TestValuesSqlite(ValueScenarios):
    @pytest.fixture
    def url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'v.db'}"


@pytest.mark.postgres
class TestValuesPostgres(ValueScenarios):
    @pytest.fixture
    def url(self) -> Iterator[str]:
        with scratch_database() as url:
            yield url


class _Recorder:
    def __init__(self) -> None:
        self.sent: list[Notification] = []

    def submit(self, n: Notification, names: object) -> None:
        self.sent.append(n)


@pytest.mark.postgres
async def test_engine_on_postgres_raises_once_and_survives_a_restart() -> None:
    rule = AlertRule(name="rtt", metric="rtt_p95_ms", op=">", threshold=150.0, clear_threshold=120.0,
                     window=300.0, for_windows=2, notify=("ops",))
    with scratch_database() as url:
        store = await open_store(url)
        try:
            sink = _Recorder()

            def due(minutes: int) -> datetime:
                return t(minutes) + timedelta(seconds=30)

            engine = AlertEngine(store, [rule], sink, settle=30.0)
            await engine.evaluate_due(due(0))
            for m, rtt in ((1, 300.0), (6, 310.0), (11, 130.0)):           # bad, bad, between
                await store.write(typed([icmp_envelope(t(m), [rtt] * 5, agent="bj-cu-1")]))
            await engine.evaluate_due(due(15))
            assert [(n.state, n.agent, n.window_end) for n in sink.sent if not n.repeat] == \
                [("firing", "bj-cu-1", t(10))]
            restarted = AlertEngine(store, [rule], sink, settle=30.0)
            await store.write(typed([icmp_envelope(t(16), [100.0] * 5, agent="bj-cu-1")]))
            await restarted.evaluate_due(due(20))
            assert [(n.state, n.window_end) for n in sink.sent if not n.repeat] == \
                [("firing", t(10)), ("resolved", t(20))]
        finally:
            await store.close()
