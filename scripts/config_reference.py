"""The configuration reference (docs/configuration.md), generated from the config models themselves:
one section per TOML table, one row per key with its type, default, bounds and description, so the page
cannot drift from what `netprobe config check` accepts (tests/unit/config/test_reference_doc.py checks
the committed page against markdown()).

    python3 scripts/config_reference.py > docs/configuration.md
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args, get_origin

import annotated_types as at
from pydantic import AfterValidator, BaseModel, BeforeValidator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from netprobe.config import alerts as alert_models
from netprobe.config import base, durations
from netprobe.config import sections as section_models
from netprobe.config.alerts import AlertRule, NotifierConfig, metrics
from netprobe.config.collector import CollectorSection, CollectorStorageConfig, DashboardSection
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
from netprobe.config.targets import target_model
from netprobe.net.lines import DEFAULT_PREFIXES, DEFAULT_RULES, ClassificationConfig, LineRule, PrefixEntry
from netprobe.probes import REGISTRY

COMMAND = "python3 scripts/config_reference.py > docs/configuration.md"

File = Literal["agent", "collector"]


@dataclass(frozen=True, slots=True)
class Section:
    """One TOML table of a file: its header as written (`[agent]`, `[[targets]]`, `[probes.icmp]`), the
    model that validates it, the anchor it is linked by, and what is said above its keys."""

    file: File
    header: str
    model: type[BaseModel]
    anchor: str
    intro: str = ""
    after: str = ""          # below the keys (a built-in table, a note)
    keys: tuple[str, ...] = ()   # the order of the keys, when not the model's


def _doc(model: type[BaseModel]) -> str:
    """A model's docstring as prose: the leading "[table]: " dropped, lines joined, the first letter
    capitalised."""
    text = " ".join((model.__doc__ or "").split())
    text = re.sub(r"^(One )?\[\[?[\w.<>]+\]?\]( entry| table)?:\s*", "", text)
    return text[:1].upper() + text[1:]


def _probe_sections() -> list[Section]:
    out = []
    for name, spec in REGISTRY.items():
        wide = "".join(f" `{key}` is the agent's alone ({why}): it may not be set in `[targets.{name}]`."
                       for key, why in spec.agent_wide)
        out.append(Section("agent", f"[probes.{name}]", spec.settings_model, f"probes-{name}",
                           f"Defaults of the {name} probe for every target that lists it in `probes`; "
                           f"a target's own `[targets.{name}]` table overrides them key by key.{wide} "
                           f"See [Probes](probes.md#{name}) for what a round does."))
    return out


def _builtin_classification() -> str:
    lines = ["The built-in tables, as a file would write them (a list in the file replaces the built-in "
             "one as a whole, so copy all of it to change one entry):", "", "```toml"]
    for p in DEFAULT_PREFIXES:
        cidrs = ", ".join(f'"{c}"' for c in p.cidrs)
        lines += ["[[classification.prefixes]]", f"asn = {p.asn}", f'org = "{p.org}"', f"cidrs = [{cidrs}]",
                  ""]
    for r in DEFAULT_RULES:
        lines.append("[[classification.rules]]")
        lines.append(f'label = "{r.label}"')
        for key in ("all_of", "any_of", "none_of"):
            value = getattr(r, key)
            if value:
                lines.append(f"{key} = [{', '.join(str(a) for a in value)}]")
        lines.append("")
    lines[-1] = "```"
    return "\n".join(lines)


def sections() -> list[Section]:
    """Every table of both files, in the order the page lists them."""
    targets = target_model()
    users: dict[str, list[str]] = {}
    required: set[str] = set()
    for name, spec in REGISTRY.items():
        for o in spec.target_options:
            users.setdefault(o.key, []).append(name)
            if o.required:
                required.add(o.key)
    options = ", ".join(f"`{key}` ({', '.join(names)}{'; required with it' if key in required else ''})"
                        for key, names in users.items())
    return [
        Section("agent", "[agent]", AgentConfig, "agent", _doc(AgentConfig)),
        Section("agent", "[storage]", StorageConfig, "storage", _doc(StorageConfig)
                + " Without `url` the database is `netprobe.db` in `[agent] state_dir`, else in the default "
                  "state directory: `$STATE_DIRECTORY` under systemd, `/var/lib/netprobe` as root, "
                  "otherwise `~/.local/state/netprobe`."),
        Section("agent", "[resolver]", ResolverConfig, "resolver", _doc(ResolverConfig)),
        Section("agent", "[log]", LogConfig, "log", _doc(LogConfig)),
        Section("agent", "[geoip]", GeoIPConfig, "geoip", _doc(GeoIPConfig)),
        Section("agent", "[metrics]", MetricsConfig, "metrics", _doc(MetricsConfig)),
        Section("agent", "[influxdb]", InfluxConfig, "influxdb", _doc(InfluxConfig)
                + " Measurements are `netprobe_<probe>`, tagged `agent`, `region`, `isp`, `target`, "
                  "`datacenter`, `line`, with the result's numbers as fields."),
        Section("agent", "[uplink]", UplinkConfig, "uplink", _doc(UplinkConfig)
                + " Give one of `token`, `token_file`, `token_env`."),
        Section("agent", "[reflector]", ReflectorConfig, "reflector", _doc(ReflectorConfig)
                + " Give one of `token`, `token_file`, `token_env`; one is required once a target names a "
                  "`reflector`."),
        Section("agent", "[classification]", ClassificationConfig, "classification",
                _doc(ClassificationConfig) + " See [route labels](numbers.md#route-labels)."),
        Section("agent", "[[classification.prefixes]]", PrefixEntry, "classification-prefixes",
                _doc(PrefixEntry) + " Networks are real CIDRs; the longest prefix holding a hop's address "
                                    "wins; one network may not be given two ASNs.",
                _builtin_classification()),
        Section("agent", "[[classification.rules]]", LineRule, "classification-rules",
                _doc(LineRule) + " Rules are tried in order on the set of ASNs on the path; none "
                                 "matching gives `other`. A rule needs `all_of` or `any_of`. The built-in "
                                 "rules are listed under "
                                 "[[[classification.prefixes]]](#classification-prefixes)."),
        *_probe_sections(),
        Section("agent", "[[targets]]", targets, "targets",
                "One entry per target: a host in a candidate datacenter and the probes run against it, one "
                f"scheduled job per target × probe. Keys the probes add: {options}. Per-probe overrides "
                "are tables inside the entry: [`[targets.<probe>]`](#targets-probe).",
                keys=tuple(targets.key_order())),
        Section("agent", "[[alerts]]", AlertRule, "alerts",
                "One alert rule, evaluated over consecutive UTC-aligned windows; it raises after "
                "`for_windows` bad windows in a row and clears with hysteresis at `clear_threshold`. "
                "Metrics: " + ", ".join(f"`{m}`" for m in metrics())
                + ". `quorum`, `scope` and `notify_local` are the collector's only: in an agent's file they "
                  "are an error. See [Alerts](alerts.md)."),
        Section("agent", "[[notifiers]]", NotifierConfig, "notifiers",
                "Where alerts are sent, by name (an alert's `notify` lists them). Keys of one kind are "
                "refused on kinds that do not use them: `headers` is for webhook and alertmanager, the "
                "`secret` keys for dingtalk and feishu; `log` takes no `url`."),
        Section("collector", "[collector]", CollectorSection, "collector", _doc(CollectorSection)),
        Section("collector", "[storage]", CollectorStorageConfig, "collector-storage",
                _doc(CollectorStorageConfig)),
        Section("collector", "[dashboard]", DashboardSection, "dashboard",
                _doc(DashboardSection) + " See [Dashboard](dashboard.md)."),
    ]


# -- types -----------------------------------------------------------------------------------------------
def _validator_func(meta: object) -> object:
    return meta.func if isinstance(meta, AfterValidator | BeforeValidator) else None


def _func_of(alias: object) -> object:
    return next(f for m in get_args(alias)[1:] if (f := _validator_func(m)) is not None)


# the named value kinds the config modules define (an Annotated alias each), by their validator
_NAMED: dict[object, str] = {
    _func_of(durations.Duration): "duration",
    _func_of(base.Ident): "id",
    _func_of(base.HttpUrl): "http(s) URL",
    _func_of(base.HttpUrlOrOff): 'http(s) URL or ""',
    _func_of(alert_models.Metric): "alert metric",
    section_models._check_timezone: "IANA time zone",
}


def _named(metadata: Iterable[object], fallback: str) -> str:
    for meta in metadata:
        name = _NAMED.get(_validator_func(meta))
        if name is not None:
            return name
    return fallback


def _is_duration(metadata: Iterable[object]) -> bool:
    return any(_validator_func(m) is _func_of(durations.Duration) for m in metadata)


def _strip(tp: Any) -> tuple[Any, list[object]]:
    """An annotation without its Annotated layer, and that layer's metadata (a FieldInfo's included)."""
    if get_origin(tp) is Annotated:
        args = get_args(tp)
        meta: list[object] = []
        for m in args[1:]:
            meta += list(m.metadata) if isinstance(m, FieldInfo) else [m]
        inner, more = _strip(args[0])
        return inner, meta + more
    return tp, []


def _model_of(tp: Any) -> type[BaseModel] | None:
    """The model a field holds (one, or an array of them), else None."""
    tp, _ = _strip(tp)
    if get_origin(tp) is tuple:
        tp, _ = _strip(get_args(tp)[0])
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def type_name(tp: Any, metadata: Iterable[object] = ()) -> str:
    """A field's type as the TOML file writes it."""
    tp, inner_meta = _strip(tp)
    metadata = [*metadata, *inner_meta]
    origin = get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        members = [a for a in get_args(tp) if a is not type(None)]
        text = " or ".join(type_name(a, metadata) for a in members)
        return f"{text} (or unset)" if len(members) < len(get_args(tp)) else text
    if origin is Literal:
        values = [f"`{_toml(v)}`" for v in get_args(tp)]
        return "one of " + ", ".join(values)
    if origin is tuple:
        item = get_args(tp)[0]
        model = _model_of(item)
        if model is not None:
            return "array of tables"
        return f"array of {_plural(type_name(item))}"
    if origin in (dict, Mapping) or tp is dict:
        args = get_args(tp)
        value = type_name(args[1]) if args and args[1] is not Any else "values"
        return f"table of {_plural(value)}"
    named = _named(metadata, "")
    if named:
        return named
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "table"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(tp, str(tp))


def _plural(name: str) -> str:
    if name.startswith("one of "):
        return name.replace("one of ", "values among ", 1)
    return {"string": "strings", "integer": "integers", "number": "numbers", "boolean": "booleans",
            "id": "ids", "values": "values"}.get(name, name + "s")


# -- values ----------------------------------------------------------------------------------------------
_UNITS = (("d", 86400.0), ("h", 3600.0), ("m", 60.0), ("s", 1.0), ("ms", 0.001))


def duration_text(seconds: float) -> str:
    """Seconds as the config writes a duration: the largest unit that holds it whole ("5m", "500ms")."""
    if seconds == 0:
        return "0"
    for unit, size in _UNITS:
        n = seconds / size
        if abs(n - round(n)) < 1e-9 and round(n) >= 1:
            return f"{round(n)}{unit}"
    return f"{seconds:g}s"


def _toml(value: Any, duration: bool = False) -> str:
    if duration and isinstance(value, int | float) and not isinstance(value, bool):
        return f'"{duration_text(float(value))}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, BaseModel):
        inner = ", ".join(f"{k} = {_toml(v)}" for k, v in value.model_dump().items())
        return "{" + inner + "}"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml(v, duration) for v in value) + "]"
    return str(value)


def default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if value is PydanticUndefined or value is None:
        return "unset"
    if _model_of(field.annotation) is not None and isinstance(value, tuple) and value and \
            isinstance(value[0], PrefixEntry | LineRule):
        return "the built-in table"
    return f"`{_toml(value, _is_duration(field.metadata))}`"


def bounds_text(field: FieldInfo) -> str:
    """The field's numeric and length bounds, in the field's own unit."""
    duration = _is_duration(field.metadata)

    def show(v: Any) -> str:
        return duration_text(float(v)) if duration else f"{v:,}" if isinstance(v, int) else f"{v:g}"

    parts: list[str] = []
    for m in field.metadata:
        if isinstance(m, at.Ge):
            parts.append(f"≥ {show(m.ge)}")
        elif isinstance(m, at.Gt):
            parts.append(f"> {show(m.gt)}")
        elif isinstance(m, at.Le):
            parts.append(f"≤ {show(m.le)}")
        elif isinstance(m, at.Lt):
            parts.append(f"< {show(m.lt)}")
        elif isinstance(m, at.MinLen) and m.min_length:
            parts.append(f"at least {m.min_length} {'item' if _is_array(field) else 'character'}"
                         f"{'s' if m.min_length > 1 else ''}")
        elif isinstance(m, at.MaxLen):
            parts.append(f"at most {m.max_length} {'items' if _is_array(field) else 'characters'}")
    return ", ".join(parts)


def _is_array(field: FieldInfo) -> bool:
    return get_origin(_strip(field.annotation)[0]) is tuple


# -- markdown --------------------------------------------------------------------------------------------
def _cell(text: str) -> str:
    """Table-cell text: `<`, `>` and `&` escaped outside code spans, pipes escaped everywhere."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts).replace("|", "\\|")


def _child_header(section: Section, key: str) -> str:
    return f"[[{section.header.strip('[]')}.{key}]]"


def key_rows(section: Section) -> list[str]:
    model = section.model
    fields = model.model_fields
    keys = section.keys or tuple(fields)
    rows = ["| key | type | default | bounds | meaning |", "|---|---|---|---|---|"]
    for key in keys:
        field = fields[key]
        kind = type_name(field.annotation, field.metadata)
        child = _model_of(field.annotation)
        if child is not None and kind == "array of tables":
            kind = f"array of `{_child_header(section, key)}` tables"
        meaning = field.description or ""
        rows.append(f"| `{key}` | {_cell(kind)} | {_cell(default_text(field))} | {_cell(bounds_text(field))} "
                    f"| {_cell(meaning)} |")
    return rows


def _nested(section: Section) -> list[Section]:
    """Tables of an array field whose items are a model no section lists (sse's messages)."""
    listed = {s.model for s in sections()}
    out = []
    for key, field in section.model.model_fields.items():
        child = _model_of(field.annotation)
        if child is not None and child not in listed:
            header = _child_header(section, key)
            out.append(Section(section.file, header, child, header.strip("[]").replace(".", "-"),
                               f"Each item of `{key}`: an array of tables, or inline tables "
                               f"(`{key} = [{{role = \"user\", content = \"…\"}}]`)."))
    return out


def _render(section: Section, level: str = "###") -> list[str]:
    lines = [f"{level} `{section.header}` {{#{section.anchor}}}", ""]
    if section.intro:
        lines += [section.intro, ""]
    lines += [*key_rows(section), ""]
    if section.after:
        lines += [section.after, ""]
    for child in _nested(section):
        lines += _render(child, level + "#")
    return lines


INTRO = f"""<!-- Generated from the configuration models by scripts/config_reference.py; do not edit by hand.
     Regenerate with: {COMMAND}
     tests/unit/config/test_reference_doc.py fails when this page and the models disagree. -->

# Configuration

An agent reads one TOML file (`netprobe agent run --config FILE`), a collector another (`netprobe collector
run --config FILE`). `netprobe config check FILE` validates either kind and prints every problem, one per
line, each named by its path (`targets[2].icmp.count: …`), and exits 2; `agent run` and `collector run`
refuse a bad file the same way. Every key is below, with its type, default and bounds, generated from
the models that validate it.

The rules for values:

- Durations are written `"500ms"`, `"60s"`, `"5m"`, `"1h"`, `"14d"`, or a number of seconds.
- Types are strict: `count = "20"` or `enabled = 1` is an error, not a conversion.
- Unknown sections and keys, unknown probe names, duplicate target, alert and notifier ids, and unknown
  time zones are errors.
- A probe's round must fit in its `every`: for icmp, tcp and owd `(count − 1) × interval + timeout`, for
  mtr `cycles × interval + timeout`, for rmtr `cycles × interval + 2s + timeout`, for sse `timeout`; and
  `interval` must be shorter than `every`.
- Secrets (tokens, API keys, bot secrets) are read from a file (`…_file`) or an environment variable
  (`…_env`), or given inline; they are never logged.
- A target's settings for a probe merge key by key: `[targets.<probe>]` over `[probes.<probe>]` over the
  built-in defaults below.
"""


def markdown() -> str:
    """The whole reference page."""
    every = sections()
    agent = [s for s in every if s.file == "agent"]
    collector = [s for s in every if s.file == "collector"]
    probes = ", ".join(f"`[targets.{n}]`" for n in REGISTRY)
    lines = [INTRO, "## The agent's file", ""]
    for s in agent:
        lines += _render(s)
        if s.header == "[[targets]]":
            lines += ["### `[targets.<probe>]` {#targets-probe}", "",
                      f"Inside a `[[targets]]` entry ({probes}): that target's own values for the probe, "
                      "any key of the probe's `[probes.<probe>]` table except the agent's alone. Only for a "
                      "probe the target lists in `probes`.", ""]
    lines += ["## The collector's file", "",
              "The collector's file has no `[agent]` table and a `[collector]` one. It also takes "
              "[`[influxdb]`](#influxdb), [`[log]`](#log), [`[[alerts]]`](#alerts) (with `quorum`) and "
              "[`[[notifiers]]`](#notifiers), with the keys above.", ""]
    for s in collector:
        lines += _render(s)
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> None:
    import sys

    sys.stdout.write(markdown())


if __name__ == "__main__":
    main()
