"""Agent configuration: TOML → frozen, validated models; every problem reported with its field path.

Probe names and their settings come only from `netprobe.probes.REGISTRY`, so adding a probe changes
nothing here. Effective settings for a target's probe merge, key by key,
`[targets.<probe>]` over `[probes.<probe>]` over the probe model's defaults.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import zoneinfo
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from netprobe.config.alerts import AlertRule, NotifierConfig, check_alerting
from netprobe.config.base import HttpUrlOrOff, Ident, StrictModel, as_tuple, check_unique
from netprobe.config.durations import Duration
from netprobe.config.loader import (
    parse_toml,
    problem_text,
    read_config_text,
    validate_model,
    validate_sections,
)
from netprobe.errors import ConfigError
from netprobe.net.lines import ClassificationConfig
from netprobe.probes import REGISTRY, ProbeSettings, ProbeTarget
from netprobe.probes.base import ReflectorAuth, TargetOption
from netprobe.probes.reflector import KEY as REFLECTOR_KEY

_M = TypeVar("_M", bound=BaseModel)
_FAMILIES = {"any": 0, "ipv4": socket.AF_INET, "ipv6": socket.AF_INET6}


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

        host, port = check_host_port(self.listen)
        return host.strip("[]"), port


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
    target; rmtr and owd, DESIGN §9). The token is the one `netprobe target add-agent` printed."""

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


class TargetConfig(StrictModel):
    """One [[targets]] entry. Per-probe overrides ([targets.icmp] …) are held by Config, not here."""

    id: Ident = Field(description="unique among targets")
    host: str = Field(min_length=1, max_length=253, description="name or address literal")
    datacenter: str = Field(default="", description="candidate datacenter, e.g. hk")
    line: str = Field(default="", description="the line it was sold as, e.g. cn2-gia")
    probes: Annotated[tuple[str, ...], BeforeValidator(as_tuple)] = Field(
        min_length=1, description="probes run against this target")
    # ... then the keys the registered probes add (tcp_port, sse_url: their specs' target_options);
    # target_model() builds the model that has them.
    family: Literal["any", "ipv4", "ipv6"] = Field(default="any", description="address family to use")
    enabled: bool = Field(default=True, description="false keeps the target configured but unprobed")

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        if value != value.strip() or any(c.isspace() for c in value):
            raise ValueError(f"{value!r} contains whitespace")
        return value

    @field_validator("probes")
    @classmethod
    def _probes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        # Per-item errors (unknown probe names) are reported by Config with their index.
        if len(set(value)) != len(value):
            raise ValueError("a probe is listed twice")
        return value

    @model_validator(mode="after")
    def _required_options(self) -> TargetConfig:
        for probe in self.probes:
            spec = REGISTRY.get(probe)
            for option in spec.target_options if spec is not None else ():
                if option.required and not getattr(self, option.key):
                    raise ValueError(f"{option.key}: required when probes include {probe}")
        return self

    @field_validator("family")
    @classmethod
    def _family_matches_literal(cls, value: str, info: ValidationInfo) -> str:
        host = info.data.get("host")
        try:
            address = ipaddress.ip_address(str(host).strip("[]"))
        except ValueError:
            return value
        wanted = {"ipv4": 4, "ipv6": 6}.get(value)
        if wanted is not None and address.version != wanted:
            raise ValueError(f"host {host} is an IPv{address.version} address but family is {value!r}")
        return value

    def option(self, key: str) -> object:
        """The value of a probe's target option (tcp_port, sse_url, …); None for a key no probe adds."""
        return getattr(self, key, None)

    def to_probe_target(self) -> ProbeTarget:
        # the probes' options fill ProbeTarget's slots (port, url): a probe it runs first, in its order,
        # then the others (registry order), so two probes adding a port do not take each other's
        port: int | None = None
        url: str | None = None
        options: dict[str, object] = {}
        order = [*(p for p in self.probes if p in REGISTRY), *(p for p in REGISTRY if p not in self.probes)]
        for probe in order:
            for o in REGISTRY[probe].target_options:
                value = getattr(self, o.key)
                if value is not None:
                    options[o.key] = value
                if o.fills == "port" and port is None and isinstance(value, int):
                    port = value
                elif o.fills == "url" and url is None and isinstance(value, str):
                    url = value
        return ProbeTarget(id=self.id, host=self.host.strip("[]"), port=port, url=url,
                           datacenter=self.datacenter, line=self.line, family=_FAMILIES[self.family],
                           options=options)

    @classmethod
    def key_order(cls) -> list[str]:
        """Its keys as a message lists them: the probes' options right after `probes`."""
        keys = list(cls.model_fields)
        options = [k for k in keys if k not in TargetConfig.model_fields]
        common = [k for k in keys if k in TargetConfig.model_fields]
        at = common.index("probes") + 1
        return [*common[:at], *options, *common[at:]]


_TARGET_MODELS: dict[tuple[object, ...], type[TargetConfig]] = {}


def target_model() -> type[TargetConfig]:
    """TargetConfig with the target options of every registered probe (built once per registry)."""
    by_key: dict[str, TargetOption] = {}
    for spec in REGISTRY.values():
        for o in spec.target_options:
            if by_key.setdefault(o.key, o) is not o:
                raise TypeError(f"target option {o.key!r} of probe {spec.name!r} is another probe's key; "
                                "probes that share a key share its TargetOption")
    options = tuple(by_key.values())
    model = _TARGET_MODELS.get(options)
    if model is None:
        fields: dict[str, Any] = {
            o.key: (o.annotation if o.check is None else Annotated[o.annotation, AfterValidator(o.check)],
                    o.field)
            for o in options}
        model = _TARGET_MODELS[options] = create_model("TargetConfig", __base__=TargetConfig, **fields)
    return model


class Config(StrictModel):
    """A whole agent configuration; build it with load_config() or parse_config()."""

    agent: AgentConfig
    storage: StorageConfig = StorageConfig()
    resolver: ResolverConfig = ResolverConfig()
    log: LogConfig = LogConfig()
    geoip: GeoIPConfig = GeoIPConfig()
    metrics: MetricsConfig = MetricsConfig()
    influxdb: InfluxConfig = InfluxConfig()
    uplink: UplinkConfig = UplinkConfig()
    reflector: ReflectorConfig = ReflectorConfig()
    classification: ClassificationConfig = ClassificationConfig()
    probes: Mapping[str, ProbeSettings] = Field(
        description="[probes.<name>] defaults, one entry per registered probe")
    targets: tuple[TargetConfig, ...]
    alerts: tuple[AlertRule, ...] = ()
    notifiers: tuple[NotifierConfig, ...] = ()
    # (target id, probe) → effective settings, merged and validated at load.
    _effective: dict[tuple[str, str], ProbeSettings] = PrivateAttr(default_factory=dict)

    def probe_settings(self, target: TargetConfig, probe: str) -> ProbeSettings:
        try:
            return self._effective[(target.id, probe)]
        except KeyError:
            raise KeyError(f"target {target.id!r} does not run probe {probe!r}") from None

    def jobs(self) -> Iterator[tuple[TargetConfig, str, ProbeSettings]]:
        """(target, probe, settings) for every enabled target × probe: one scheduler job each."""
        for target in self.targets:
            if target.enabled:
                for probe in target.probes:
                    yield target, probe, self._effective[(target.id, probe)]

    def agent_envelope(self) -> dict[str, str]:
        a = self.agent
        return {"id": a.id, "region": a.region, "isp": a.isp, "timezone": a.timezone}


# ---------------------------------------------------------------------------------------------
# Loading: validate each part on its own so every problem is collected, not just the first.

_SECTIONS: dict[str, type[BaseModel]] = {
    "agent": AgentConfig, "storage": StorageConfig, "resolver": ResolverConfig, "log": LogConfig,
    "geoip": GeoIPConfig, "classification": ClassificationConfig, "metrics": MetricsConfig,
    "influxdb": InfluxConfig, "uplink": UplinkConfig, "reflector": ReflectorConfig,
}
_TOP_KEYS = (*_SECTIONS, "probes", "targets", "alerts", "notifiers")


def load_config(path: Path) -> Config:
    """Read and validate a TOML file; raises ConfigError listing every problem."""
    return parse_config(read_config_text(path), source=str(path))


def parse_config(text: str, source: str = "<string>") -> Config:
    """Validate TOML text; raises ConfigError(problems, source) with one "path: message" per problem."""
    data = parse_toml(text, source)
    problems: list[str] = []
    config = _build(data, problems)
    if problems or config is None:
        raise ConfigError(problems, source=source)
    return config


def _build(data: dict[str, Any], problems: list[str]) -> Config | None:
    for key in data:
        if key not in _TOP_KEYS:
            problems.append(f"{key}: unknown section or key; allowed: {', '.join(_TOP_KEYS)}")

    sections = validate_sections(data, _SECTIONS, {"agent"}, problems)

    defaults_raw, defaults = _probe_defaults(data.get("probes", {}), problems)
    targets, effective = _targets(data.get("targets"), defaults_raw, defaults, problems)
    raw_targets = data.get("targets")
    target_ids = [t["id"] for t in raw_targets if isinstance(t, dict) and isinstance(t.get("id"), str)] \
        if isinstance(raw_targets, list) else []
    alerts, notifiers = check_alerting(data, problems, target_ids)
    reflector = sections.get("reflector")
    users = [t.id for t in targets if t.option(REFLECTOR_KEY)]
    if users and isinstance(reflector, ReflectorConfig) and not reflector.configured:
        problems.append(f"reflector.token_file: targets {', '.join(users)} use a reflector; set token_file "
                        "(or token_env, or token) to the token `netprobe target add-agent` printed")

    if problems:
        return None
    config = Config(agent=sections["agent"], storage=sections["storage"], resolver=sections["resolver"],
                    log=sections["log"], geoip=sections["geoip"], metrics=sections["metrics"],
                    influxdb=sections["influxdb"], uplink=sections["uplink"],
                    reflector=sections["reflector"], classification=sections["classification"],
                    probes=defaults, targets=tuple(targets), alerts=alerts, notifiers=notifiers)
    config._effective.update(effective)
    return config


def _probe_defaults(raw: object, problems: list[str]
                    ) -> tuple[dict[str, dict[str, Any]], dict[str, ProbeSettings]]:
    """[probes.<name>] tables: raw (for merging) and validated (reported under probes.<name>)."""
    raws: dict[str, dict[str, Any]] = {}
    validated: dict[str, ProbeSettings] = {}
    if not isinstance(raw, dict):
        problems.append("probes: must be a table of [probes.<name>] tables")
        raw = {}
    for name, table in raw.items():
        if name not in REGISTRY:
            problems.append(f"probes.{name}: unknown probe; available: {_available()}")
        elif not isinstance(table, dict):
            problems.append(f"probes.{name}: must be a table ([probes.{name}])")
        else:
            raws[name] = table
    for name, spec in REGISTRY.items():
        settings = validate_model(spec.settings_model, raws.get(name, {}), f"probes.{name}", problems)
        if settings is not None:
            validated[name] = settings
    return raws, validated


def _targets(raw: object, defaults_raw: dict[str, dict[str, Any]], defaults: dict[str, ProbeSettings],
             problems: list[str]) -> tuple[list[TargetConfig], dict[tuple[str, str], ProbeSettings]]:
    targets: list[TargetConfig] = []
    effective: dict[tuple[str, str], ProbeSettings] = {}
    if raw is None:
        problems.append("targets: no targets; add at least one [[targets]] table")
        return targets, effective
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        problems.append("targets: must be an array of tables ([[targets]])")
        return targets, effective
    if not raw:
        problems.append("targets: no targets; add at least one [[targets]] table")
    first_index: dict[str, int] = {}
    for i, table in enumerate(raw):
        where = f"targets[{i}]"
        fields = {k: v for k, v in table.items() if k not in REGISTRY}
        overrides = {k: v for k, v in table.items() if k in REGISTRY}
        target = validate_model(target_model(), fields, where, problems, extra_allowed=tuple(REGISTRY))
        probes = fields.get("probes")
        listed = [p for p in probes if isinstance(p, str)] if isinstance(probes, list) else []
        if isinstance(probes, list):
            for j, name in enumerate(probes):
                if isinstance(name, str) and name not in REGISTRY:
                    problems.append(f"{where}.probes[{j}]: unknown probe {name!r}; available: {_available()}")
        check_unique(first_index, fields.get("id"), i, f"{where}.id", "target id", "targets", problems)
        for name, override in overrides.items():
            if not isinstance(override, dict):
                problems.append(f"{where}.{name}: must be a table ([targets.{name}])")
            elif isinstance(probes, list) and name not in listed:
                problems.append(f"{where}.{name}: overrides a probe this target does not run; "
                                f"add {name!r} to {where}.probes or remove the table")
            else:
                for key, why in REGISTRY[name].agent_wide if name in REGISTRY else ():
                    if key in override:
                        problems.append(f"{where}.{name}.{key}: {why}; set it in [probes.{name}]")
        for name in listed:
            if name not in REGISTRY:
                continue  # reported above
            override = overrides.get(name)
            if not isinstance(override, dict) or not override:
                effective_settings = defaults.get(name)  # None: [probes.<name>] is invalid, reported
            else:
                effective_settings = _merged(name, defaults_raw.get(name, {}), name in defaults, override,
                                             f"{where}.{name}", problems)
            if target is not None and effective_settings is not None:
                effective[(target.id, name)] = effective_settings
        if target is not None:
            targets.append(target)
    return targets, effective


def _merged(probe: str, defaults: dict[str, Any], defaults_ok: bool, override: dict[str, Any], where: str,
            problems: list[str]) -> ProbeSettings | None:
    """Validate override-over-defaults; errors are named under the target. With valid defaults every
    error is the override's doing; with invalid ones (already reported under probes.<name>) only the
    override's own fields are checked, over the model defaults."""
    model: type[ProbeSettings] = REGISTRY[probe].settings_model
    try:
        return model.model_validate({**(defaults if defaults_ok else {}), **override}, strict=True)
    except ValidationError as exc:
        for err in exc.errors():
            if defaults_ok or (err["loc"] and err["loc"][0] in override):
                problems.append(problem_text(where, err, model, ()))
        return None


def _available() -> str:
    return ", ".join(sorted(REGISTRY))


def _redact_url(url: str) -> str:
    return re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", url)
