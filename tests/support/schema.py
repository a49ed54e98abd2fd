"""The envelope's JSON Schema (as the collector serves it) applied to envelopes real probes wrote."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from jsonschema import Draft202012Validator

from netprobe.store.wire_schema import envelope_schema


@functools.cache
def validator() -> Draft202012Validator:
    schema = envelope_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def assert_schema_valid(envelopes: Iterable[dict[str, Any]]) -> int:
    """Every envelope valid under the schema; how many there were."""
    n = 0
    for env in envelopes:
        errors = sorted(validator().iter_errors(env), key=lambda e: list(e.absolute_path))
        assert not errors, f"{env.get('probe')} envelope {env.get('id')}: " + "; ".join(
            f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in errors[:5])
        n += 1
    return n
