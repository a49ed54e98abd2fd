"""A result's JSON reads back as its probe's record (ProbeResult.from_json, which an Envelope from the wire
or the store carries as its `result`): every probe's to_dict() gives the record that wrote it, what
importers and older agents write reads as its readers always took it, and a new probe's result type
needs nothing of its own to be read."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from netprobe.net.lines import RouteVerdict
from netprobe.probes import REGISTRY, atlas
from netprobe.probes.icmp.runtime import IcmpResult
from netprobe.probes.mtr.runtime import MtrResult
from netprobe.probes.results import ProbeResult, decoder
from netprobe.stats import RttStats
from netprobe.store import parse_envelope, stored_envelope
from netprobe.store.envelopes import envelope_of
from tests.support.atlas import PINGS, TRACES
from tests.support.path_events import CN2, error_envelope, mtr_envelope
from tests.support.report import dataset
from tests.support.store import icmp_envelope, owd_envelope

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def _read(result: dict[str, Any]) -> ProbeResult:
    return REGISTRY[result["probe"]].result_type.from_json(result)


def test_every_probes_json_reads_back_as_the_record_that_wrote_it() -> None:
    envs = [*dataset(days=1), mtr_envelope(T0, CN2), mtr_envelope(T0, CN2, reached=False), error_envelope(T0),
            icmp_envelope(T0, [None, None]), owd_envelope(T0), owd_envelope(T0, fwd_lost=(), ret_lost=()),
            mtr_envelope(T0, CN2, probe="rmtr"), mtr_envelope(T0, CN2, probe="rmtr", reached=False)]
    assert {e["probe"] for e in envs} == set(REGISTRY)
    for env in envs:
        record = _read(env["result"])
        assert type(record) is REGISTRY[env["probe"]].result_type
        assert record.to_dict() == env["result"]
        assert type(record).from_json(record.to_dict()) == record
        assert parse_envelope(env).result == record       # what an envelope from the wire carries


def test_an_envelope_made_here_indexes_what_its_json_says() -> None:
    """envelope_of reads the indexed fields from the typed result; the same as reading them from its
    JSON, as an envelope from the wire or the store is read, for every probe and a round that could
    not run at all (a bare ProbeResult)."""
    bare = ProbeResult(probe="mtr", host="h", started_at=T0, status="error", error_kind="timeout")
    envs = [*dataset(days=1), mtr_envelope(T0, CN2), error_envelope(T0), icmp_envelope(T0, [None, 3.0])]
    records = [_read(e["result"]) for e in envs[::7]] + [bare]
    agent = {"id": "sh-ct-1", "region": "cn-east", "isp": "telecom", "timezone": "Asia/Shanghai"}
    target = {"id": "hk-cn2", "host": "h", "datacenter": "hk", "line": "cn2-gia"}
    for record in records:
        env = envelope_of(record, agent, target, body=record.to_dict())
        assert env == stored_envelope(env.raw) and env.result is record
        assert env.agent is agent and env.raw["target"] is target      # taken as they are, not copied
    # in another order, or short of a declared field: the Envelope's have the declared ones first
    odd = envelope_of(bare, {"region": "x", "id": "a"}, {"id": "t"})
    assert odd == stored_envelope(odd.raw) and list(odd.agent) == ["id", "region", "isp", "timezone"]
    assert odd.raw["agent"] == {"region": "x", "id": "a"}


def test_json_numbers_and_times_read_as_the_fields_types() -> None:
    result = icmp_envelope(T0, [10.0, None, 12.0])["result"]
    result.update(started_at="2026-11-20T20:00:00+08:00", loss_pct=33, duration_ms=5,
                  samples_ms=[10, None, 12], rtt_ms={**result["rtt_ms"], "min": 10})
    record = IcmpResult.from_json(result)
    assert record.started_at == T0 and record.started_at.tzinfo is UTC
    assert type(record.loss_pct) is float and type(record.duration_ms) is float
    assert record.samples_ms == [10.0, None, 12.0] and all(type(v) is float for v in record.samples_ms if v)
    assert record.rtt_ms is not None and type(record.rtt_ms.min) is float


@pytest.mark.parametrize("name", [*PINGS, *TRACES])
def test_atlas_results_read_as_the_records_the_importer_built(name: str) -> None:
    env = atlas.to_envelope({**PINGS, **TRACES}[name])
    parse_envelope(env, name)
    record = _read(env["result"])
    want = {k: v for k, v in env["result"].items() if k != "atlas"}
    if isinstance(record, IcmpResult) and env["result"]["rtt_ms"] is not None and \
            "p50" not in env["result"]["rtt_ms"]:
        # a summary-only ping: Atlas's own min/avg/max stay in the JSON, the record has no samples' stats
        assert record.rtt_ms is None and record.samples_ms == []
        want["rtt_ms"] = None
    assert record.to_dict() == want


def test_what_older_agents_left_out_reads_as_its_readers_took_it() -> None:
    result = copy.deepcopy(mtr_envelope(T0, CN2)["result"])
    del result["reached"]                                 # not pinned: only an explicit false is unreached
    result["route"] = {"label": "cn2-gia", "asns": [4809], "hash": "abc"}  # before loss and declared line
    record = MtrResult.from_json(result)
    assert record.reached is True
    assert record.route == RouteVerdict(label="cn2-gia", asns=[4809], hash="abc", mismatch=False)
    assert MtrResult.from_json({**result, "route": {"hash": "abc"}}).route == \
        RouteVerdict(label=None, asns=[], hash="abc", mismatch=False)
    for never in ({}, {"label": "cn2-gia", "asns": [4809]}):   # never traced; no hash, which no one can use
        assert MtrResult.from_json({**result, "route": never}).route is None
    odd = copy.deepcopy(result)
    odd["report"]["mtr"]["psize"] = "sixty"
    odd["report"]["hubs"][0]["ASN"] = "AS-what"
    got = MtrResult.from_json(odd)
    assert got.packet_size == 64 and got.hops[0].asn is None
    base = ProbeResult(probe="mtr", host="h", started_at=T0, status="error", error="cancelled").to_dict()
    assert MtrResult.from_json(base).hops == [] and MtrResult.from_json(base).route is None


@dataclass(slots=True)
class _Inner:
    when: datetime
    value: float


@dataclass(slots=True)
class _NewResult(ProbeResult):
    count: int = 0
    ratio: float | None = None
    parts: dict[str, float] = field(default_factory=dict)
    inner: _Inner | None = None
    marks: list[_Inner] = field(default_factory=list)


def test_a_new_result_type_is_read_from_its_fields_alone() -> None:
    stamp = datetime(2026, 11, 20, 20, 0, tzinfo=timezone(timedelta(hours=8)))
    record = _NewResult(probe="new", host="h", started_at=T0, status="ok", count=3, ratio=0.5,
                        parts={"a": 1.0}, inner=_Inner(T0, 2.0), marks=[_Inner(T0, 1.0)])
    data = {**record.to_dict(), "count": 3, "ratio": 0.5, "parts": {"a": 1},
            "inner": {"when": stamp.isoformat(), "value": 2},
            "marks": [{"when": "2026-11-20T12:00:00Z", "value": 1}]}
    assert _NewResult.from_json(data) == record
    assert _NewResult.from_json(record.to_dict()) == _NewResult(probe="new", host="h", started_at=T0,
                                                                 status="ok")


def test_a_field_json_cannot_tell_apart_must_be_read_by_its_type() -> None:
    assert decoder(int | str) is None                    # both as they are
    with pytest.raises(TypeError, match="json_layout"):
        decoder(RttStats | float, "X.rtt")
    with pytest.raises(TypeError, match="json_layout"):
        decoder(set[int], "X.seen")
