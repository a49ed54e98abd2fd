"""Table definitions the queries use. The DDL itself lives in the Alembic revisions (migrations/)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
)
from sqlalchemy.types import TypeEngine

# Named constraints so SQLite batch migrations can find and alter them later.
metadata = MetaData(naming_convention={
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
})


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC in and out on both dialects (SQLite keeps naive UTC text)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class JsonDocument(TypeDecorator[Any]):
    """JSON, stored as JSONB on PostgreSQL (as the migrations create it). Not JSON().with_variant(JSONB()):
    that imports SQLAlchemy's PostgreSQL dialects (19 modules) into every process, the SQLite
    agent's included; this imports JSONB only once a PostgreSQL connection needs it."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(JSON())


ID = 128   # length of agent/target/result ids

agents = Table(
    "agents", metadata,
    Column("id", String(ID), primary_key=True),
    Column("region", String(128)),
    Column("isp", String(128)),
    Column("timezone", String(64)),
    Column("info", JsonDocument()),
    Column("token_hash", String(255)),     # collector: per-agent bearer token, hashed
    Column("first_seen", UTCDateTime(), nullable=False),
    Column("last_seen", UTCDateTime(), nullable=False),
    # as the agent's uplink last reported them (collector, 0007): rounds waiting in its outbox, and its
    # clock minus the collector's (± the upload's one-way time), at health_at
    Column("outbox_backlog", Integer),
    Column("clock_offset_ms", Float),
    Column("health_at", UTCDateTime()),
)

targets = Table(
    "targets", metadata,
    Column("id", String(ID), primary_key=True),
    Column("host", String(255)),
    Column("datacenter", String(128)),
    Column("line", String(64)),
    Column("info", JsonDocument()),
    Column("first_seen", UTCDateTime(), nullable=False),
    Column("last_seen", UTCDateTime(), nullable=False),
)

probe_results = Table(
    "probe_results", metadata,
    Column("id", String(ID), primary_key=True),
    Column("probe", String(32), nullable=False),
    Column("agent_id", String(ID), ForeignKey("agents.id"), nullable=False),
    Column("target_id", String(ID), ForeignKey("targets.id"), nullable=False),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("status", String(16), nullable=False),
    Column("envelope", JsonDocument(), nullable=False),
    Column("stored_at", UTCDateTime(), nullable=False),
    Index("ix_probe_results_agent_target_started", "agent_id", "target_id", "started_at"),
    # a route's newest round of one probe (its detected line): found where the probe's rows begin,
    # not by walking back through every round of the others (0011)
    Index("ix_probe_results_agent_target_probe_started", "agent_id", "target_id", "probe", "started_at"),
    Index("ix_probe_results_started_at", "started_at"),
)

rollups_hourly = Table(
    "rollups_hourly", metadata,
    Column("agent_id", String(ID), ForeignKey("agents.id"), primary_key=True),
    Column("target_id", String(ID), ForeignKey("targets.id"), primary_key=True),
    Column("probe", String(32), primary_key=True),
    Column("hour", UTCDateTime(), primary_key=True),
    Column("rounds", Integer, nullable=False, default=0),
    Column("error_rounds", Integer, nullable=False, default=0),
    Column("sent", Integer, nullable=False, default=0),
    Column("received", Integer, nullable=False, default=0),
    Column("duplicates", Integer, nullable=False, default=0),
    Column("loss_pct_sum", Float, nullable=False, default=0.0),
    Column("loss_rounds", Integer, nullable=False, default=0),
    Column("rtt_min", Float),
    Column("rtt_max", Float),
    Column("rtt_sum", Float, nullable=False, default=0.0),
    Column("rtt_count", Integer, nullable=False, default=0),
    Column("jitter_sum", Float, nullable=False, default=0.0),
    Column("jitter_count", Integer, nullable=False, default=0),
    Column("sketch", Text),                # DDSketch as compact JSON (netprobe.store.sketch)
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("extras", Text),                # probe-specific sums, JSON {"name": [sum, count]} (0002)
    Index("ix_rollups_hourly_hour", "hour"),
    Index("ix_rollups_hourly_agent_probe_hour", "agent_id", "probe", "hour"),     # 0004
)

rollups_prefix = Table(
    "rollups_prefix", metadata,      # everything before folded_until, by local hour of day (0004)
    Column("agent_id", String(ID), primary_key=True),
    Column("target_id", String(ID), primary_key=True),
    Column("probe", String(32), primary_key=True),
    Column("folded_until", UTCDateTime(), primary_key=True),
    Column("zone", String(64), nullable=False),
    Column("hours", Integer, nullable=False),
    Column("payload", LargeBinary, nullable=False),   # netprobe.store.prefix: sums by local hour (0005)
    *(Column(f"l{k}", LargeBinary) for k in range(10)),   # sparse table: extremes over 2^k days ending here
    Column("updated_at", UTCDateTime(), nullable=False),
)

path_changes = Table(
    "path_changes", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("agent_id", String(ID), nullable=False),
    Column("target_id", String(ID), nullable=False),
    Column("detected_at", UTCDateTime(), nullable=False),
    Column("kind", String(32), nullable=False),        # path_change | line_mismatch | return_line_mismatch
    # forward (agent → target: mtr) | return (target → agent: rmtr); rows before 0006 are forward
    Column("direction", String(16), nullable=False, server_default="forward"),
    Column("old_hash", String(64)),
    Column("new_hash", String(64)),
    Column("label", String(32)),
    Column("details", JsonDocument()),
    Index("ix_path_changes_agent_target_detected", "agent_id", "target_id", "detected_at"),
)

alert_states = Table(
    "alert_states", metadata,
    Column("rule", String(128), primary_key=True),
    Column("agent_id", String(ID), primary_key=True),
    Column("target_id", String(ID), primary_key=True),
    Column("state", String(16), nullable=False),        # ok | pending | firing
    Column("bad_windows", Integer, nullable=False, default=0),
    Column("value", Float),
    Column("started_at", UTCDateTime()),
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("details", JsonDocument()),
)

alert_events = Table(
    "alert_events", metadata,        # every alert transition, for the dashboard's history (0008)
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("rule", String(128), nullable=False),
    Column("agent_id", String(ID), nullable=False),
    Column("target_id", String(ID), nullable=False),
    Column("datacenter", String(128)),
    Column("line", String(64)),
    Column("metric", String(64), nullable=False),
    Column("value", Float),
    Column("threshold", Float, nullable=False),
    Column("state", String(16), nullable=False),        # firing | resolved | local
    Column("local", Boolean, nullable=False),           # a quorum rule's local alert (last mile)
    Column("scope", String(16)),                        # quorum rules: region | isp
    Column("scope_value", String(128)),
    Column("quorum", Integer),
    Column("agents", JsonDocument()),                      # quorum rules: the agents that agreed
    Column("started_at", UTCDateTime()),
    Column("at", UTCDateTime(), nullable=False),        # end of the window of the transition
    Column("details", JsonDocument()),
    Index("ix_alert_events_agent_target_at", "agent_id", "target_id", "at"),
    Index("ix_alert_events_rule_agent_target", "rule", "agent_id", "target_id"),
)

outbox = Table(
    "outbox", metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("result_id", String(ID), nullable=False, unique=True),
    Column("payload", JsonDocument(), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("next_attempt_at", UTCDateTime(), nullable=False),
    Column("last_error", Text),
    Index("ix_outbox_next_attempt_at", "next_attempt_at"),
)

agent_tokens = Table(
    "agent_tokens", metadata,        # collector: one bearer token per agent, stored hashed (0003)
    Column("agent_id", String(ID), primary_key=True),
    Column("token_hash", String(64), nullable=False, unique=True),   # sha256 hex of the token
    Column("created_at", UTCDateTime(), nullable=False),             # when the current token was issued
    Column("revoked_at", UTCDateTime()),
    Column("last_used_at", UTCDateTime()),
)

dashboard_viewers = Table(
    "dashboard_viewers", metadata,   # collector: who may read the dashboard, secrets stored hashed (0007)
    Column("name", String(128), primary_key=True),
    Column("secret_hash", String(64), nullable=False),               # sha256 hex of the secret
    Column("created_at", UTCDateTime(), nullable=False),
    Column("revoked_at", UTCDateTime()),
)

store_meta = Table(
    "store_meta", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)
