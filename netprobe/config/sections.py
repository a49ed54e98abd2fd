"""The agent's own sections of its configuration ([agent], [storage], [resolver], [log], [geoip],
[metrics], [influxdb], [uplink], [reflector]); the collector shares some of them."""

from __future__ import annotations

import re
import zoneinfo
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    Field,
    field_validator,
    model_validator,
)

from netprobe.config.base import HttpUrlOrOff, Ident, StrictModel
from netprobe.config.durations import Duration
from netprobe.probes.base import ReflectorAuth


def _check_timezone(value: str) -> str:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {value!r} (use an IANA name such as 'Asia/Shanghai')") from None
    return value




class AgentConfig(StrictModel):
    """[agent]: who is measuring, from where. Copied into every result envelope."""

    id: Ident = Field(description="unique per probe host")
    region: str = Field(min_length=1, description="user region the agent stands in, e.g. cn-east")
    isp: str = Field(min_length=1, description="the agent's access ISP, e.g. telecom")
    timezone: Annotated[str, AfterValidator(_check_timezone)] = Field(
        description="IANA time zone of the users; peak windows are local hours of it")
    state_dir: str | None = Field(
        default=None, min_length=1, description="where the agent keeps its database; default: its choice")
    timer_slack: Duration = Field(
        default=0.02, ge=0, le=0.1,
        description="how late the kernel may fire the agent's timers so it wakes once for several; "
                    "at most a tenth of the shortest probe interval; 0: the kernel's default (50 µs)")


class StorageConfig(StrictModel):
    """[storage]: where results go."""

    url: str | None = Field(default=None, min_length=1,
                            description="any SQLAlchemy URL; default: SQLite under the state directory")
    retention: Duration = Field(default=14 * 86400.0, gt=0, description="how long raw rounds are kept")

    @field_validator("url")
    @classmethod
    def _sqlalchemy_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from netprobe.store.urls import is_url  # SQLAlchemy is loaded only for a configured URL

        if not is_url(value):
            raise ValueError(f"{_redact_url(value)!r} is not a SQLAlchemy URL "
                             "(e.g. sqlite:////var/lib/netprobe/netprobe.db)")
        return value


class ResolverConfig(StrictModel):
    """[resolver]: host names are re-resolved this often, so a moved target is followed."""

    refresh: Duration = Field(default=300.0, gt=0, description="how often host names are re-resolved")


class LogConfig(StrictModel):
    """[log]: structured logs on stderr."""

    level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="least severe level logged")
    format: Literal["logfmt", "json"] = Field(default="logfmt", description="one line per event")


class GeoIPConfig(StrictModel):
    """[geoip]: MaxMind-format databases for hop ASN, organisation, country and city.

    A missing or unreadable file is a warning at run time (that enrichment is off) and a problem
    for `netprobe config check`.
    """

    asn_db: str = Field(default="", description='GeoLite2-ASN .mmdb; "": ASNs come from the prefix table')
    city_db: str = Field(default="", description='GeoLite2-City or GeoLite2-Country .mmdb; "": none')

    @property
    def asn_path(self) -> Path | None:
        return Path(self.asn_db) if self.asn_db else None

    @property
    def city_path(self) -> Path | None:
        return Path(self.city_db) if self.city_db else None


class MetricsConfig(StrictModel):
    """[metrics]: the agent's Prometheus exporter; off unless `listen` is set."""

    listen: str = Field(default="", description='HOST:PORT for GET /metrics, e.g. "127.0.0.1:9470"; "": off')

    @field_validator("listen")
    @classmethod
    def _host_port(cls, value: str) -> str:
        if value:
            from netprobe.net.targets_file import check_host_port

            check_host_port(value)  # ValueError names what is wrong
        return value

    def address(self) -> tuple[str, int] | None:
        if not self.listen:
            return None
        from netprobe.net.targets_file import check_host_port

        return check_host_port(self.listen)


class InfluxConfig(StrictModel):
    """[influxdb]: also write every round to an InfluxDB v2 write API; off unless `url` is set."""

    url: HttpUrlOrOff = Field(default="", description='e.g. "http://127.0.0.1:8086"; "": off')
    org: str = Field(default="", description="organisation")
    bucket: str = Field(default="netprobe", min_length=1, description="bucket")
    token_file: str = Field(default="", description="file holding the API token (never logged)")
    token_env: str = Field(default="", description="or the environment variable holding it")

class UplinkConfig(StrictModel):
    """[uplink]: forward every stored round to a collector through the durable outbox; off unless `url`."""

    url: HttpUrlOrOff = Field(default="", description='collector base URL, e.g. '
                              '"http://collector.example.net:8471"; "": off')
    token: str = Field(default="", description="the agent's bearer token (prefer token_file)", repr=False)
    token_file: str = Field(default="", description="file holding the token (never logged)")
    token_env: str = Field(default="", description="or the environment variable holding it")
    batch: int = Field(default=500, ge=1, le=5000, description="rounds per upload request")
    max_outbox: int = Field(default=500_000, ge=1, description="rounds kept for a collector that is away; "
                            "beyond this the oldest are dropped, logged and counted")
    timeout: Duration = Field(default=30.0, gt=0, description="one upload request, connect to response")
    retry_max: Duration = Field(default=300.0, gt=0, description="longest wait between failed uploads "
                                "(backoff doubles from 1 s with full jitter up to this)")

    @field_validator("url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @model_validator(mode="after")
    def _one_token(self) -> UplinkConfig:
        given = [k for k in ("token", "token_file", "token_env") if getattr(self, k)]
        if len(given) > 1:
            raise ValueError(f"give one of token, token_file, token_env (got {', '.join(given)})")
        if self.url and not given:
            raise ValueError("url is set but no token: set token_file (or token_env, or token)")
        return self


class ReflectorConfig(StrictModel):
    """[reflector]: how this agent authenticates to its targets' reflectors (`reflector = URL` on a
    target; rmtr and owd). The token is the one `netprobe target add-agent` printed."""

    token: str = Field(default="", description="the agent's reflector token (prefer token_file)", repr=False)
    token_file: str = Field(default="", description="file holding the token (never logged)")
    token_env: str = Field(default="", description="or the environment variable holding it")
    clock_sync: bool = Field(default=False, description="true only when this agent's and the reflectors' "
                             "clocks are NTP/PTP-synchronised: owd then gives absolute one-way delays")

    @model_validator(mode="after")
    def _one_token(self) -> ReflectorConfig:
        given = [k for k in ("token", "token_file", "token_env") if getattr(self, k)]
        if len(given) > 1:
            raise ValueError(f"give one of token, token_file, token_env (got {', '.join(given)})")
        return self

    @property
    def configured(self) -> bool:
        return bool(self.token or self.token_file or self.token_env)

    def auth(self) -> ReflectorAuth | None:
        """The token read now (SetupError naming the key if its file or variable fails); None if unset."""
        from netprobe.config.secrets import read_secret

        if not self.configured:
            return None
        token = read_secret("reflector", inline=self.token, file=self.token_file, env=self.token_env)
        return ReflectorAuth(token=token, clock_sync=self.clock_sync)


def _redact_url(url: str) -> str:
    return re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", url)
