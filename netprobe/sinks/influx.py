"""InfluxDB sink ([influxdb]): every stored round also goes to an InfluxDB v2 write API, as
`netprobe_<probe>` with tags agent, region, isp, target, datacenter, line and the result's numbers
as fields (docs/api.md). It is one more pipeline sink: batched, retried, and behind a bounded queue, so
an InfluxDB outage is counted and never slows probing."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from netprobe.config.secrets import read_secret

if TYPE_CHECKING:
    from netprobe.config.sections import InfluxConfig
    from netprobe.store.envelopes import Envelope

TAGS = (("agent", "agent", "id"), ("region", "agent", "region"), ("isp", "agent", "isp"),
        ("target", "target", "id"), ("datacenter", "target", "datacenter"), ("line", "target", "line"))
_SKIP = {"samples_ms", "started_at", "report"}


def numeric_fields(result: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, float | int]]:
    """The result's numbers, nested objects flattened with `_` (rtt_ms.p95 -> rtt_ms_p95)."""
    for key, value in result.items():
        if key in _SKIP:
            continue
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            yield name, value
        elif isinstance(value, Mapping) and not prefix:
            yield from numeric_fields(value, f"{name}_")


def path_id(env: Envelope) -> int | None:
    """A traced round's path (the hash route events compare) as a number, so a query counts path
    changes with changes(); its first 48 bits, which a float64 holds exactly. None: not traced."""
    from netprobe.store.events import route_of_envelope

    route = route_of_envelope(env)
    try:
        return int(route.hash[:12], 16) if route is not None else None
    except ValueError:
        return None


def to_line(env: Envelope) -> str:
    from influxdb_client.client.write.point import Point
    from influxdb_client.domain.write_precision import WritePrecision

    point = Point(f"netprobe_{env.probe}")
    for tag, part, key in TAGS:
        value = (env.agent if part == "agent" else env.target).get(key)
        if value not in (None, ""):
            point.tag(tag, str(value))
    point.field("up", int(env.status == "ok"))
    for name, value in numeric_fields(env.raw["result"]):   # the result's JSON: its numbers by name
        point.field(name, float(value) if isinstance(value, float) else value)
    path = path_id(env)
    if path is not None:
        point.field("path_id", path)
    line: str = point.time(env.started_at, WritePrecision.NS).to_line_protocol()
    return line


def influx_sinks(cfg: InfluxConfig) -> list[InfluxSink]:
    """The sink [influxdb] asks for (none when `url` is empty); a missing token fails here, at start."""
    if not cfg.url:
        return []
    token = read_secret("influxdb", file=cfg.token_file, env=cfg.token_env)
    return [InfluxSink(cfg.url, cfg.org, cfg.bucket, token)]


class InfluxSink:
    name = "influxdb"

    def __init__(self, url: str, org: str, bucket: str, token: str, timeout_s: float = 10.0) -> None:
        from influxdb_client.client.influxdb_client_async import InfluxDBClientAsync

        self._client = InfluxDBClientAsync(url=url, token=token, org=org, timeout=int(timeout_s * 1000))
        self._write = self._client.write_api()
        self._bucket = bucket

    async def write(self, envelopes: list[Envelope]) -> None:
        # an exception keeps the batch queued; the pipeline retries it and counts the failure
        await self._write.write(bucket=self._bucket, record=[to_line(e) for e in envelopes])

    async def close(self) -> None:
        await self._client.close()
