"""The envelope's JSON Schema, from the wire models of every registered probe: what the collector serves
and the docs' copy (SCHEMA_COMMAND). Apart from netprobe.store.wire, which the probes use and so must
not import the registry."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter, create_model

from netprobe.probes import REGISTRY
from netprobe.store.wire import _Head, result_model

SCHEMA_COMMAND = "python3 -m netprobe.store.wire_schema > docs/envelope.schema.json"


def envelope_schema() -> dict[str, Any]:
    """The envelope's JSON Schema (draft 2020-12), from the same models `check` validates with: one
    variant per registered probe, told apart by `probe`. What types cannot say (received ≤ sent, …)
    `check` adds; the schema is what a client can validate before sending."""
    variants = []
    for name, spec in REGISTRY.items():
        variants.append(create_model(
            f"{spec.result_type.__name__}Envelope", __base__=_Head,
            __doc__=f"An envelope holding one {name} round.",
            probe=(Literal[name], ...), result=(result_model(spec.result_type), ...)))
    union: Any = Annotated[Union[tuple(variants)], Field(discriminator="probe")]  # noqa: UP007
    schema = TypeAdapter(union).json_schema(by_alias=True)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "/api/v1/schema/envelope.json", "title": "netprobe result envelope", **schema}


if __name__ == "__main__":  # the docs' copy: SCHEMA_COMMAND
    import json

    print(json.dumps(envelope_schema(), indent=2))
