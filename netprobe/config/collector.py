"""Collector configuration: TOML → frozen, validated models; problems named by field path (exit 2)."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, field_validator

from netprobe.config.alerts import AlertRule, NotifierConfig, check_alerting
from netprobe.config.base import StrictModel
from netprobe.config.durations import Duration
from netprobe.config.loader import parse_toml, read_config_text, validate_sections
from netprobe.config.sections import (
    InfluxConfig,
    LogConfig,
    StorageConfig,
)
from netprobe.errors import ConfigError

DEFAULT_LISTEN = "0.0.0.0:8471"
MB = 1 << 20


class CollectorSection(StrictModel):
    """[collector]: the ingest server."""

    listen: str = Field(default=DEFAULT_LISTEN,
                        description='HOST:PORT to serve on, "[ADDR]:PORT" for IPv6; port 0: any free port')
    max_body_mb: int = Field(default=16, ge=1, le=1024,
                             description="cap on a request body in MiB, compressed and decompressed alike")
    max_batch: int = Field(default=5000, ge=1, le=1_000_000,
                           description="most envelopes in one POST; more is answered 413")
    grace: Duration = Field(default=5.0, ge=0, le=300,
                            description="on SIGTERM, how long requests in flight may take to finish")
    alert_settle: Duration = Field(default=60.0, ge=0, le=3600,
                                   description="alert windows are evaluated this long after they close "
                                               "(agents upload in batches; late rounds still count)")

    @field_validator("listen")
    @classmethod
    def _host_port(cls, value: str) -> str:
        from netprobe.net.targets_file import check_listen

        check_listen(value)  # ValueError names what is wrong
        return value

    @property
    def max_body_bytes(self) -> int:
        return self.max_body_mb * MB

    def address(self) -> tuple[str, int]:
        """(host, port) to serve on; port 0: any free port."""
        from netprobe.net.targets_file import check_listen

        return check_listen(self.listen)


_PREFIX_RE = re.compile(r"^/(?:[A-Za-z0-9._~-]+/)*$")


class DashboardSection(StrictModel):
    """[dashboard]: the read-only operator's view, served by `collector run` when enabled."""

    enabled: bool = Field(default=False, description="serve the dashboard (viewers: collector add-viewer)")
    prefix: str = Field(default="/", description='URL path it is served under; starts and ends with "/"')
    refresh: Duration = Field(default=60.0, ge=0, le=3600,
                              description="the overview's peak figures are recomputed at most this often "
                                          "(0: for every request)")

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not value.startswith("/") or not value.endswith("/"):
            raise ValueError(f'must start and end with "/", e.g. "/" or "/netprobe/", got {value!r}')
        if not _PREFIX_RE.match(value):
            raise ValueError("path segments may hold only letters, digits and . _ ~ -, "
                             f"without empty segments, got {value!r}")
        if value.rstrip("/").split("/")[1:2] in (["api"], ["healthz"], ["metrics"]):
            raise ValueError(f"{value!r} would overlap the collector's own paths (/api, /healthz, /metrics)")
        return value


class CollectorStorageConfig(StorageConfig):
    """[storage]: the collector's database; `url` is required (PostgreSQL in production)."""

    url: str = Field(min_length=1, description="any SQLAlchemy URL, e.g. "
                     "postgresql+psycopg://netprobe@/netprobe?host=/var/run/postgresql")


class CollectorConfig(StrictModel):
    """A whole collector configuration; build it with load_collector_config()."""

    collector: CollectorSection = CollectorSection()
    storage: CollectorStorageConfig
    influxdb: InfluxConfig = InfluxConfig()
    log: LogConfig = LogConfig()
    dashboard: DashboardSection = DashboardSection()
    alerts: tuple[AlertRule, ...] = ()
    notifiers: tuple[NotifierConfig, ...] = ()


def load_collector_config(path: Path) -> CollectorConfig:
    """Read and validate a TOML file; raises ConfigError listing every problem."""
    return parse_collector_config(read_config_text(path), source=str(path))


def parse_collector_config(text: str, source: str = "<string>") -> CollectorConfig:
    data = parse_toml(text, source)
    problems: list[str] = []
    sections = validate_sections(data, CollectorConfig, problems)
    alerts, notifiers = check_alerting(data, problems)   # targets are whatever the agents report
    if problems:
        raise ConfigError(problems, source=source)
    return CollectorConfig(**sections, alerts=alerts, notifiers=notifiers)
