"""Agent configuration: TOML → frozen, validated models; every problem reported with its field path.

Probe names and their settings come only from `netprobe.probes.REGISTRY`, so adding a probe changes
nothing here. Effective settings for a target's probe merge, key by key,
`[targets.<probe>]` over `[probes.<probe>]` over the probe model's defaults.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import (
    Field,
    PrivateAttr,
    ValidationError,
)

from netprobe import extras
from netprobe.config.alerts import AlertRule, NotifierConfig, check_alerting
from netprobe.config.base import StrictModel, check_unique
from netprobe.config.loader import (
    parse_toml,
    problem_text,
    read_config_text,
    validate_model,
    validate_sections,
)
from netprobe.config.sections import (
    AgentConfig,
    GeoIPConfig,
    InfluxConfig,
    LogConfig,
    MetricsConfig,
    ReflectorConfig,
    ResolverConfig,
    StorageConfig,
    UplinkConfig,
)
from netprobe.config.targets import TargetConfig, target_model
from netprobe.errors import ConfigError
from netprobe.net.lines import ClassificationConfig
from netprobe.probes import REGISTRY, ProbeSettings
from netprobe.probes.reflector import KEY as REFLECTOR_KEY


class Config(StrictModel):
    """A whole agent configuration; build it with load_config() or parse_config()."""

    agent: AgentConfig
    storage: StorageConfig = StorageConfig()
    resolver: ResolverConfig = ResolverConfig()
    log: LogConfig = LogConfig()
    geoip: GeoIPConfig = GeoIPConfig()
    classification: ClassificationConfig = ClassificationConfig()
    metrics: MetricsConfig = MetricsConfig()
    influxdb: InfluxConfig = InfluxConfig()
    uplink: UplinkConfig = UplinkConfig()
    reflector: ReflectorConfig = ReflectorConfig()
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
    sections = validate_sections(data, Config, problems)

    defaults_raw, defaults = _probe_defaults(data.get("probes", {}), problems)
    raw_targets = data.get("targets")
    targets, effective = _targets(raw_targets, defaults_raw, defaults, problems)
    target_ids = [t["id"] for t in raw_targets if isinstance(t, dict) and isinstance(t.get("id"), str)] \
        if isinstance(raw_targets, list) else []
    alerts, notifiers = check_alerting(data, problems, target_ids, agent=True)
    reflector = sections.get("reflector")
    users = [t.id for t in targets if t.option(REFLECTOR_KEY)]
    if users and isinstance(reflector, ReflectorConfig) and not reflector.configured:
        problems.append(f"reflector.token_file: targets {', '.join(users)} use a reflector; set token_file "
                        "(or token_env, or token) to the token `netprobe target add-agent` printed")

    problems += _extras(sections, alerts)
    if problems:
        return None
    config = Config(**sections, probes=defaults, targets=tuple(targets), alerts=alerts, notifiers=notifiers)
    config._effective.update(effective)
    return config


def _extras(sections: Mapping[str, Any], alerts: Sequence[AlertRule]) -> list[str]:
    """What this file turns on that the plain agent install lacks, each with the extra that adds it:
    found at start-up rather than at the first round that needs it."""
    from netprobe.store.urls import is_postgres  # as sections.py: the store package only when asked

    needs: list[tuple[str, str]] = []
    storage, influx = sections.get("storage"), sections.get("influxdb")
    if isinstance(storage, StorageConfig) and storage.url and is_postgres(storage.url):
        needs += [("psycopg", "storage.url"), ("greenlet", "storage.url")]
    if isinstance(influx, InfluxConfig) and influx.url:
        needs.append(("influxdb_client", "influxdb.url"))
    needs += [("numpy", f"alerts[{i}].metric")
              for i, rule in enumerate(alerts) if rule.metric == "attainment_pct"]
    # dict: a field that needs two modules of one extra is one problem
    problems = (extras.missing(module, field) for module, field in needs)
    return list(dict.fromkeys(p for p in problems if p is not None))


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
    raw = [] if raw is None else raw
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
