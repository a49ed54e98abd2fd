"""The alert state machine over real stored rounds (SQLite): raise once, clear once, hysteresis,
for_windows, windows without data, and a restart that neither re-fires nor forgets."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from netprobe.alerts.engine import AlertEngine, align_down, align_up
from netprobe.alerts.states import AlertState, step
from netprobe.config.alerts import AlertRule
from netprobe.store import Store, open_store
from netprobe.store.schema import alert_states
from tests.support.alert_sink import Recorder
from tests.support.store import connection, icmp_envelope, typed

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SETTLE = 30.0
MINUTE = timedelta(minutes=1)


def rule(**kw: Any) -> AlertRule:
    base: dict[str, Any] = {"name": "loss", "metric": "loss_pct", "op": ">", "threshold": 20.0,
                            "clear_threshold": 10.0, "window": 60.0, "for_windows": 2, "notify": ("ops",)}
    return AlertRule.model_validate({**base, **kw})


def at(minute: int) -> datetime:
    """When the window starting `minute` minutes after T0 is due (closed + settled)."""
    return T0 + (minute + 1) * MINUTE + timedelta(seconds=SETTLE)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await open_store(f"sqlite:///{tmp_path / 'a.db'}")
    yield s
    await s.close()


async def put(store: Store, minute: int, lost: int, target: str = "hk-cn2", n: int = 10) -> None:
    """One icmp round of `n` requests, `lost` of them lost, 10 s into the minute."""
    samples: list[float | None] = [None] * lost + [30.0 + i for i in range(n - lost)]
    await store.write(typed([icmp_envelope(T0 + minute * MINUTE + timedelta(seconds=10), samples,
                                           target=target)]))


def engine(store: Store, rules: Sequence[AlertRule], sink: Recorder) -> AlertEngine:
    return AlertEngine(store, rules, sink, agent_id="sh-ct-1", settle=SETTLE)


async def rows(store: Store) -> list[dict[str, Any]]:
    async with connection(store.url) as conn:        # SQLite: its URL has no password to mask
        return [dict(r) for r in (await conn.execute(alert_states.select())).mappings()]


def test_alignment_is_to_utc_epoch_multiples() -> None:
    ts = datetime(2026, 11, 20, 12, 7, 31, tzinfo=UTC)
    assert align_down(ts, 300) == datetime(2026, 11, 20, 12, 5, tzinfo=UTC)
    assert align_up(ts, 300) == datetime(2026, 11, 20, 12, 10, tzinfo=UTC)
    assert align_up(T0, 300) == T0


def test_step_is_pure_and_follows_the_rules() -> None:
    r = rule(for_windows=2)
    s = AlertState("loss", "a", "t")
    w = (T0, T0 + MINUTE)
    s1, tr = step(r, s, 50.0, "icmp", *w)
    assert (s1.state, s1.bad_windows, tr, s1.started_at) == ("pending", 1, None, T0)
    s2, tr = step(r, s1, None, None, T0 + MINUTE, T0 + 2 * MINUTE)          # no data: kept
    assert (s2.state, s2.bad_windows, tr) == ("pending", 1, None)
    s3, tr = step(r, s2, 25.0, "icmp", T0 + 2 * MINUTE, T0 + 3 * MINUTE)
    assert (s3.state, tr, s3.started_at) == ("firing", "firing", T0)
    s4, tr = step(r, s3, 15.0, "icmp", T0 + 3 * MINUTE, T0 + 4 * MINUTE)   # between: held
    assert (s4.state, tr) == ("firing", None)
    s5, tr = step(r, s4, 10.0, "icmp", T0 + 4 * MINUTE, T0 + 5 * MINUTE)   # at clear: resolved
    assert (s5.state, tr, s5.started_at) == ("ok", "resolved", None)


def test_ops_below_and_equal_thresholds() -> None:
    low = rule(metric="stalls_per_min", op="<", threshold=5.0, clear_threshold=8.0, for_windows=1)
    assert low.is_bad(4.9) and not low.is_bad(5.0) and low.is_clear(8.0) and not low.is_clear(7.9)
    ge = rule(op=">=", threshold=1.0, clear_threshold=1.0)
    assert ge.is_bad(1.0) and not ge.is_clear(1.0) and ge.is_clear(0.99)     # bad wins a tie
    assert rule(clear_threshold=None).clear_at == 20.0


async def test_raises_once_holds_between_thresholds_and_clears_once(store: Store) -> None:
    sink = Recorder()
    e = engine(store, [rule()], sink)
    assert await e.evaluate_due(at(-1)) == []              # first start: nothing before now is judged
    await put(store, 0, 5)      # 50 %: bad
    await put(store, 1, 5)      # bad: fires (for_windows 2)
    await put(store, 2, 3)      # 30 %: still bad
    await put(store, 3, 2)      # 20 %: not bad (> 20 is), not clear (≤ 10 is): held firing
    #        minute 4: no data: held
    await put(store, 5, 1)      # 10 %: clears
    await put(store, 6, 5)      # bad again: pending only
    for minute in range(7):
        await e.evaluate_due(at(minute))
    assert sink.transitions() == [("firing", "hk-cn2", T0 + 2 * MINUTE),
                                  ("resolved", "hk-cn2", T0 + 6 * MINUTE)]
    fired = next(n for n, _ in sink.sent if n.state == "firing" and not n.repeat)
    resolved = next(n for n, _ in sink.sent if n.state == "resolved")
    assert (fired.started_at, fired.value, fired.probe, fired.ended_at) == (T0, 50.0, "icmp", None)
    assert (resolved.started_at, resolved.ended_at, resolved.value) == (T0, T0 + 6 * MINUTE, 10.0)
    assert all(names == ("ops",) for _, names in sink.sent)
    # while firing, each later window re-sends it as a repeat (Alertmanager only), never as a transition
    repeats = [n.window_end for n, _ in sink.sent if n.repeat]
    assert repeats == [T0 + 3 * MINUTE, T0 + 4 * MINUTE, T0 + 5 * MINUTE]
    [row] = await rows(store)
    assert (row["rule"], row["agent_id"], row["target_id"], row["state"], row["bad_windows"]) == \
        ("loss", "sh-ct-1", "hk-cn2", "pending", 1)
    assert row["details"]["window_end"] == "2026-11-20T12:07:00Z" and row["value"] == 50.0
    assert e.stats.transitions == {"firing": 1, "resolved": 1}


async def test_each_window_is_evaluated_once_and_only_after_it_settles(store: Store) -> None:
    sink = Recorder()
    e = engine(store, [rule(for_windows=1)], sink)
    await e.evaluate_due(at(-1))
    await put(store, 0, 5)
    await e.evaluate_due(at(0) - timedelta(seconds=1))       # closed but not settled
    assert sink.sent == []
    await e.evaluate_due(at(0))
    await e.evaluate_due(at(0) + timedelta(seconds=20))      # same window again: nothing new
    assert sink.transitions() == [("firing", "hk-cn2", T0 + MINUTE)]
    assert e.sleep_for(at(0)) == pytest.approx(60.0)          # next due a window later


async def test_for_windows_counts_consecutive_bad_windows_only(store: Store) -> None:
    sink = Recorder()
    e = engine(store, [rule(for_windows=3)], sink)
    await e.evaluate_due(at(-1))
    for minute, lost in enumerate((5, 5, 0, 5, 5)):           # a good window breaks the streak
        await put(store, minute, lost)
    await e.evaluate_due(at(4))
    assert sink.transitions() == []
    await put(store, 5, 5)
    await e.evaluate_due(at(5))                               # the third in a row, counted from minute 3
    assert sink.transitions() == [("firing", "hk-cn2", T0 + 6 * MINUTE)]
    assert sink.sent[0][0].started_at == T0 + 3 * MINUTE


async def test_windows_without_data_keep_the_state(store: Store) -> None:
    sink = Recorder()
    e = engine(store, [rule(for_windows=2)], sink)
    await e.evaluate_due(at(-1))
    await put(store, 0, 5)
    await put(store, 3, 5)                                    # minutes 1-2: no rounds at all
    await e.evaluate_due(at(3))
    assert sink.transitions() == [("firing", "hk-cn2", T0 + 4 * MINUTE)]
    await e.evaluate_due(at(10))                              # silence while firing: still firing
    assert [s["state"] for s in await rows(store)] == ["firing"]
    assert sink.transitions() == [("firing", "hk-cn2", T0 + 4 * MINUTE)]


async def test_flapping_between_clear_and_threshold_stays_firing(store: Store) -> None:
    sink = Recorder()
    e = engine(store, [rule(for_windows=1)], sink)
    await e.evaluate_due(at(-1))
    for minute in range(10):
        await put(store, minute, 3 if minute % 2 == 0 else 2)  # 30 %, 20 %, 30 %, …
    await e.evaluate_due(at(9))
    assert sink.transitions() == [("firing", "hk-cn2", T0 + MINUTE)]


async def test_restart_neither_refires_nor_forgets(store: Store) -> None:
    sink = Recorder()
    e = engine(store, [rule(for_windows=2)], sink)
    await e.evaluate_due(at(-1))
    await put(store, 0, 5)
    await put(store, 1, 5)
    await e.evaluate_due(at(1))
    assert sink.transitions() == [("firing", "hk-cn2", T0 + 2 * MINUTE)]

    # a new process: state and the last window evaluated come from the database
    after = Recorder()
    e2 = engine(store, [rule(for_windows=2)], after)
    await put(store, 2, 5)                                    # still bad: no second "firing"
    await e2.evaluate_due(at(2))
    assert after.transitions() == []
    assert [n.repeat for n, _ in after.sent] == [True]
    await put(store, 3, 0)
    await e2.evaluate_due(at(3))
    assert after.transitions() == [("resolved", "hk-cn2", T0 + 4 * MINUTE)]
    assert after.sent[-1][0].started_at == T0                 # remembered across the restart


async def test_restart_resumes_a_pending_count_and_catches_up_missed_windows(store: Store) -> None:
    sink = Recorder()
    e = engine(store, [rule(for_windows=3)], sink)
    await e.evaluate_due(at(-1))
    await put(store, 0, 5)
    await put(store, 1, 5)
    await e.evaluate_due(at(1))                               # pending, 2 bad windows
    # down for minutes 2-4; the rounds were stored meanwhile (by an uplink replay, say)
    await put(store, 2, 5)
    e2 = engine(store, [rule(for_windows=3)], sink)
    await e2.evaluate_due(at(4))                              # windows 2, 3, 4 evaluated in order
    assert sink.transitions() == [("firing", "hk-cn2", T0 + 3 * MINUTE)]
    assert [s["state"] for s in await rows(store)] == ["firing"]


async def test_targets_filter_and_per_target_states(store: Store) -> None:
    sink = Recorder()
    e = engine(store, [rule(for_windows=1, targets=("hk-*",)), rule(name="all", for_windows=1)], sink)
    await e.evaluate_due(at(-1))
    await put(store, 0, 5, target="hk-cn2")
    await put(store, 0, 5, target="tyo-163")
    await put(store, 0, 0, target="hk-bgp")
    await e.evaluate_due(at(0))
    got = sorted((n.rule.name, n.target) for n, _ in sink.sent)
    assert got == [("all", "hk-cn2"), ("all", "tyo-163"), ("loss", "hk-cn2")]
    assert len(await rows(store)) == 5                        # ok rows too: they carry the cursor


async def test_two_evaluators_on_one_database_notify_once(store: Store) -> None:
    a, b = Recorder(), Recorder()
    ea, eb = engine(store, [rule(for_windows=1)], a), engine(store, [rule(for_windows=1)], b)
    await ea.evaluate_due(at(-1))
    await eb.evaluate_due(at(-1))
    await put(store, 0, 5)
    await ea.evaluate_due(at(0))
    await eb.evaluate_due(at(0))                              # the window is already applied
    assert a.transitions() == [("firing", "hk-cn2", T0 + MINUTE)]
    assert b.transitions() == []


async def test_a_failing_database_is_retried_not_raised(tmp_path: Path) -> None:
    s = await open_store(f"sqlite:///{tmp_path / 'b.db'}")
    sink = Recorder()
    e = engine(s, [rule()], sink)
    await s.close()
    (tmp_path / "b.db").unlink()
    (tmp_path / "b.db").mkdir()                               # the file is now a directory: unusable
    assert await e.evaluate_due(at(5)) == []
    assert e.stats.errors == 1 and e.sleep_for(at(5)) == 10.0
