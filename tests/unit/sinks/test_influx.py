"""The InfluxDB sink through the real influxdb-client against a real server speaking the InfluxDB v2
write API (VictoriaMetrics, from Debian's packages): points written, read back; an outage is counted
and never blocks."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from netprobe.sinks.influx import InfluxSink, numeric_fields, to_line
from netprobe.sinks.pipeline import Pipeline
from netprobe.store import parse_envelope
from tests.support.store import icmp_envelope
from tests.support.victoria import _export, _free_port, victoria_metrics

pytestmark = pytest.mark.skipif(shutil.which("victoria-metrics") is None,
                                reason="victoria-metrics not installed (.ci/run installs it)")


@pytest.fixture(scope="module")
def vm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with victoria_metrics(tmp_path_factory.mktemp("vm")) as url:
        yield url


def test_line_protocol_shape() -> None:
    env = icmp_envelope(datetime(2026, 11, 20, 12, 0, tzinfo=UTC), [20.0, None, 22.0])
    line = to_line(parse_envelope(env))
    head, fields, ts = line.split(" ")
    assert head.startswith("netprobe_icmp,") and "target=" in head and "agent=" in head
    assert "loss_pct=" in fields and "rtt_ms_p95=" in fields and "samples_ms" not in fields
    assert ts == str(int(datetime(2026, 11, 20, 12, 0, tzinfo=UTC).timestamp() * 1e9))
    flat = dict(numeric_fields({"a": 1, "b": True, "c": {"d": 2.5}, "samples_ms": [1]}))
    assert flat == {"a": 1, "c_d": 2.5}


def test_a_traced_round_carries_its_path_as_a_number() -> None:
    from tests.support.path_events import CN2, GT, h, mtr_envelope, t

    cn2, gt = (to_line(parse_envelope(mtr_envelope(t(0), trace))) for trace in (CN2, GT))
    assert f"path_id={int(h(CN2)[:12], 16)}i" in cn2 and f"path_id={int(h(GT)[:12], 16)}i" in gt
    assert "path_id" not in to_line(parse_envelope(icmp_envelope(t(0), [20.0])))


async def test_points_written_through_the_real_client_are_read_back(vm: str) -> None:
    t0 = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=10)
    envs = [icmp_envelope(t0 + timedelta(minutes=i), [30.0 + i, 31.0 + i]) for i in range(5)]
    sink = InfluxSink(vm, "ops", "netprobe", "secret-token")
    try:
        await sink.write([parse_envelope(e) for e in envs])
    finally:
        await sink.close()
    series = _export(vm, '{__name__="netprobe_icmp_rtt_ms_p50"}')
    assert len(series) == 1, series
    metric = series[0]["metric"]
    assert isinstance(metric, dict) and metric["target"] == envs[0]["target"]["id"]
    assert metric["agent"] == envs[0]["agent"]["id"]
    values = series[0]["values"]
    assert isinstance(values, list) and [round(float(v), 3) for v in values] == [30.5, 31.5, 32.5, 33.5, 34.5]
    timestamps = series[0]["timestamps"]
    assert isinstance(timestamps, list) and timestamps[0] == int(t0.timestamp() * 1000)


async def test_an_outage_is_counted_and_never_blocks() -> None:
    sink = InfluxSink(f"http://127.0.0.1:{_free_port()}", "ops", "netprobe", "", timeout_s=1.0)
    pipeline = Pipeline([sink], batch=10, max_queue=50, flush_every=0.05)
    pipeline.start()
    t0 = time.monotonic()
    for i in range(200):
        pipeline.put(parse_envelope(icmp_envelope(datetime.now(UTC), [float(i)])))
    assert time.monotonic() - t0 < 0.5  # put never waits for the network
    await asyncio.sleep(1.5)
    stats = pipeline.stats()["influxdb"]
    assert stats["queued"] <= 50 and stats["dropped"] >= 150
    assert stats["failures"] >= 1 and stats["written"] == 0
    await pipeline.close(0.5)
