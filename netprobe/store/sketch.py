"""DDSketch ⇄ compact JSON: the mapping's gamma/offset and each store's contiguous bins.

Same content as ddsketch.pb (which would pull in protobuf), plus count/sum/min/max.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ddsketch import DDSketch
from ddsketch.mapping import LogarithmicMapping
from ddsketch.store import DenseStore

RELATIVE_ACCURACY = 0.01
FORMAT = 1


def new_sketch() -> DDSketch:
    return DDSketch(relative_accuracy=RELATIVE_ACCURACY)


def _store_to_json(store: DenseStore) -> dict[str, Any]:
    bins: list[float] = store.bins
    first = next((i for i, c in enumerate(bins) if c), len(bins))
    last = next((i for i in range(len(bins) - 1, -1, -1) if bins[i]), -1)
    counts = [_num(c) for c in bins[first:last + 1]]
    return {"offset": store.offset + first, "counts": counts}


def _store_from_json(data: dict[str, Any], store: DenseStore) -> None:
    key = int(data["offset"])
    for count in data["counts"]:
        if count:
            store.add(key, float(count))
        key += 1


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else float(x)


def dumps(sketch: DDSketch) -> str:
    mapping = sketch._mapping
    data = {
        "v": FORMAT,
        "gamma": mapping.gamma,
        "index_offset": mapping._offset,
        "pos": _store_to_json(sketch._store),
        "neg": _store_to_json(sketch._negative_store),
        "zero": _num(sketch._zero_count),
        "count": _num(sketch._count),
        "sum": sketch._sum,
        "min": sketch._min if sketch._count else None,
        "max": sketch._max if sketch._count else None,
    }
    return json.dumps(data, separators=(",", ":"))


def loads(text: str) -> DDSketch:
    data = json.loads(text)
    if data.get("v") != FORMAT:
        raise ValueError(f"unknown sketch format {data.get('v')!r}")
    sketch = new_sketch()
    mine = sketch._mapping
    if not (math.isclose(mine.gamma, data["gamma"], rel_tol=1e-12) and mine._offset == data["index_offset"]):
        # Written with another accuracy: rebuild that mapping so the keys keep their meaning.
        sketch._mapping = LogarithmicMapping.from_gamma_offset(data["gamma"], data["index_offset"])
        sketch._relative_accuracy = sketch._mapping.relative_accuracy
    _store_from_json(data["pos"], sketch._store)
    _store_from_json(data["neg"], sketch._negative_store)
    sketch._zero_count = float(data["zero"])
    sketch._count = float(data["count"])
    sketch._sum = float(data["sum"])
    if data["min"] is not None:
        sketch._min = float(data["min"])
        sketch._max = float(data["max"])
    return sketch
