"""SQL storage: raw rounds, hourly DDSketch rollups, retention; SQLite or PostgreSQL (DESIGN §4)."""

from netprobe.store.envelopes import EnvelopeError, parse_envelope
from netprobe.store.rollups import HourRow, Rollup, WindowStats, merge_hours
from netprobe.store.store import DEFAULT_RAW_RETENTION_DAYS, Store, WriteStats, open_store
from netprobe.store.urls import default_db_url, display_url, normalise_url, state_dir

__all__ = [
    "DEFAULT_RAW_RETENTION_DAYS",
    "EnvelopeError",
    "HourRow",
    "Rollup",
    "Store",
    "WindowStats",
    "WriteStats",
    "default_db_url",
    "display_url",
    "merge_hours",
    "normalise_url",
    "open_store",
    "parse_envelope",
    "state_dir",
]
