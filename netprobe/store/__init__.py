"""SQL storage (docs/architecture.md): raw rounds, hourly DDSketch rollups, route events, retention;
SQLite, PostgreSQL.

Names are loaded on first use (PEP 562) so `netprobe.store.cli` — imported by every `netprobe`
command — does not pull in SQLAlchemy and Alembic until a database command actually runs."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from netprobe.store.envelopes import (
        Envelope,
        EnvelopeError,
        parse_envelope,
        parse_envelopes,
        stored_envelope,
    )
    from netprobe.store.events import PATH_CHANGE, PathEvent
    from netprobe.store.rollups import Rollup
    from netprobe.store.store import DEFAULT_RAW_RETENTION_DAYS, Store, WriteStats, open_store
    from netprobe.store.urls import default_db_url, display_url, normalise_url, state_dir

_WHERE = {
    "Envelope": "envelopes", "EnvelopeError": "envelopes", "parse_envelope": "envelopes",
    "parse_envelopes": "envelopes", "stored_envelope": "envelopes",
    "PATH_CHANGE": "events", "PathEvent": "events",
    "Rollup": "rollups",
    "DEFAULT_RAW_RETENTION_DAYS": "store", "Store": "store", "WriteStats": "store", "open_store": "store",
    "default_db_url": "urls", "display_url": "urls", "normalise_url": "urls", "state_dir": "urls",
}

__all__ = [
    "DEFAULT_RAW_RETENTION_DAYS",
    "PATH_CHANGE",
    "Envelope",
    "EnvelopeError",
    "PathEvent",
    "Rollup",
    "Store",
    "WriteStats",
    "default_db_url",
    "display_url",
    "normalise_url",
    "open_store",
    "parse_envelope",
    "parse_envelopes",
    "state_dir",
    "stored_envelope",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'netprobe.store' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"netprobe.store.{module}"), name)
    globals()[name] = value
    return value
