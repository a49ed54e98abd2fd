"""DDSketch ⇄ compact JSON: the mapping's gamma/offset and each store's contiguous bins.

Same content as ddsketch.pb (which would pull in protobuf), plus count/sum/min/max.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from functools import reduce
from operator import add
from typing import Any

from ddsketch import DDSketch
from ddsketch.mapping import LogarithmicMapping
from ddsketch.store import DenseStore

RELATIVE_ACCURACY = 0.01
FORMAT = 1


def new_sketch() -> DDSketch:
    return DDSketch(relative_accuracy=RELATIVE_ACCURACY)


def add_all(sketch: DDSketch, values: Sequence[float]) -> None:
    """`sketch.add(v)` for each of `values` in order, with the very same result (keys, counts, sum,
    min, max, and even the stores' bin layout), at a fraction of the cost: keys are computed as the
    mapping does, in one comprehension, and each distinct key is added once with its count, in order
    of first appearance (so the stores grow exactly as they would value by value). Weights are 1, so
    adding a count n once equals adding 1.0 n times. Any other mapping or store: one by one."""
    mapping, pos, neg = sketch._mapping, sketch._store, sketch._negative_store
    if not values:
        return
    if type(mapping) is not LogarithmicMapping or type(pos) is not DenseStore or type(neg) is not DenseStore:
        for v in values:
            sketch.add(v)
        return
    lowest, multiplier, offset = mapping.min_possible, mapping._multiplier, mapping._offset
    log, ceil = math.log, math.ceil
    # KeyMapping.key: int(math.ceil(self._log_gamma(value)) + self._offset); _log_gamma as in
    # LogarithmicMapping: math.log(value, 2) * self._multiplier
    above = Counter([ceil(log(v, 2) * multiplier) for v in values if v > lowest])
    for k, n in above.items():
        pos.add(int(k + offset), float(n))
    below = Counter([ceil(log(-v, 2) * multiplier) for v in values if v < -lowest])
    for k, n in below.items():
        neg.add(int(k + offset), float(n))
    zero = len(values) - sum(above.values()) - sum(below.values())
    if zero:
        sketch._zero_count += float(zero)
    sketch._count += float(len(values))
    sketch._sum = reduce(add, values, sketch._sum)    # left to right, as add() sums (not sum(): 3.12
    lo, hi = min(values), max(values)                 # compensates its rounding)
    if lo < sketch._min:
        sketch._min = lo
    if hi > sketch._max:
        sketch._max = hi


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
