"""docs/configuration.md is generated from the config models (scripts/config_reference.py): the committed
page must be exactly what the generator writes, and every key of every model a config file is validated
by must have its row under its table's heading."""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import get_args

from pydantic import BaseModel

from netprobe.config import alerts, collector, sections, targets
from netprobe.config.base import StrictModel
from netprobe.net import lines
from netprobe.probes import REGISTRY

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "configuration.md"


def _generator() -> ModuleType:
    """The generator is a script of the repository's, not a module of the package."""
    spec = importlib.util.spec_from_file_location("config_reference", ROOT / "scripts/config_reference.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)    # for its dataclasses
    spec.loader.exec_module(module)
    return module


_GEN = _generator()
COMMAND, markdown = _GEN.COMMAND, _GEN.markdown

# model → the TOML table it validates (written here, not taken from the generator)
TABLES: dict[type[BaseModel], str] = {
    sections.AgentConfig: "[agent]", sections.StorageConfig: "[storage]",
    sections.ResolverConfig: "[resolver]", sections.LogConfig: "[log]", sections.GeoIPConfig: "[geoip]",
    sections.MetricsConfig: "[metrics]", sections.InfluxConfig: "[influxdb]",
    sections.UplinkConfig: "[uplink]", sections.ReflectorConfig: "[reflector]",
    lines.ClassificationConfig: "[classification]", lines.PrefixEntry: "[[classification.prefixes]]",
    lines.LineRule: "[[classification.rules]]", targets.TargetConfig: "[[targets]]",
    alerts.AlertRule: "[[alerts]]", alerts.NotifierConfig: "[[notifiers]]",
    collector.CollectorSection: "[collector]", collector.CollectorStorageConfig: "[storage]",
    collector.DashboardSection: "[dashboard]",
    **{spec.settings_model: f"[probes.{name}]" for name, spec in REGISTRY.items()},
}
ROOTS = {collector.CollectorConfig}      # whole files, not tables (the agent's Config is in another module)


def _defined_models(module: ModuleType) -> set[type[BaseModel]]:
    return {cls for _, cls in inspect.getmembers(module, inspect.isclass)
            if issubclass(cls, StrictModel) and cls.__module__ == module.__name__}


def _blocks(page: str) -> dict[str, list[str]]:
    """Heading's table name (the code span in it) → the text under each heading of that name."""
    out: dict[str, list[str]] = {}
    parts = re.split(r"^#+ (.*)$", page, flags=re.M)
    for heading, body in zip(parts[1::2], parts[2::2], strict=True):
        m = re.search(r"`([^`]+)`", heading)
        if m:
            out.setdefault(m.group(1), []).append(body)
    return out


def _nested(model: type[BaseModel], table: str) -> dict[type[BaseModel], str]:
    """Models held by an array field of `model` (sse's messages, the classification tables) and the
    table each item is, `[[table.key]]`."""
    out: dict[type[BaseModel], str] = {}
    for key, field in model.model_fields.items():
        for tp in _types(field.annotation):
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                out[tp] = f"[[{table.strip('[]')}.{key}]]"
    return out


def _types(tp: object) -> list[object]:
    """`tp` and every type inside it (tuple items, Optional members, Annotated's type)."""
    return [tp, *(t for a in get_args(tp) for t in _types(a))]


def test_committed_page_is_what_the_generator_writes() -> None:
    assert DOC.read_text(encoding="utf-8") == markdown(), f"docs/configuration.md is stale: run {COMMAND}"


def test_every_config_model_has_a_table() -> None:
    defined = set().union(*(_defined_models(m) for m in (sections, collector, alerts, targets, lines)))
    missing = defined - set(TABLES) - ROOTS
    assert not missing, f"models without a table in this test (and maybe in the page): {missing}"


def test_every_key_of_every_table_has_its_row() -> None:
    page = markdown()
    blocks = _blocks(page)
    tables = dict(TABLES)
    for model, table in list(tables.items()):
        tables.update({m: t for m, t in _nested(model, table).items() if m not in tables})
    assert len(tables) > len(TABLES), "the nested tables (classification, sse messages) were not found"
    for model, table in tables.items():
        keys = (targets.target_model() if model is targets.TargetConfig else model).model_fields
        under = blocks.get(table)
        assert under, f"no heading for {table} ({model.__name__})"
        assert any(all(f"| `{key}` |" in body for key in keys) for body in under), \
            f"{table}: some of {sorted(keys)} have no row under its heading"


def test_probe_target_options_are_target_keys() -> None:
    body = "".join(_blocks(markdown())["[[targets]]"])
    for spec in REGISTRY.values():
        for option in spec.target_options:
            assert f"| `{option.key}` |" in body


def test_the_page_names_no_design_section() -> None:
    page = markdown()
    assert "DE" + "SIGN" not in page and "\u00a7" not in page
