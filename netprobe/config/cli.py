"""`netprobe config check FILE`: validate a configuration, print a summary or every problem."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from netprobe.config.loader import is_collector_file
from netprobe.errors import ConfigError
from netprobe.textout import Out, TextTable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from netprobe.config.agent import Config
    from netprobe.config.alerts import NotifierConfig

app = click.Group("config", help="Validate configuration files.")


@app.command("check")
@click.argument("file", type=click.Path(path_type=Path))
def check(file: Path) -> None:
    """Validate FILE (an agent's, or a collector's: one with a collector section): print OK and a summary,
    or every problem (one per line) and exit 2.

    FILE: agent or collector configuration (TOML)."""
    from netprobe.config.agent import load_config  # lazily: pydantic model building is slow to import

    out = Out()
    try:
        if is_collector_file(file):
            _check_collector(file, out)
            return
        config = load_config(file)
        _check_files(config, str(file))
    except ConfigError as exc:
        err = Out(err=True)
        n = len(exc.problems)
        err.print(f"{exc.source}: {n} problem{'s' if n != 1 else ''}")
        for problem in exc.problems:
            err.print(problem)
        raise click.exceptions.Exit(exc.exit_code) from None
    out.table(_summary(config))
    enabled = sum(1 for t in config.targets if t.enabled)
    jobs = sum(1 for _ in config.jobs())
    disabled = len(config.targets) - enabled
    note = f" ({disabled} disabled)" if disabled else ""
    out.print(f"OK: {len(config.targets)} targets{note}, {jobs} jobs")


def _check_collector(file: Path, out: Out) -> None:
    from netprobe.config.collector import load_collector_config
    from netprobe.store.urls import display_url

    cfg = load_collector_config(file)
    problems = _unreadable([("influxdb.token_file", cfg.influxdb.token_file), *_secret_files(cfg.notifiers)])
    if problems:
        raise ConfigError(problems, source=str(file))
    influx = cfg.influxdb.url or "off"
    out.print(f"OK: collector on {cfg.collector.listen}, database {display_url(cfg.storage.url)}, "
              f"influxdb {influx}")


def _secret_files(notifiers: Sequence[NotifierConfig]) -> list[tuple[str, str]]:
    return [(f"notifiers[{i}].secret_file", n.secret_file) for i, n in enumerate(notifiers)]


def _unreadable(files: list[tuple[str, str]]) -> list[str]:
    """Secret files the service reads at start: missing or unreadable ones are named now."""
    problems = []
    for key, path in files:
        if path:
            try:
                Path(path).read_bytes()
            except OSError as exc:
                problems.append(f"{key}: {path}: {exc.strerror or exc}")
    return problems


def _check_files(config: Config, source: str) -> None:
    """Files the agent would only warn about at run time are problems here, where someone is looking."""
    from netprobe.net.geoip import mmdb_problem

    problems = []
    for key, path in (("asn_db", config.geoip.asn_path), ("city_db", config.geoip.city_path)):
        problem = mmdb_problem(path, "asn" if key == "asn_db" else "city") if path is not None else None
        if problem is not None:
            problems.append(f"geoip.{key}: {path}: {problem}")
    problems += _unreadable([("uplink.token_file", config.uplink.token_file),
                             ("influxdb.token_file", config.influxdb.token_file),
                             *_secret_files(config.notifiers)])
    if problems:
        raise ConfigError(problems, source=source)


def _summary(config: Config) -> TextTable:
    a = config.agent
    table = TextTable(title=f"agent {a.id} · {a.region} · {a.isp} · {a.timezone}")
    for column in ("target", "host", "datacenter", "line", "family", "probes"):
        table.add_column(column)
    for target in config.targets:
        probes = ", ".join(
            f"{name} every {_seconds(config.probe_settings(target, name).every)}"
            for name in target.probes)
        if not target.enabled:
            probes = f"(disabled) {probes}"
        table.add_row(target.id, target.host, target.datacenter, target.line, target.family, probes)
    return table


def _seconds(value: float) -> str:
    return f"{value * 1000:g}ms" if value < 1 else f"{value:g}s"
