"""The Grafana dashboards of agents/grafana/: valid dashboard JSON, and every panel's query, with its
template variables given concrete values and the match-all regex, returns series from real servers
holding netprobe's data — Prometheus scraping a real agent and collector for the exporter's dashboard,
VictoriaMetrics fed by the agent's InfluxDB sink for the measurements' one. Each variable's
label_values() query finds the stack's agent and target too."""

from __future__ import annotations

import itertools
import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.servers import get_json, prom_query
from tests.support.stack import AGENT, TARGET, Stack

GRAFANA = Path(__file__).resolve().parents[2] / "agents" / "grafana"
# Grafana's own interval variables, as it would fill them for a short time range
BUILTIN = {"__rate_interval": "10s", "__interval": "5s", "__range": "1m"}
LABEL_VALUES = re.compile(r"^label_values\((?:(?P<match>.+),\s*)?(?P<label>\w+)\)$")


def _load(name: str) -> dict[str, Any]:
    board: dict[str, Any] = json.loads((GRAFANA / name).read_text())
    return board


def _panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in board["panels"]:
        if panel["type"] == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def _fill(expr: str, values: dict[str, str]) -> str:
    """`$var` and `${var}` replaced as Grafana would; nothing left unreplaced."""
    every = {**BUILTIN, **values}
    out = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: every[m.group(1) or m.group(2)], expr)
    assert "$" not in out, out
    return out


def _variables(board: dict[str, Any], datasource: str) -> dict[str, dict[str, Any]]:
    """The templating list checked: the datasource variable, query variables on it."""
    found = {v["name"]: v for v in board["templating"]["list"]}
    assert found[datasource]["type"] == "datasource" and found[datasource]["query"] == "prometheus"
    for v in found.values():
        if v["type"] == "query":
            assert v["datasource"] == {"type": "prometheus", "uid": f"${{{datasource}}}"}, v["name"]
            assert v["includeAll"] and v["allValue"] == ".*"
    return found


def _check_board(board: dict[str, Any], datasource: str) -> list[dict[str, Any]]:
    assert isinstance(board["schemaVersion"], int) and board["schemaVersion"] >= 36
    assert board["uid"] and board["title"] and board["time"]
    assert [i["name"] for i in board["__inputs"]] == [datasource]
    panels = list(_panels(board))
    ids = [p["id"] for p in panels] + [p["id"] for p in board["panels"] if p["type"] == "row"]
    assert len(ids) == len(set(ids))
    for p in panels:
        assert p["datasource"] == {"type": "prometheus", "uid": f"${{{datasource}}}"}, p["title"]
        assert p["targets"] and all(t["expr"] for t in p["targets"]), p["title"]
        assert set(p["gridPos"]) == {"h", "w", "x", "y"} and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
    return panels


def _run_every_query(url: str, panels: list[dict[str, Any]], bindings: list[dict[str, str]]) -> int:
    ran = 0
    for values, panel in itertools.product(bindings, panels):
        for target in panel["targets"]:
            expr = _fill(target["expr"], values)
            assert prom_query(url, expr), f"{panel['title']!r}: no series for {expr}"
            ran += 1
    return ran


def _variable_queries(url: str, variables: dict[str, dict[str, Any]], values: dict[str, str],
                      expect: dict[str, str]) -> None:
    for name, v in variables.items():
        if v["type"] != "query":
            continue
        m = LABEL_VALUES.match(v["query"]["query"])
        assert m is not None, v["query"]
        params = {"match[]": _fill(m["match"], values)} if m["match"] else {}
        found = get_json(url, f"/api/v1/label/{m['label']}/values", **params)["data"]
        assert expect[name] in found, (name, found)


def _board(name: str, datasource: str) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The dashboard's variables and panels, checked; it has agent and target variables and panels
    for RTT, loss, path changes and alerts."""
    board = _load(name)
    variables = _variables(board, datasource)
    assert {"agent", "target"} <= set(variables)
    panels = _check_board(board, datasource)
    titles = " ".join(p["title"] for p in panels).lower()
    assert all(word in titles for word in ("rtt", "loss", "path changes", "alert"))
    return variables, panels


def test_exporter_dashboard_panels_return_series_from_prometheus(running: Stack) -> None:
    variables, panels = _board("netprobe-prometheus.json", "DS_PROMETHEUS")
    concrete = {"agent": AGENT["id"], "target": TARGET["id"], "probe": "icmp"}
    any_ = {"agent": ".*", "target": ".*", "probe": ".*"}
    _variable_queries(running.prometheus, variables, concrete, concrete)
    assert _run_every_query(running.prometheus, panels, [any_, concrete, {**concrete, "probe": "mtr"}]) \
        >= 3 * len(panels)


def test_influx_dashboard_panels_return_series_from_victoriametrics(running: Stack) -> None:
    variables, panels = _board("netprobe-influxdb.json", "DS_VICTORIAMETRICS")
    urllib.request.urlopen(f"{running.victoria}/internal/force_flush", timeout=5).read()
    threshold = variables["loss_threshold"]["query"]
    probes = [o["value"] for o in variables["probe"]["options"]]
    assert probes == ["icmp", "mtr"]
    concrete = {"agent": AGENT["id"], "region": AGENT["region"], "target": TARGET["id"],
                "loss_threshold": threshold}
    any_ = {"agent": ".*", "region": ".*", "target": ".*", "loss_threshold": threshold}
    _variable_queries(running.victoria, variables, concrete, concrete)
    bindings = [{**b, "probe": p} for b in (any_, concrete) for p in probes]
    assert _run_every_query(running.victoria, panels, bindings) >= 4 * len(panels)
