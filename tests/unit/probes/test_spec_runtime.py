"""A spec may leave its runtime parts (settings, run, result type, target options, rollup extras,
route verdicts, agent hooks) to a module, loaded the first time one is read: the registry, and so
the reports, do not import pydantic or the probes' engines (ProbeSpec.runtime)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from netprobe.probes import REGISTRY
from netprobe.probes.base import RUNTIME_FIELDS, ProbeRuntime, ProbeSpec, ReportRole
from netprobe.probes.results import ProbeResult
from netprobe.probes.settings import ProbeSettings


def test_every_registered_runtime_loads_with_its_parts() -> None:
    for name, spec in REGISTRY.items():
        assert spec.runtime is not None, name
        assert issubclass(spec.settings_model, ProbeSettings) and issubclass(spec.result_type, ProbeResult)
        assert callable(spec.run)
        # a traced route and its direction go together
        assert (spec.route_of is None) == (spec.route_direction is None), name


def test_the_registry_loads_no_runtime() -> None:
    code = ("import json, sys; from netprobe.probes import REGISTRY;"
            "[s.report for s in REGISTRY.values()]; [s.rollup_figures for s in REGISTRY.values()];"
            "from netprobe.store.routes import route_probes; route_probes();"
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    modules = set(json.loads(out.stdout))
    runtimes = {spec.run.__module__ for spec in REGISTRY.values()}    # the runtime modules
    assert "pydantic" not in modules and not modules & runtimes


class _Settings(ProbeSettings):
    pass


async def _run(target: object, settings: _Settings, ctx: object) -> ProbeResult:
    raise AssertionError("not run")


RUNTIME = ProbeRuntime(settings_model=_Settings, run=_run)    # this module as a runtime module
NOT_A_RUNTIME = "a string"


def _runtime() -> ProbeRuntime[_Settings, ProbeResult]:
    return RUNTIME


def test_a_spec_is_given_its_parts_or_a_runtime_not_both() -> None:
    with pytest.raises(TypeError, match="settings_model and run"):
        ProbeSpec(name="nothing")
    with pytest.raises(TypeError, match="settings_model given and left to"):
        ProbeSpec(name="both", settings_model=_Settings, runtime=_runtime)
    with pytest.raises(TypeError, match="route_of and route_direction"):
        ProbeSpec(name="routes", settings_model=_Settings, run=_run, route_direction="forward")
    lazy: ProbeSpec[_Settings, ProbeResult] = ProbeSpec(name="lazy", runtime=_runtime,
                                                         report=ReportRole(rtt_rank=9))
    assert lazy.report.rtt_rank == 9 and lazy.settings_model is _Settings and lazy.run is _run
    assert {f: getattr(lazy, f) for f in RUNTIME_FIELDS} == {f: getattr(RUNTIME, f) for f in RUNTIME_FIELDS}
    with pytest.raises(AttributeError):
        lazy.nothing  # type: ignore[attr-defined]  # noqa: B018


def test_a_runtime_that_does_not_fit_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    no_route: ProbeSpec[_Settings, ProbeResult] = ProbeSpec(name="no-route", runtime=_runtime,
                                                             route_direction="return")
    with pytest.raises(TypeError, match="route_of and route_direction"):
        no_route.settings_model  # noqa: B018
    monkeypatch.setattr(sys.modules[__name__], "RUNTIME", NOT_A_RUNTIME)
    broken: ProbeSpec[_Settings, ProbeResult] = ProbeSpec(name="broken", runtime=_runtime)
    with pytest.raises(TypeError, match="is not a ProbeRuntime"):
        broken.settings_model  # noqa: B018
