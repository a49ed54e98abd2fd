"""The comparison as one object: endpoints × levels, and the JSON of docs/api.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from netprobe.compare.figures import LevelFigures
from netprobe.compare.floor import Floor


@dataclass(frozen=True, slots=True)
class EndpointResult:
    url: str
    levels: tuple[LevelFigures, ...]
    floor: Floor | None = None
    floor_note: str | None = None       # why there is no floor, when --db was given

    @property
    def all_failed(self) -> bool:
        return all(lv.completed == 0 for lv in self.levels)

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "network_floor": self.floor.to_dict() if self.floor else None,
                "network_floor_note": self.floor_note, "levels": [lv.to_dict() for lv in self.levels]}


@dataclass(frozen=True, slots=True)
class CompareReport:
    endpoints: tuple[EndpointResult, ...]
    model: str
    requests: int
    warmup: int
    prompt: str                           # "synthetic: 128 words, 64 tokens out" or the JSONL file
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    burstiness: float | None
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "requests": self.requests, "warmup": self.warmup,
                "prompts": self.prompt, "slo": {"ttft_ms": self.slo_ttft_ms, "tpot_ms": self.slo_tpot_ms},
                "burstiness": self.burstiness, "seed": self.seed,
                "endpoints": [e.to_dict() for e in self.endpoints]}
