"""DDSketch ⇄ compact JSON: the mapping's gamma/offset and each store's contiguous bins.

Same content as ddsketch.pb (which would pull in protobuf), plus count/sum/min/max. And adding
bins without a DDSketch (`add_bins`, `total_bins`, `trim`), for the writers and the fold; the rank rule
on such bins is netprobe.store.hour_arrays.quantile_rows.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from operator import add, sub
from typing import Any

import orjson
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
    offset, bins = trim(store.offset, store.bins)
    return {"offset": offset, "counts": [_num(c) for c in bins]}


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


# -- a sketch as its stored content, without a DDSketch ----------------------------------------------
Count = int | float      # a bin's count as dumps writes it: an int when it is integral


class ForeignSketch(ValueError):
    """A stored sketch was written with another mapping: its bins cannot be added to ours."""


def stored_bins(d: dict[str, Any]) -> tuple[int, list[Count], int, list[Count], float]:
    """A parsed stored sketch's bins as the readers add them: positive store's first key and
    counts, the negative store's, the zero count (a store without counts at key 0)."""
    if d.get("v") != FORMAT or d.get("gamma") != MAPPING.gamma or d.get("index_offset") != MAPPING._offset:
        raise ForeignSketch("sketch mapping differs")
    pos, neg = d["pos"], d["neg"]
    return (pos["offset"] if pos["counts"] else 0, pos["counts"], neg["offset"] if neg["counts"] else 0,
            neg["counts"], d["zero"])


# The write path builds one sketch per new hour row and merges into existing rows; a DDSketch (its
# mapping, two stores growing bin by bin) costs far more than the few dozen samples of a round. Bins
# holds exactly what dumps writes, computed as DDSketch would compute it, for the default mapping.
MAPPING = new_sketch()._mapping         # the default mapping, shared: it is never changed


@dataclass(slots=True)
class Bins:
    """The content of a default-mapping sketch: each store's first key and contiguous counts (no
    leading or trailing zero, each as dumps writes it), then the summary figures, as DDSketch keeps
    them."""

    pos_off: int
    pos: list[Count]
    neg_off: int
    neg: list[Count]
    zero: float
    count: float
    sum: float
    min: float
    max: float


def _plain(counts: list[Count]) -> list[Count]:
    """The counts as _num writes them (a float count that is integral becomes an int)."""
    return counts if float not in set(map(type, counts)) else [_num(c) for c in counts]


def _counts(keys: list[int]) -> tuple[int, list[Count]]:
    if not keys:
        return 0, []
    lo = min(keys)
    counts: list[Count] = [0] * (max(keys) - lo + 1)
    for k in keys:
        counts[k - lo] += 1
    return lo, counts


# KeyMapping.key is int(ceil(log(v, 2) * multiplier) + offset): with the default mapping's offset of 0
# that is the ceil itself (an int already), which spares a float addition and int() per sample.
_ZERO_OFFSET = MAPPING._offset == 0


def bins_of(values: Sequence[float]) -> Bins:
    """What `add_all(new_sketch(), values)` holds (values not empty): the same keys and counts, the sum
    added left to right, min and max."""
    lowest, multiplier, offset = MAPPING.min_possible, MAPPING._multiplier, MAPPING._offset
    log, ceil = math.log, math.ceil
    lo, hi = min(values), max(values)
    if _ZERO_OFFSET:
        pos_keys = [ceil(log(v, 2) * multiplier) for v in values if v > lowest]
    else:
        pos_keys = [int(ceil(log(v, 2) * multiplier) + offset) for v in values if v > lowest]
    neg_keys = [int(ceil(log(-v, 2) * multiplier) + offset) for v in values if v < -lowest] \
        if lo < -lowest else []
    pos_off, pos = _counts(pos_keys)
    neg_off, neg = _counts(neg_keys)
    return Bins(pos_off, pos, neg_off, neg, float(len(values) - len(pos_keys) - len(neg_keys)),
                float(len(values)), reduce(add, values, 0.0), lo, hi)


def _bins_add(off_a: int, a: list[Count], off_b: int, b: list[Count]) -> tuple[int, list[Count]]:
    """a + b by key, trimmed, each count as dumps writes it."""
    off, out = trim(*add_bins(off_a, a, off_b, b))
    return off, _plain(out)


def merge_bins(into: Bins, other: Bins) -> None:
    """DDSketch.merge, on Bins."""
    if other.count == 0:
        return
    if into.count == 0:
        into.pos_off, into.pos, into.neg_off, into.neg = other.pos_off, list(other.pos), other.neg_off, \
            list(other.neg)
        into.zero, into.count, into.sum, into.min, into.max = (other.zero, other.count, other.sum,
                                                              other.min, other.max)
        return
    into.pos_off, into.pos = _bins_add(into.pos_off, into.pos, other.pos_off, other.pos)
    into.neg_off, into.neg = _bins_add(into.neg_off, into.neg, other.neg_off, other.neg)
    into.zero += other.zero
    into.count += other.count
    into.sum += other.sum
    if other.min < into.min:
        into.min = other.min
    if other.max > into.max:
        into.max = other.max


def _store_bins(data: Any) -> tuple[int, list[Count]] | None:
    if type(data) is not dict or type(data.get("offset")) is not int or type(data.get("counts")) is not list:
        return None
    counts = data["counts"]
    if not all(type(c) is int or (type(c) is float and math.isfinite(c)) for c in counts):
        return None
    offset, counts = trim(data["offset"], counts)
    return offset, _plain(counts)


def _finite(value: Any) -> float | None:
    if (type(value) is int or type(value) is float) and math.isfinite(value):
        return float(value)
    return None


def bins_from_text(text: str) -> Bins | None:
    """The Bins of a stored sketch, as loads would read it; None for anything but this format with the
    default mapping and plain finite figures (the caller then takes the DDSketch path)."""
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if type(data) is not dict or data.get("v") != FORMAT or data.get("gamma") != MAPPING.gamma \
            or data.get("index_offset") != MAPPING._offset:
        return None
    pos, neg = _store_bins(data.get("pos")), _store_bins(data.get("neg"))
    figures = [_finite(data.get(k)) for k in ("zero", "count", "sum", "min", "max")]
    if pos is None or neg is None or None in figures or not figures[1]:
        return None
    zero, count, total, lo, hi = figures
    assert zero is not None and count is not None and total is not None and lo is not None and hi is not None
    return Bins(pos[0], pos[1], neg[0], neg[1], zero, count, total, lo, hi)


def bins_text(bins: Bins) -> str:
    """dumps of the sketch `bins` holds: the same JSON values (orjson writes the numbers; a figure that
    is not finite goes through dumps' json module)."""
    data = {
        "v": FORMAT,
        "gamma": MAPPING.gamma,
        "index_offset": MAPPING._offset,
        "pos": {"offset": bins.pos_off if bins.pos else 0, "counts": bins.pos},
        "neg": {"offset": bins.neg_off if bins.neg else 0, "counts": bins.neg},
        "zero": _num(bins.zero),
        "count": _num(bins.count),
        "sum": bins.sum,
        "min": bins.min if bins.count else None,
        "max": bins.max if bins.count else None,
    }
    if math.isfinite(bins.sum) and math.isfinite(bins.min) and math.isfinite(bins.max):
        return orjson.dumps(data).decode()
    return json.dumps(data, separators=(",", ":"))


def sketch_of(bins: Bins) -> DDSketch:
    """The DDSketch `bins` describes (for merging with a sketch in another format or mapping)."""
    sketch = new_sketch()
    for store, off, counts in ((sketch._store, bins.pos_off, bins.pos),
                               (sketch._negative_store, bins.neg_off, bins.neg)):
        for key, c in enumerate(counts, off):
            if c:
                store.add(key, float(c))
    sketch._zero_count, sketch._count, sketch._sum = bins.zero, bins.count, bins.sum
    sketch._min, sketch._max = bins.min, bins.max
    return sketch


def positive_bins(sketch: DDSketch) -> list[tuple[float, float]]:
    """The sketch's positive values as (the value DDSketch gives the bin, count), ascending."""
    store, mapping = sketch._store, sketch._mapping
    return [(float(mapping.value(store.offset + i)), float(c)) for i, c in enumerate(store.bins) if c]


# -- the arithmetic on bins -------------------------------------------------------------------------
# A store's bins are (first key, counts of the keys from it on). Counts add as DenseStore.merge adds
# them (a's count first); a subtraction (a report's later days = all days − the days before) is
# adding −1·b, which map(sub) gives exactly.
def add_bins(off_a: int, a: list[Any], off_b: int, b: Sequence[Any],
             sign: float = 1.0) -> tuple[int, list[Any]]:
    """a + sign·b bin by bin, sign ±1; `a` itself is reused (changed) when b fits inside it."""
    if not b:
        return off_a, a
    if not a:
        return off_b, list(b) if sign > 0 else [-x for x in b]
    lo, hi = min(off_a, off_b), max(off_a + len(a), off_b + len(b))
    if lo != off_a or hi != off_a + len(a):
        out = [0] * (hi - lo)
        out[off_a - lo:off_a - lo + len(a)] = a
    else:
        out = a
    i = off_b - lo
    out[i:i + len(b)] = map(add if sign > 0 else sub, out[i:i + len(b)], b)
    return lo, out


def total_bins(parts: Sequence[tuple[int, Sequence[float]]]) -> tuple[int, list[float]]:
    """The parts added in order, as add_bins one by one onto nothing, the key range laid out once."""
    if not parts:
        return 0, []
    lo = min(off for off, _ in parts)
    out = [0.0] * (max(off + len(b) for off, b in parts) - lo)
    for off, b in parts:
        i = off - lo
        out[i:i + len(b)] = map(add, out[i:i + len(b)], b)
    return lo, out


def trim(off: int, bins: list[Any]) -> tuple[int, list[Any]]:
    """Without the zero counts at either end (all zero: no bins, the offset past them)."""
    if not bins or (bins[0] and bins[-1]):
        return off, bins
    first = next((i for i, c in enumerate(bins) if c), len(bins))
    last = len(bins)
    while last > first and not bins[last - 1]:
        last -= 1
    return off + first, bins[first:last]
