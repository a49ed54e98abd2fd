"""The pydantic settings every probe's model derives from. Apart from netprobe.probes.base so that the
registry (and the reports, which read only the specs' report metadata) does not import pydantic."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from netprobe.config.durations import Duration


class ProbeSettings(BaseModel):
    """Settings every probe shares; each probe module subclasses it with its own fields."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    every: Duration = Field(default=60.0, gt=0, description="how often a round runs")
    timeout: Duration = Field(default=2.0, gt=0, description="per request/connect timeout")

    def round_seconds(self) -> float:
        """Upper bound of one round's duration; the scheduler cancels a run past this plus slack."""
        return self.timeout


class RoundSettings(ProbeSettings):
    """A round of `count` requests `interval` apart; it must fit inside `every`."""

    count: int = Field(default=20, ge=1, le=10_000, description="requests per round")
    interval: Duration = Field(default=0.5, gt=0, description="time between requests of a round")

    @model_validator(mode="after")
    def _fits_in_every(self) -> RoundSettings:
        if self.interval >= self.every:
            raise ValueError(f"interval ({self.interval:g}s) must be shorter than every ({self.every:g}s)")
        if self.round_seconds() > self.every:
            raise ValueError(
                f"a round lasts (count-1)*interval+timeout = {self.round_seconds():g}s, longer than "
                f"every ({self.every:g}s); lower count or interval, or raise every")
        return self

    def round_seconds(self) -> float:
        return (self.count - 1) * self.interval + self.timeout


__all__ = ["ProbeSettings", "RoundSettings"]
