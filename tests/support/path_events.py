"""Route-event scenarios from mtr results (path_change, line_mismatch), run on each database by a
subclass that provides the `url` fixture (SQLite in unit/store, PostgreSQL in pg/), and the traces
and envelopes they are built from."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import pytest

from netprobe.net.lines import RouteVerdict, path_hash
from netprobe.probes.mtr.hops import Hop
from netprobe.probes.mtr.runtime import MtrResult
from netprobe.probes.results import envelope
from netprobe.probes.rmtr.runtime import RmtrResult
from netprobe.stats import jitter, loss_pct, rtt_stats
from netprobe.store import PATH_CHANGE, Store, open_store
from tests.support.store import AGENT, TARGET, StoredPathEvent, icmp_envelope, path_events, typed

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
# the mismatch kinds the mtr and rmtr specs declare (ProbeSpec.mismatch_kind)
LINE_MISMATCH, RETURN_LINE_MISMATCH = "line_mismatch", "return_line_mismatch"


class Trace(NamedTuple):
    """A path as mtr sees it, with the line the classifier would give it."""

    label: str
    hops: list[list[str]]     # addresses per TTL; [] is a silent hop (mtr's ???)


CN2 = Trace("cn2-gia", [["192.168.1.1"], ["100.64.0.1"], [], ["59.43.1.1"], ["59.43.246.2"], ["198.18.0.2"]])


CN2_ECMP = Trace("cn2-gia", [["192.168.1.1"], ["100.64.0.1"], [], ["59.43.1.1", "59.43.1.5"], ["59.43.246.2"],
                             ["198.18.0.2"]])


GT = Trace("cn2-gt", [["192.168.1.1"], ["100.64.0.1"], ["202.97.12.1"], ["59.43.1.1"], ["198.18.0.2"]])


GT2 = Trace("cn2-gt", [["192.168.1.1"], ["100.64.0.9"], ["202.97.12.1"], ["59.43.1.1"], ["198.18.0.2"]])


C163 = Trace("163", [["192.168.1.1"], ["100.64.0.1"], ["202.97.12.1"], ["202.97.50.1"], ["198.18.0.2"]])


ASNS = {"cn2-gia": [4809], "cn2-gt": [4134, 4809], "163": [4134]}


def t(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def h(trace: Trace) -> str:
    return path_hash(trace.hops)


def mtr_envelope(started_at: datetime, trace: Trace, *, target: str | None = None, agent: str | None = None,
                 result_id: str | None = None, reached: bool = True, declared: str = "cn2-gia",
                 mismatch: bool | None = None, probe: str = "mtr") -> dict[str, Any]:
    """A result shaped as the mtr probe writes it (netprobe.probes.mtr.runtime; `probe` "rmtr": as the rmtr
    probe writes the way back); the route verdict is given, not classified, so the tests pin the
    events rather than the classifier."""
    hubs = [Hop(ttl, list(addresses), [10.0 + ttl, 11.0 + ttl] if addresses else [None, None])
            for ttl, addresses in enumerate(trace.hops, 1)]
    samples: list[float | None] = hubs[-1].samples_ms if reached else [None, None]
    got = [s for s in samples if s is not None]
    label = trace.label
    route = RouteVerdict(label=label, asns=ASNS[label], hash=h(trace), path_loss_pct=loss_pct(2, len(got)),
                         declared_line=declared, mismatch=label != declared if mismatch is None else mismatch)
    kind: type[MtrResult] = RmtrResult if probe == "rmtr" else MtrResult
    extra = {"reflector": "http://198.18.0.2:8473"} if probe == "rmtr" else {}
    result = kind(probe=probe, host=TARGET["host"], started_at=started_at,
                  status="ok" if got else "down", address="198.18.0.2", cycles=2, max_hops=30,
                  reached=reached, hops=hubs, route=route,
                  sent=2, received=len(got), loss_pct=loss_pct(2, len(got)), rtt_ms=rtt_stats(got),
                  jitter_ms=jitter(samples), samples_ms=samples, **extra)
    return envelope(result, {**AGENT, "id": agent or AGENT["id"]}, {**TARGET, "id": target or TARGET["id"]},
                    result_id=result_id)


def error_envelope(started_at: datetime, *, target: str | None = None) -> dict[str, Any]:
    """What the probe writes when it could not run (the name did not resolve): no hops, no route."""
    result = MtrResult(probe="mtr", host=TARGET["host"], started_at=started_at, status="error",
                       error_kind="resolve", error="no such host", cycles=2)
    return envelope(result, AGENT, {**TARGET, "id": target or TARGET["id"]})


Brief = tuple[str, datetime, str | None, str | None, str | None]


def brief(events: Sequence[StoredPathEvent]) -> list[Brief]:
    return [(e.kind, e.detected_at, e.old_hash, e.new_hash, e.label) for e in events]


def change(at: datetime, old: Trace, new: Trace) -> tuple[str, datetime, str, str, str]:
    return (PATH_CHANGE, at, h(old), h(new), new.label)


def mismatch(at: datetime, old: Trace | None, new: Trace) -> tuple[str, datetime, str | None, str, str]:
    return (LINE_MISMATCH, at, h(old) if old is not None else None, h(new), new.label)


async def write_each(store: Store, envs: Sequence[dict[str, Any]]) -> None:
    """One write per envelope, as the agent stores rounds."""
    for env in envs:
        await store.write(typed([env]))


class PathEventScenarios:
    """Every scenario runs on each database; a subclass provides the `url` fixture."""

    @pytest.fixture
    async def store(self, url: str) -> AsyncIterator[Store]:
        s = await open_store(url)
        yield s
        await s.close()

    async def test_first_result_and_an_unchanged_path_are_no_events(self, store: Store) -> None:
        await write_each(store, [mtr_envelope(t(0), CN2), mtr_envelope(t(5), CN2), mtr_envelope(t(10), CN2)])
        assert await path_events(store) == []

    async def test_a_change_has_before_and_after_hops_and_a_change_back_another(self, store: Store) -> None:
        first, second, third = (mtr_envelope(t(0), CN2), mtr_envelope(t(5), GT, mismatch=False),
                                 mtr_envelope(t(10), CN2))
        await write_each(store, [first, second])
        [event] = await path_events(store)
        assert asdict(event) == {
            "id": event.id, "agent_id": "sh-ct-1", "target_id": "hk-cn2", "detected_at": t(5),
            "kind": PATH_CHANGE, "old_hash": h(CN2), "new_hash": h(GT), "label": "cn2-gt",
            "direction": "forward",
            "details": {
                "before": {"label": "cn2-gia", "hash": h(CN2),
                           "hops": [["192.168.1.1"], ["100.64.0.1"], [], ["59.43.1.1"], ["59.43.246.2"],
                                    ["198.18.0.2"]]},
                "after": {"label": "cn2-gt", "hash": h(GT),
                          "hops": [["192.168.1.1"], ["100.64.0.1"], ["202.97.12.1"], ["59.43.1.1"],
                                   ["198.18.0.2"]]},
                "result_id": second["id"]}}
        assert event.detected_at.tzinfo is UTC

        await store.write(typed([third]))
        events = await path_events(store)
        assert brief(events) == [change(t(5), CN2, GT), change(t(10), GT, CN2)]
        assert events[1].details["before"]["hops"] == event.details["after"]["hops"]
        assert events[1].details["result_id"] == third["id"]

    async def test_another_address_at_a_hop_is_a_change_with_the_same_label(self, store: Store) -> None:
        await write_each(store, [mtr_envelope(t(0), CN2), mtr_envelope(t(5), CN2_ECMP)])
        [event] = await path_events(store)
        assert brief([event]) == [change(t(5), CN2, CN2_ECMP)]
        assert event.details["after"]["hops"][3] == ["59.43.1.1", "59.43.1.5"]

    async def test_errors_and_unreached_results_are_ignored_and_keep_the_baseline(self, store: Store) -> None:
        in_error = mtr_envelope(t(15), GT)
        in_error["result"]["status"] = "error"         # an error never counts, whatever else it carries
        no_hash = mtr_envelope(t(20), GT)
        no_hash["result"]["route"]["hash"] = ""
        no_route = mtr_envelope(t(25), GT)
        del no_route["result"]["route"]
        await write_each(store, [
            mtr_envelope(t(0), CN2),
            error_envelope(t(5)),
            mtr_envelope(t(10), GT, reached=False),     # a partial path, not the route
            in_error, no_hash, no_route,
            icmp_envelope(t(27), [10.0]),               # other probes of the target do not matter
            mtr_envelope(t(30), CN2),                   # same as the last usable one: no change
        ])
        assert await path_events(store) == []
        await store.write(typed([mtr_envelope(t(35), GT)]))
        events = await path_events(store)
        assert brief(events) == [change(t(35), CN2, GT), mismatch(t(35), CN2, GT)]
        assert events[0].details["before"]["hash"] == h(CN2)

    async def test_the_baseline_is_found_past_many_unusable_rounds(self, store: Store) -> None:
        dark = [mtr_envelope(t(1 + i), GT, reached=False) for i in range(70)]
        await store.write(typed([mtr_envelope(t(0), CN2), *dark]))
        await store.write(typed([mtr_envelope(t(100), CN2_ECMP)]))
        assert brief(await path_events(store)) == [change(t(100), CN2, CN2_ECMP)]
        # with no usable round before at all, the first usable one is not a change
        await store.write(typed(mtr_envelope(t(1 + i), GT, reached=False, target="hk-2") for i in range(70)))
        await store.write(typed([mtr_envelope(t(100), CN2, target="hk-2")]))
        assert await path_events(store, target_id="hk-2") == []

    async def test_replays_and_repeats_create_no_second_event(self, store: Store) -> None:
        envs = [mtr_envelope(t(0), CN2), mtr_envelope(t(5), GT)]
        await store.write(typed(envs))
        before = await path_events(store)
        assert brief(before) == [change(t(5), CN2, GT), mismatch(t(5), CN2, GT)]
        stats = await store.write(typed([*envs, envs[1]]))  # an uplink replay, one repeated in the batch
        assert (stats.accepted, stats.duplicates) == (0, 3)
        await store.write(typed([envs[1]]))
        assert await path_events(store) == before

        # a batch of one new result and replayed old ones: only the new one can emit
        await store.write(typed([*envs, mtr_envelope(t(10), CN2)]))
        assert brief(await path_events(store)) == [*brief(before), change(t(10), GT, CN2)]

    async def test_a_shuffled_batch_gives_the_events_of_the_rounds_in_time_order(self, store: Store) -> None:
        paths = [CN2, GT, GT, CN2, CN2_ECMP, CN2_ECMP, C163, CN2]
        rounds = [mtr_envelope(t(5 * i), p, declared="cn2-gia", mismatch=False) for i, p in enumerate(paths)]
        shuffled = rounds[:]
        random.Random(3).shuffle(shuffled)
        await store.write(typed(shuffled))
        expected = [change(t(5), CN2, GT), change(t(15), GT, CN2), change(t(20), CN2, CN2_ECMP),
                    change(t(30), CN2_ECMP, C163), change(t(35), C163, CN2)]
        events = await path_events(store)
        assert brief(events) == expected
        assert [e.details["result_id"] for e in events] == [rounds[i]["id"] for i in (1, 3, 4, 6, 7)]

        # the same rounds one at a time (the agent) or in consecutive batches (an uplink): the same events
        for name, batches in (("one-by-one", [[r] for r in rounds]),
                              ("batches", [rounds[2::-1], rounds[4:2:-1], rounds[:4:-1]])):
            for batch in batches:
                await store.write(typed({**e, "id": f"{name}-{e['id']}", "target": {**TARGET, "id": name}}
                                        for e in batch))
            assert brief(await path_events(store, target_id=name)) == expected

    async def test_a_late_result_is_compared_with_the_round_before_it_in_time(self, store: Store) -> None:
        await write_each(store, [mtr_envelope(t(0), CN2), mtr_envelope(t(10), CN2)])
        await store.write(typed([mtr_envelope(t(5), GT, mismatch=False)]))       # arrives after t(10)
        assert brief(await path_events(store)) == [change(t(5), CN2, GT)]

    async def test_same_start_time_ties_are_ordered_by_id(self, store: Store) -> None:
        # code-point order: "Q9" < "q1" (a locale-aware collation would say the opposite)
        await store.write(typed([mtr_envelope(t(0), CN2, result_id="p"),
                                 mtr_envelope(t(5), CN2_ECMP, result_id="Q9")]))
        await store.write(typed([mtr_envelope(t(5), CN2_ECMP, result_id="q1")]))
        assert brief(await path_events(store)) == [change(t(5), CN2, CN2_ECMP)]

    async def test_a_line_mismatch_is_one_event_until_it_clears(self, store: Store) -> None:
        first = mtr_envelope(t(0), GT)                                       # sold as cn2-gia
        await write_each(store, [
            first,
            mtr_envelope(t(5), GT),                      # persists: nothing
            mtr_envelope(t(10), GT2),                    # another path, same detected line: a change only
            mtr_envelope(t(15), CN2, reached=False),     # unusable: does not clear it
            mtr_envelope(t(20), GT2),
            mtr_envelope(t(25), CN2),                    # clears
            mtr_envelope(t(30), GT),                     # comes back: a new mismatch
            mtr_envelope(t(35), C163),                   # another detected line: a new mismatch
            mtr_envelope(t(40), C163),
        ])
        events = await path_events(store)
        assert brief(events) == [
            mismatch(t(0), None, GT),
            change(t(10), GT, GT2),
            change(t(25), GT2, CN2),
            change(t(30), CN2, GT), mismatch(t(30), CN2, GT),
            change(t(35), GT, C163), mismatch(t(35), GT, C163),
        ]
        assert events[0].details == {"declared": "cn2-gia", "detected": "cn2-gt", "asns": [4134, 4809],
                                        "hash": h(GT), "result_id": first["id"]}
        assert [e.details["detected"] for e in await path_events(store, kind=LINE_MISMATCH)] == \
            ["cn2-gt", "cn2-gt", "163"]

    async def test_targets_and_agents_are_independent(self, store: Store) -> None:
        await store.write(typed([
            mtr_envelope(t(0), CN2, target="a"), mtr_envelope(t(1), GT, target="b", mismatch=False),
            mtr_envelope(t(2), CN2, target="b", agent="bj-cu-1"),
        ]))
        await store.write(typed([
            mtr_envelope(t(5), GT, target="a", mismatch=False), mtr_envelope(t(6), GT, target="b",
                                                                               mismatch=False),
            mtr_envelope(t(7), GT, target="b", agent="bj-cu-1", mismatch=False),
        ]))
        await store.write(typed([mtr_envelope(t(10), GT, target="a", mismatch=False),
                                 mtr_envelope(t(11), CN2, target="b")]))
        assert brief(await path_events(store, target_id="a")) == [change(t(5), CN2, GT)]
        assert brief(await path_events(store, target_id="b", agent_id="sh-ct-1")) == [change(t(11), GT, CN2)]
        assert brief(await path_events(store, agent_id="bj-cu-1")) == [change(t(7), CN2, GT)]
        every = await path_events(store)
        assert [(e.agent_id, e.target_id) for e in every] == \
            [("sh-ct-1", "a"), ("bj-cu-1", "b"), ("sh-ct-1", "b")]

    async def test_each_direction_is_a_history_of_its_own(self, store: Store) -> None:
        """mtr (forward) and rmtr (return) rounds of one agent × target, interleaved: a return path
        is compared only with the return path before it, so two steady paths are no change."""
        fwd = [mtr_envelope(t(10 * i), CN2) for i in range(4)]
        ret = [mtr_envelope(t(10 * i + 5), C163, probe="rmtr", declared="cn2-gia") for i in range(4)]
        await write_each(store, [e for pair in zip(fwd, ret, strict=True) for e in pair])
        [only] = await path_events(store)          # the way back is not the line sold, once
        assert (only.kind, only.direction, only.label, only.detected_at) == \
            (RETURN_LINE_MISMATCH, "return", "163", t(5))
        assert only.details["declared"] == "cn2-gia" and only.details["detected"] == "163"

    async def test_a_change_of_the_way_back_only_is_a_return_event(self, store: Store) -> None:
        # one batch of both probes (as a collector takes an agent's upload), then one round each
        await store.write(typed([mtr_envelope(t(0), CN2), mtr_envelope(t(10), CN2),
                                 mtr_envelope(t(1), C163, probe="rmtr", declared="163")]))
        await write_each(store, [mtr_envelope(t(11), GT, probe="rmtr", declared="163", mismatch=False),
                                 mtr_envelope(t(20), CN2)])
        [event] = await path_events(store)
        assert brief([event]) == [change(t(11), C163, GT)] and event.direction == "return"
        assert await path_events(store, direction="forward") == []
        assert await path_events(store, direction="return") == [event]
        # the forward path then changes too: a forward event, the return history untouched
        await store.write(typed([mtr_envelope(t(30), GT, mismatch=False)]))
        assert [(e.direction, e.kind) for e in await path_events(store)] == \
            [("return", PATH_CHANGE), ("forward", PATH_CHANGE)]

    async def test_reading_filters_by_kind_and_time(self, store: Store) -> None:
        await write_each(store, [mtr_envelope(t(0), CN2), mtr_envelope(t(5), GT), mtr_envelope(t(10), CN2),
                                 mtr_envelope(t(15), GT)])
        assert len(await path_events(store)) == 5
        assert [e.kind for e in await path_events(store, kind=PATH_CHANGE)] == [PATH_CHANGE] * 3
        assert brief(await path_events(store, since=t(10))) == [
            change(t(10), GT, CN2), change(t(15), CN2, GT), mismatch(t(15), CN2, GT)]
        assert await path_events(store, since=t(16)) == []
        assert await path_events(store, target_id="nope") == []
        with pytest.raises(ValueError, match="timezone-aware"):
            await path_events(store, since=datetime(2026, 11, 20))

    async def test_concurrent_writers_for_different_targets_and_racing_replays(self, url: str) -> None:
        a, b = await open_store(url), await open_store(url)
        try:
            paths = [CN2, GT, GT, CN2, CN2_ECMP, CN2]
            targets = [f"t{i}" for i in range(6)]
            rounds = {tg: [mtr_envelope(t(5 * i), p, target=tg, mismatch=False) for i, p in enumerate(paths)]
                      for tg in targets}

            async def agent(i: int, tg: str) -> None:
                for n, env in enumerate(rounds[tg]):
                    await (a if (i + n) % 2 else b).write(typed([env]))

            await asyncio.gather(*(agent(i, tg) for i, tg in enumerate(targets)))
            # a new round plus the old ones, the same batch twice at once through both stores (two collectors)
            fresh = {tg: mtr_envelope(t(30), GT, target=tg, mismatch=False) for tg in targets}
            await asyncio.gather(*(s.write(typed([fresh[tg], *rounds[tg]]))
                                   for tg in targets for s in (a, b)))
            expected = [change(t(5), CN2, GT), change(t(15), GT, CN2), change(t(20), CN2, CN2_ECMP),
                        change(t(25), CN2_ECMP, CN2), change(t(30), CN2, GT)]
            for tg in targets:
                assert brief(await path_events(a, target_id=tg)) == expected
        finally:
            await a.close()
            await b.close()
