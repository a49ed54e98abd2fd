"""The demo's compressed day: a few real seconds of lab traffic stand for each hour of one simulated
day, so a two-minute run has an evening peak to report. The agent stores real timestamps; `replay`
copies its rounds into the report database with each timestamp moved onto the simulated day."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from netprobe.store import Envelope, Store, stored_envelope
from netprobe.times import iso

BATCH = 500


@dataclass(frozen=True, slots=True)
class Timeline:
    real_start: datetime       # when simulated 00:00 began (UTC)
    sim_start: datetime        # simulated 00:00 local, as UTC
    hour_seconds: float        # real seconds per simulated hour

    @property
    def scale(self) -> float:
        return 3600.0 / self.hour_seconds

    @property
    def real_end(self) -> datetime:
        return self.real_start + timedelta(seconds=24 * self.hour_seconds)

    @property
    def sim_end(self) -> datetime:
        return self.sim_start + timedelta(days=1)

    def sim(self, real: datetime) -> datetime:
        return self.sim_start + (real - self.real_start) * self.scale

    def note(self, zone: str) -> str:
        return (f"Time compressed: {24 * self.hour_seconds:g} s of lab traffic played as one day "
                f"({self.hour_seconds:g} s per hour) — {self.sim_start.astimezone(ZoneInfo(zone)):%Y-%m-%d} "
                f"in {zone}, with the lab's peak profile from 20:00 to 23:00. Not measured hours.")


def simulated_day(zone: str, now: datetime) -> datetime:
    """Yesterday 00:00 in `zone`, as UTC: a whole local day that `report peak --days 2` covers."""
    local = now.astimezone(ZoneInfo(zone))
    midnight = (local - timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight.astimezone(UTC)


def moved(env: Envelope, timeline: Timeline) -> Envelope | None:
    """The envelope on the simulated day; None when it started outside the compressed day."""
    started = env.started_at
    if not timeline.real_start <= started < timeline.real_end:
        return None
    at = iso(timeline.sim(started))
    result = dict(env.raw.get("result") or {})
    if "started_at" in result:
        result["started_at"] = at
    return stored_envelope({**env.raw, "started_at": at, "result": result})  # stored: not validated again


async def replay(live: Store, demo: Store, timeline: Timeline) -> int:
    """Copy the live rounds onto the simulated day (oldest first, so route events come out in order)."""
    rounds = [m for row in await live.results() if (m := moved(row.envelope, timeline)) is not None]
    for i in range(0, len(rounds), BATCH):
        await demo.write(rounds[i:i + BATCH])
    return len(rounds)
