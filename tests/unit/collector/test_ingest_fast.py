"""The collector's fast paths do what the slow ones did: orjson reads bodies as the json module does
(and leaves every error message to it), the one strict envelope validator takes only well-typed,
consistent envelopes, bulk sketching equals adding samples one by one, and on PostgreSQL a batch stored
with each envelope's received text (plus skipped agent/target rewrites) ends up as the plain path stores
it."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from collections.abc import Iterator
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from ddsketch import DDSketch
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from netprobe.collector.body import Rejected, parse_json
from netprobe.store import envelopes, open_store
from netprobe.store import sketch as sketches
from netprobe.store import store as store_module
from netprobe.store.envelopes import EnvelopeError, parse_envelope, parse_envelopes
from netprobe.store.rollups import Rollup, accumulate, hour_deltas, key_of
from netprobe.store.schema import agents, targets
from tests.support.path_events import CN2, CN2_ECMP, mtr_envelope
from tests.support.pg import scratch_database
from tests.support.store import connection, hourly, icmp_envelope, path_events, typed

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


# -- envelope validation ------------------------------------------------------------------------------

def _base() -> dict[str, Any]:
    return json.loads(json.dumps(icmp_envelope(T0, [10.5, None, 12.25, 11.0], result_id="r-1")))


def _with(path: str, value: Any) -> dict[str, Any]:
    """The base envelope with `path` (dotted) set to `value`, or removed when value is _GONE."""
    env = _base()
    *parents, last = path.split(".")
    node = env
    for p in parents:
        node = node[p]
    if value is _GONE:
        del node[last]
    else:
        node[last] = value
    return env


_GONE = object()
EDGE_CASES: list[tuple[str, Any]] = [
    ("started_at", "2026-11-20T12:00:00+08:00"), ("started_at", "2026-11-20T12:00:00.5Z"),
    ("started_at", "2026-11-20T12:00:00.123456-03:30"), ("started_at", "2026-11-20T12:00:00.1234567Z"),
    ("started_at", "2026-11-20T12:00Z"), ("started_at", "2026-11-20T12:00:00"),
    ("started_at", "2026-11-20 12:00:00Z"), ("started_at", "2026-11-20t12:00:00z"),
    ("started_at", "2026-02-30T00:00:00Z"), ("started_at", "2026-11-20T23:59:60Z"),
    ("started_at", "2026-11-20T12:00:00+24:00"), ("started_at", "2026-11-20T12:00:00+23:59"),
    ("started_at", "2026-11-20T12:00:00-00:00"), ("started_at", 1_700_000_000), ("started_at", None),
    ("started_at", "9999-12-31T23:59:59+01:00"), ("started_at", _GONE),
    ("id", ""), ("id", "x" * 128), ("id", "x" * 129), ("id", 5), ("id", None), ("id", _GONE),
    ("probe", ""), ("probe", "p" * 32), ("probe", "p" * 33), ("probe", ["icmp"]),
    ("agent", _GONE), ("agent", "sh-ct-1"), ("agent.id", _GONE), ("agent.id", 7), ("agent.region", 5),
    ("agent.region", None), ("agent.region", _GONE), ("agent.extra", {"nested": [1]}), ("agent.extra", 1.5),
    ("agent._private", "x"), ("agent.model_config", "x"), ("agent.flag", True), ("agent.tags", ["a"]),
    ("target.host", 443), ("target.line", None), ("target.id", ""), ("target.sold", "cn2"),
    ("result", _GONE), ("result", [1]), ("result.status", "OK"), ("result.status", _GONE),
    ("result.status", "down"), ("result.status", "error"), ("result.sent", -1), ("result.sent", True),
    ("result.sent", 4.0), ("result.sent", 4.5), ("result.sent", "4"), ("result.sent", _GONE),
    ("result.received", 9), ("result.received", _GONE), ("result.duplicates", 2),
    ("result.duplicates", -2), ("result.loss_pct", 100.0001), ("result.loss_pct", -0.0),
    ("result.loss_pct", 50), ("result.loss_pct", "5"), ("result.loss_pct", math.inf),
    ("result.loss_pct", math.nan), ("result.loss_pct", None), ("result.loss_pct", True),
    ("result.jitter_ms", -1.0), ("result.jitter_ms", math.inf), ("result.jitter_ms", 3),
    ("result.jitter_ms", None), ("result.samples_ms", None), ("result.samples_ms", []),
    ("result.samples_ms", [1, 2.5, None]), ("result.samples_ms", [True]), ("result.samples_ms", ["1"]),
    ("result.samples_ms", [-1.0]), ("result.samples_ms", [math.inf]), ("result.samples_ms", [math.nan]),
    ("result.samples_ms", [1e308, 1e308]), ("result.samples_ms", [10**400]), ("result.samples_ms", _GONE),
    ("result.samples_ms", [None, None]), ("result.samples_ms", {"a": 1}), ("extra_top_level", {"x": 1}),
]


def _outcome(data: Any) -> tuple[str, str]:
    try:
        return ("ok", repr(parse_envelope(data, "envelope 3")))     # repr: 1 and 1.0 differ, key order shows
    except EnvelopeError as exc:
        return ("EnvelopeError", str(exc))
    except Exception as exc:
        return (type(exc).__name__, str(exc))


# What the strict validator takes of EDGE_CASES: everything else is of the wrong type, out of range,
# or contradicts the rest of the envelope.
ACCEPTED = [("started_at", "2026-11-20T12:00:00-00:00"), ("id", "x" * 128), ("agent.region", None),
            ("agent.region", _GONE),
            ("agent.model_config", "x"), ("target.line", None), ("target.sold", "cn2"),
            ("result.status", "down"), ("result.status", "error"), ("result.duplicates", 2),
            ("result.jitter_ms", 3), ("result.jitter_ms", None), ("result.samples_ms", []),
            ("result.samples_ms", _GONE)]


def _accepted(path: str, value: Any) -> bool:
    return any(path == p and (value is v or (_GONE not in (value, v) and repr(value) == repr(v)))
               for p, v in ACCEPTED)


@pytest.mark.parametrize(("path", "value"), EDGE_CASES, ids=[f"{p}={v!r}"[:60] for p, v in EDGE_CASES])
def test_the_validator_takes_only_well_typed_consistent_envelopes(path: str, value: Any) -> None:
    data = _with(path, value)
    kind, text = _outcome(copy.deepcopy(data))
    if _accepted(path, value):
        assert kind == "ok", text
        env = parse_envelope(copy.deepcopy(data))
        assert env.raw == data and all(type(v) is float for v in env.samples_ms)
    else:
        assert kind == "EnvelopeError", text
        assert text.startswith("envelope 3: ") and path.split(".")[0] in text, text


@pytest.mark.parametrize("data", [None, [], "envelope", 3, {}])
def test_what_is_no_envelope_is_refused(data: Any) -> None:
    kind, text = _outcome(data)
    assert kind == "EnvelopeError" and text.startswith("envelope 3: "), text


def test_the_common_envelopes_are_accepted() -> None:
    from tests.support.path_events import t

    eight = _with("started_at", "2026-11-20T20:00:00.123+08:00")
    eight["result"]["started_at"] = eight["started_at"]
    common = [_base(), json.loads(json.dumps(mtr_envelope(t(0), CN2))), eight, _with("result.loss_pct", 25),
              _with("agent.extra", "x"), _with("result.samples_ms", [1, None, 2.5, 3])]
    for data in common:
        assert _outcome(data)[0] == "ok", _outcome(data)


def _consistent(samples: list[Any], loss: Any, sent: Any) -> bool:
    """The oracle: what a strict reading of an icmp result with received 0 accepts."""
    if type(sent) is not int or sent < 0 or type(loss) not in (int, float) or not 0 <= loss <= 100:
        return False
    if any(v is not None and (type(v) not in (int, float) or not 0 <= v < math.inf) for v in samples):
        return False
    if samples and (len(samples) != sent or any(v is not None for v in samples)):
        return False
    return loss == 100 if sent else loss in (0, 100)


@settings(max_examples=200, deadline=None)
@given(samples=st.lists(st.one_of(st.none(), st.floats(allow_nan=False), st.integers(-5, 10**6)), max_size=8),
       loss=st.one_of(st.none(), st.floats(), st.integers(-1, 101)),
       sent=st.one_of(st.integers(-1, 30), st.floats(0, 30), st.booleans()))
def test_the_validator_takes_random_results_only_when_consistent(samples: list[Any], loss: Any,
                                                                  sent: Any) -> None:
    data = _base()
    data["result"].update(samples_ms=samples, loss_pct=loss, sent=sent, received=0)
    kind, text = _outcome(copy.deepcopy(data))
    assert (kind == "ok") == _consistent(samples, loss, sent), text
    assert kind in ("ok", "EnvelopeError"), text


# -- sketches and rollups -----------------------------------------------------------------------------

def _state(s: Any) -> tuple[Any, ...]:
    stores = [(x.bins, x.offset, x.min_key, x.max_key, x.count) for x in (s._store, s._negative_store)]
    return (sketches.dumps(s), stores, s._sum, s._count, s._zero_count, s._min, s._max)


values = st.lists(st.one_of(st.floats(0, 1e12), st.sampled_from([0.0, 1e-320, 5.0, 0.01]),
                            st.floats(-1e6, 0)), max_size=300)


@settings(max_examples=300, deadline=None)
@given(vals=values, before=st.lists(st.floats(0, 1e4), max_size=20))
def test_bulk_sketching_equals_adding_one_by_one(vals: list[float], before: list[float]) -> None:
    one, bulk = sketches.new_sketch(), sketches.new_sketch()
    for v in before:
        one.add(v)
        bulk.add(v)
    for v in vals:
        one.add(v)
    sketches.add_all(bulk, vals)
    assert _state(bulk) == _state(one)


def test_accumulate_equals_rounds_added_one_by_one() -> None:
    import random

    rng = random.Random(7)
    envs = [envelopes.parse_envelope(icmp_envelope(
        T0 + timedelta(minutes=7 * i),
        [None if rng.random() < 0.1 else rng.uniform(1, 300) for _ in range(20)], target=f"t{i % 3}"))
        for i in range(60)]
    one: dict[Any, Rollup] = {}
    for env in envs:
        rollup = one.setdefault(key_of(env), Rollup())
        # the sketch value by value, as before add_all
        for v in env.samples_ms:
            if rollup.sketch is None:
                rollup.sketch = sketches.new_sketch()
            rollup.sketch.add(v)
        rollup.add(env, sketch=False)
    bulk = accumulate(envs)
    assert list(bulk) == list(one)
    assert [r.to_row() for r in bulk.values()] == [r.to_row() for r in one.values()]
    assert all(_state(bulk[k].sketch) == _state(one[k].sketch) for k in one)


def _decoded(text: str | None) -> Any:
    return None if text is None else json.loads(text)


@settings(max_examples=300, deadline=None)
@given(vals=values.filter(bool))
def test_bins_hold_what_the_sketch_of_the_same_values_dumps(vals: list[float]) -> None:
    sketch = sketches.new_sketch()
    sketches.add_all(sketch, vals)
    text = sketches.bins_text(sketches.bins_of(vals))
    assert repr(json.loads(text)) == repr(json.loads(sketches.dumps(sketch)))   # 1 and 1.0 differ
    assert sketches.bins_from_text(text) == sketches.bins_of(vals)
    assert _state(sketches.sketch_of(sketches.bins_of(vals)))[0] == sketches.dumps(sketch)


@settings(max_examples=300, deadline=None)
@given(a=values.filter(bool), b=values.filter(bool))
def test_merging_bins_equals_merging_the_stored_sketch(a: list[float], b: list[float]) -> None:
    stored = sketches.new_sketch()
    sketches.add_all(stored, a)
    text = sketches.dumps(stored)
    delta = sketches.new_sketch()
    sketches.add_all(delta, b)
    old = sketches.loads(text)              # what a write did with an existing row's sketch
    old.merge(delta)
    mine = sketches.bins_from_text(text)
    assert mine is not None
    sketches.merge_bins(mine, sketches.bins_of(b))
    assert repr(json.loads(sketches.bins_text(mine))) == repr(json.loads(sketches.dumps(old)))


def test_sketches_in_another_format_or_mapping_are_left_to_ddsketch() -> None:
    other = DDSketch(relative_accuracy=0.02)
    other.add(5.0)
    mine = sketches.new_sketch()
    mine.add(5.0)
    good = json.loads(sketches.dumps(mine))
    for text in (sketches.dumps(other), json.dumps({**good, "v": 2}), json.dumps({**good, "min": None}),
                 json.dumps({**good, "count": 0}), "not json",
                 json.dumps({**good, "pos": {"offset": 1.5, "counts": [1]}})):
        assert sketches.bins_from_text(text) is None, text


def test_hour_deltas_equal_accumulate() -> None:
    from tests.support.report import dataset

    envs = [envelopes.parse_envelope(e) for e in dataset(days=2)]      # icmp, tcp, sse (extras), mtr
    envs += [envelopes.parse_envelope(icmp_envelope(T0, [None, None], result_id="down"))]
    old, new = accumulate(envs), hour_deltas(envs)
    assert list(old) == list(new)
    for key, rollup in old.items():
        counters, bins = new[key]
        assert counters.sketch is None and {**counters.to_row(), "sketch": None} == {**rollup.to_row(),
                                                                                    "sketch": None}
        want = rollup.to_row()["sketch"]
        assert (bins is None) == (want is None)
        if bins is not None:
            assert repr(_decoded(sketches.bins_text(bins))) == repr(_decoded(want))


def _old_rollups(batches: list[list[dict[str, Any]]]) -> dict[Any, dict[str, Any]]:
    """What Store.write's rollups were before the fast path: per batch, the new rounds (in id order)
    accumulated, each hour row created empty, read back and merged with Rollup.merge."""
    rows: dict[Any, dict[str, Any]] = {}
    seen: set[str] = set()
    for batch in batches:
        new = sorted({e["id"]: envelopes.parse_envelope(e) for e in batch if e["id"] not in seen}.values(),
                     key=lambda e: e.id)
        seen.update(e.id for e in new)
        for key, delta in accumulate(new).items():
            merged = Rollup.from_row(rows.get(key, Rollup().to_row()))
            merged.merge(delta)
            rows[key] = merged.to_row()
    return rows


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def any_url(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'r.db'}"
    else:
        with scratch_database() as url:
            yield url


@pytest.mark.parametrize("bulk", [False, True], ids=["plain", "bulk"])
async def test_written_rollups_equal_the_merge_of_each_batchs_rounds(any_url: str, bulk: bool) -> None:
    """New hour rows, rows merged into (an hour spread over batches), rounds without samples, sse extras
    and replays: every column of every hour row, the sketch's values included, as before. `bulk`: as
    `db import` writes (on PostgreSQL, new rows by COPY)."""
    import random

    from tests.support.report import dataset

    envs = dataset(days=3)
    envs.append(icmp_envelope(T0, [None, None], result_id="down"))
    rng = random.Random(5)
    rng.shuffle(envs)
    batches = [envs[i:i + 700] for i in range(0, len(envs), 700)]
    batches.insert(3, envs[100:400])                               # replays, and rounds stored before
    huge = T0 + timedelta(days=30)                  # finite samples whose sum is not: the executemany path
    batches += [[icmp_envelope(huge, [1e308], result_id="huge"),
                 icmp_envelope(huge + timedelta(seconds=1), [1e308], result_id="huge-2")],
                [icmp_envelope(huge + timedelta(minutes=1), [5.0], result_id="after-huge"), envs[0]]]
    store = await open_store(any_url)
    try:
        for batch in batches:
            await store.write(typed(batch), bulk=bulk)
        got = await hourly(store, None, None, None, T0 - timedelta(days=400), T0 + timedelta(days=400))
    finally:
        await store.close()
    want = _old_rollups(batches)
    assert sorted((r.agent_id, r.target_id, r.probe, r.hour) for r in got) == sorted(want)
    assert any(r.rounds > 1 for r in got) and any(r.rollup.sketch is None for r in got)
    assert any(r.rollup.rtt_sum == math.inf and r.rounds == 3 for r in got)
    for r in got:
        row, old = r.rollup.to_row(), want[(r.agent_id, r.target_id, r.probe, r.hour)]
        assert repr({**row, "sketch": _decoded(row["sketch"]), "extras": _decoded(row["extras"])}) == \
            repr({**old, "sketch": _decoded(old["sketch"]), "extras": _decoded(old["extras"])})


# -- request bodies -----------------------------------------------------------------------------------

def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _slow(body: bytes) -> tuple[str, Any]:
    """The json module's reading, strict (no NaN, no Infinity), as the collector words a refusal."""
    try:
        return ("ok", json.loads(body, parse_constant=_refuse_constant))
    except ValueError as exc:
        return ("rejected", (400, "bad_json", f"malformed JSON: {exc}"))
    except RecursionError:
        return ("rejected", (400, "bad_json", "malformed JSON: nested too deeply"))


def _fast(body: bytes) -> tuple[str, Any]:
    try:
        return ("ok", parse_json(body))
    except Rejected as exc:
        return ("rejected", (exc.status, exc.reason, exc.message))


BODIES = [
    b'[{"id": "x",', b'{"id": "x"}', b'"hello"', b"[NaN]", b"[Infinity]", b"\xff\xfe[", b"[1,]", b"[01]",
    b"[1] x", b"", b"  ", b"[1e400]", b"[18446744073709551616]", b"[-9223372036854775809]",
    b"[1234567890123456789]", b'["\\ud800"]', b'"\xed\xa0\x80"', b"\xef\xbb\xbf[1]", b'["a\x01"]',
    b'["\\u0000"]', b'[{"a": "\\u0000"}]', b'[{"a": 1, "a": 2}]', b"[" * 5000 + b"]" * 5000,
    '[{"x": "é"}]'.encode("utf-16"), b'[{"x": 1.5, "y": -0.0, "z": [true, false, null]}]', b" [ ] ",
    b'[{"\\u00e9": "\\ud83d\\ude00"}]',
]


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
def test_body_parsing_agrees_with_the_json_module(body: bytes) -> None:
    fast, slow = _fast(body), _slow(body)
    assert fast == slow
    if fast[0] == "ok":
        assert repr(fast[1]) == repr(slow[1])     # 1 and 1.0, key order


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                          st.integers(-(2**63), 2**64 - 1), st.text(max_size=8)), max_size=20))
def test_orjson_reads_numbers_and_strings_as_json_does(items: list[Any]) -> None:
    body = json.dumps(items).encode()
    assert repr(_fast(body)) == repr(_slow(body))       # values (1 vs 1.0 too), or the same refusal (NUL)


# -- PostgreSQL: the request's own text, skipped agent/target rewrites -------------------------------------

@pytest.fixture
def two_databases() -> Iterator[tuple[str, str]]:
    with scratch_database() as a, scratch_database() as b:
        yield a, b


def _batches() -> list[list[dict[str, Any]]]:
    from tests.support.path_events import t

    out = []
    for k in range(3):
        batch = [icmp_envelope(T0 + timedelta(minutes=10 * k + i), [10.0 + i, None, 12.5],
                               result_id=f"i{k}-{i}", target=f"t{i % 2}") for i in range(6)]
        batch += [mtr_envelope(t(10 * k + 1), CN2 if k != 1 else CN2_ECMP, result_id=f"m{k}")]
        batch.append(copy.deepcopy(batch[0]))                        # repeated within the batch
        out.append(json.loads(json.dumps(batch)))
    return out


@pytest.mark.postgres
async def test_received_texts_store_what_the_plain_path_stores(two_databases: tuple[str, str]) -> None:
    fast_url, plain_url = two_databases
    fast, plain = await open_store(fast_url), await open_store(plain_url)
    try:
        for k, batch in enumerate(_batches() + _batches()[:1]):     # the last one: all replays
            texts = [json.dumps(e, indent=1) for e in batch]      # as `db import` keeps each line's
            got = await fast.write(parse_envelopes(batch, texts), bulk=k % 2 == 0)
            assert got == await plain.write(typed(batch))
        assert await fast.results() == await plain.results()
        end = T0 + timedelta(hours=3)
        rows = [await hourly(s, None, None, None, T0, end) for s in (fast, plain)]
        assert [r.to_dict() for r in rows[0]] == [r.to_dict() for r in rows[1]]
        assert [r.rollup.to_row() for r in rows[0]] == [r.rollup.to_row() for r in rows[1]]
        events = [[{k: v for k, v in asdict(e).items() if k != "id"} for e in await path_events(s)]
                  for s in (fast, plain)]
        assert events[0] == events[1] and len(events[0]) == 2          # there and back
    finally:
        await fast.close()
        await plain.close()


async def _seen(url: str) -> dict[str, tuple[Any, Any]]:
    async with connection(url) as conn:
        rows = (await conn.execute(select(agents.c.id, agents.c.region, agents.c.last_seen))).all()
        rows += (await conn.execute(select(targets.c.id, targets.c.host, targets.c.last_seen))).all()
    return {r[0]: (r[1], r[2]) for r in rows}


@pytest.mark.postgres
async def test_unchanged_agents_and_targets_are_not_rewritten_within_the_minute(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with scratch_database() as url:
        store = await open_store(url)
        try:
            await store.write(typed([icmp_envelope(T0, [1.0], result_id="a")]))
            first = await _seen(url)
            await store.write(typed([icmp_envelope(T0 + timedelta(minutes=1), [1.0], result_id="b")]))
            assert await _seen(url) == first                    # within the minute: not rewritten
            changed = icmp_envelope(T0 + timedelta(minutes=2), [1.0], result_id="c")
            changed["agent"]["region"] = "cn-north"
            await store.write(typed([changed]))
            now = await _seen(url)
            assert now["sh-ct-1"][0] == "cn-north" and now["sh-ct-1"][1] > first["sh-ct-1"][1]
            assert now["hk-cn2"] == first["hk-cn2"]               # the target did not change
            monkeypatch.setattr(store_module, "REFS_REFRESH_S", 0.0)
            await store.write(typed([icmp_envelope(T0 + timedelta(minutes=3), [1.0], result_id="d")]))
            later = await _seen(url)
            assert later["hk-cn2"][1] > first["hk-cn2"][1]      # a minute on: last_seen moves again
            assert later["sh-ct-1"][0] == "cn-east"
        finally:
            await store.close()


@pytest.mark.postgres
async def test_a_rolled_back_write_leaves_no_row_assumed_written() -> None:
    with scratch_database() as url:
        store = await open_store(url)
        try:
            good_one = parse_envelope(icmp_envelope(T0, [1.0], result_id="a", target="new-target"))
            raw = copy.deepcopy(good_one.raw)
            raw["result"]["note"] = "nul \x00 here"     # the validator refuses it; past it, jsonb does
            bad = dataclasses.replace(good_one, raw=raw, text=None)
            with pytest.raises(Exception):  # noqa: B017  (a StorageError, whatever its wording)
                await store.write([bad])
            assert await _seen(url) == {}
            good = icmp_envelope(T0, [1.0], result_id="a", target="new-target")
            assert (await store.write(typed([good]))).accepted == 1  # the target row is created after all
            assert set(await _seen(url)) == {"sh-ct-1", "new-target"}
        finally:
            await store.close()


@pytest.mark.postgres
async def test_route_history_read_for_many_pairs_at_once_finds_the_same_events(tmp_path: Any) -> None:
    """PostgreSQL reads the first page of every agent × target of a batch in one query (SQLite: one per
    pair); out-of-order arrivals, unusable rounds and replays give the same events either way."""
    import random

    from tests.support.path_events import t

    rng = random.Random(5)
    rounds = []
    for i in range(120):
        pair = rng.randrange(6)
        rounds.append(mtr_envelope(t(i * 3 + rng.random()), rng.choice([CN2, CN2, CN2_ECMP]),
                                   agent=f"a{pair % 2}", target=f"t{pair // 2}", result_id=f"r{i:03d}",
                                   reached=rng.random() > 0.1, mismatch=rng.random() < 0.2))
    order = rounds[:]
    rng.shuffle(order[40:])                                   # later ones arrive out of order
    batches = [order[k:k + rng.randrange(3, 25)] for k in range(0, len(order), 12)]  # some overlap
    with scratch_database() as url:
        pg, lite = await open_store(url), await open_store(f"sqlite:///{tmp_path / 'lite.db'}")
        try:
            for batch in batches:
                assert await pg.write(typed(batch)) == await lite.write(typed(batch))
            events = [[{k: v for k, v in asdict(e).items() if k != "id"} for e in await path_events(s)]
                      for s in (pg, lite)]
            assert events[0] == events[1] and len(events[0]) > 10
        finally:
            await pg.close()
            await lite.close()
