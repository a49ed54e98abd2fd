"""The one signature every probe implements, and what a probe run is given."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from netprobe.probes.results import ProbeResult

if TYPE_CHECKING:
    from netprobe.net.geoip import GeoIP
    from netprobe.net.lines import LineClassifier
    from netprobe.net.resolve import Resolver
    from netprobe.net.socket_cap import SocketCap
    from netprobe.probes.icmp.engine import IcmpEngine
    from netprobe.probes.mtr.engine import TraceEngine
    from netprobe.probes.settings import ProbeSettings


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    """What a probe aims at. `host` is a name or an address literal; `port` and `url` are where on it,
    for probes that aim at one. `options` holds every target option the config gave (TargetOption.key
    → value), so a probe reads its own keys without ProbeTarget knowing them."""

    id: str
    host: str
    port: int | None = None
    url: str | None = None
    datacenter: str = ""
    line: str = ""
    family: int = 0  # 0 = any, socket.AF_INET, socket.AF_INET6
    options: Mapping[str, object] = field(default_factory=dict, hash=False)

    def option(self, key: str) -> object:
        """A target option's value, None when the target has none."""
        return self.options.get(key)

    def as_envelope(self) -> dict[str, Any]:
        return {"id": self.id, "host": self.host, "datacenter": self.datacenter, "line": self.line}


@dataclass(frozen=True, slots=True)
class ReflectorAuth:
    """How this agent authenticates to its targets' reflectors ([reflector], docs/probes.md), and whether
    its clock and theirs are synchronised (owd's absolute one-way delays)."""

    token: str = field(repr=False)
    clock_sync: bool = False


@dataclass
class ProbeContext:
    """Shared, long-lived resources handed to every run (one ICMP engine, one resolver cache, GeoIP
    and the line rules for mtr)."""

    resolver: Resolver
    geoip: GeoIP | None = None
    classifier: LineClassifier | None = None
    icmp_max_rate: float | None = None  # the ICMP engine's per-family send cap; None: its default
    tcp_slots: SocketCap | None = None  # caps sockets open at once (CLI: the fd limit)
    reflector: ReflectorAuth | None = None      # [reflector] (rmtr, owd); None: not configured
    _icmp: IcmpEngine | None = field(default=None, repr=False)
    _trace: TraceEngine | None = field(default=None, repr=False)

    def trace_engine(self) -> TraceEngine:
        if self._trace is None:
            from netprobe.probes.mtr.engine import TraceEngine

            self._trace = TraceEngine()
        return self._trace

    def line_classifier(self) -> LineClassifier:
        if self.classifier is None:
            from netprobe.net.lines import LineClassifier

            self.classifier = LineClassifier.default()
        return self.classifier

    def icmp_engine(self) -> IcmpEngine:
        if self._icmp is None:
            from netprobe.probes.icmp.engine import IcmpEngine

            rate = self.icmp_max_rate
            self._icmp = IcmpEngine() if rate is None else IcmpEngine(max_rate=rate)
        return self._icmp

    def set_icmp_max_rate(self, rate: float) -> None:
        """A new cap (agent reload): applied to the running engine too, queued requests kept."""
        self.icmp_max_rate = rate
        if self._icmp is not None:
            self._icmp.set_max_rate(rate)

    async def close(self) -> None:
        if self._icmp is not None:
            self._icmp.close()
            self._icmp = None
        if self._trace is not None:
            self._trace.close()
            self._trace = None
        if self.geoip is not None:
            self.geoip.close()


S = TypeVar("S", bound="ProbeSettings", covariant=True)
R = TypeVar("R", bound=ProbeResult, covariant=True)
# covariant: a spec of IcmpSettings/IcmpResult is a ProbeSpec[ProbeSettings, ProbeResult] in the
# registry; ProbeSpec.round checks at run time that the settings are the spec's own model.
ProbeRun = Callable[[ProbeTarget, S, ProbeContext], Awaitable[R]]


@dataclass(frozen=True, slots=True)
class ProbeCli:
    """`netprobe probe <name>`: its command (a function with click's options; `netprobe probe` makes it
    the click command named by the probe) and the text after its options' help. Built by the spec's
    `cli` function, on demand (by `netprobe probe`), so the agent never loads the commands or tables."""

    command: Callable[..., None]
    epilog: str | None = None


@dataclass(frozen=True, slots=True)
class TargetOption:
    """A `[[targets]]` key a probe adds (tcp_port, sse_url, reflector): its type and pydantic Field
    (default, bounds, description), whether a target listing the probe must set it, and the
    ProbeTarget attribute it also fills, if any (every value is in ProbeTarget.options). Probes that
    share a key (rmtr and owd: reflector) share the one TargetOption. `check` validates a given value
    (raises ValueError naming the problem)."""

    key: str
    annotation: Any                   # a type as pydantic reads it (int, str | None, …)
    field: Any                        # pydantic FieldInfo
    fills: Literal["port", "url"] | None = None
    required: bool = False
    check: Callable[[Any], Any] | None = None


@dataclass(frozen=True, slots=True)
class RollupFigure:
    """A figure an hour (or any merge of hours) derives from the probe's rollup extras: the mean of
    `extra` over the rounds that had it, or with `per` the sum of `extra` over the sum of `per`
    divided by `per_scale` (stalls per minute: stalls over stream seconds / 60)."""

    name: str
    extra: str
    per: str | None = None
    per_scale: float = 1.0


# The probe-specific sums one round's result adds to its hour: (name, value) pairs. Given the round's
# typed result: the probe's own record, or a bare ProbeResult when the round could not run at all.
RollupExtras = Callable[[ProbeResult], list[tuple[str, float]]]


@dataclass(frozen=True, slots=True)
class RouteSeen:
    """The route of one usable round, as route events compare rounds (ProbeSpec.route_of): the line
    it looks like (None when the round named none), the path's hash, whether it is not the line the
    target was sold as (`declared`), the path's ASNs, and the addresses seen at each hop."""

    label: str | None
    hash: str
    mismatch: bool
    asns: list[int]
    declared: str | None
    hops: list[list[str]]


# Which way a traced path runs: agent → target (mtr) or target → agent (rmtr, the way back, docs/probes.md).
Direction = Literal["forward", "return"]
DIRECTIONS: tuple[Direction, ...] = ("forward", "return")

# A round's route for route events, given its typed result and the line its target was sold as (the
# envelope's target.line); None for a round that says nothing about the route (in error, not reached).
RouteOf = Callable[[ProbeResult, str | None], RouteSeen | None]


@dataclass(frozen=True, slots=True)
class ReportColumn:
    """A column of the report's table, Markdown and HTML: `figure` (one of the role's report fields)
    of the peak window, printed as ms, % or a rate. `when_measured`: shown only when some row has
    it; `terminal`: False keeps it out of the terminal table (HTML and Markdown show it)."""

    head: str
    figure: str
    unit: Literal["ms", "pct", "rate"] = "ms"
    when_measured: bool = False
    terminal: bool = True


@dataclass(frozen=True, slots=True)
class ReportRole:
    """What a probe gives the peak report. `rtt_rank`: it can be a row's RTT source (0 first; a
    higher rank only where no lower one measured the target). `figures`: (report field, rollup
    figure) pairs read from its merged window, e.g. ("tcp_connect_p95_ms", "rtt_p95_ms")."""

    rtt_rank: int | None = None
    figures: tuple[tuple[str, str], ...] = ()
    on_row: tuple[str, ...] = ()      # of `figures`, those a row repeats at its top level (peak's)
    columns: tuple[ReportColumn, ...] = ()


@dataclass(frozen=True, slots=True)
class PageFigure:
    """A row of a probe's table on the dashboard's target page: `label`, then `figure` (a rollup
    figure of the merged days) for all hours and the evening peak. ms with one decimal, pct and rate
    with two; "rounds": the rounds and, in brackets, those in error."""

    label: str
    figure: str
    unit: Literal["ms", "pct", "rate", "rounds"] = "ms"


@dataclass(frozen=True, slots=True)
class PageTable:
    """A probe's table on the dashboard's target page (its figures over the last N local days).
    `short` names the probe in the section's heading ("TCP and SSE, the last 7 local days"); `title`
    heads its table and says when it was not measured ("TCP connect: not measured in these days")."""

    short: str
    title: str
    rows: tuple[PageFigure, ...]


@dataclass(frozen=True, slots=True)
class AlertMetric:
    """An alert metric a probe provides. For one target the probe of lowest `rank` that has rounds in
    the window is judged. `events`: counted from route events, not read from rounds. `lines`: whether
    the latest forward and return route labels differ (1) or not (0), for pairs it traced in the window.
    `slo`: the share of requests within the rule's TTFT target (docs/numbers.md), from the window's RTT
    samples and loss."""

    name: str
    rank: int = 0
    events: bool = False
    lines: bool = False
    slo: bool = False


_LATER: Any = None     # settings_model and run, when the spec's `runtime` function gives them


@dataclass(frozen=True, slots=True)
class ProbeRuntime(Generic[S, R]):
    """A spec's runtime parts (RUNTIME_FIELDS, described on ProbeSpec), as its `runtime` function
    returns them: the pydantic settings, the engines, the packet code."""

    settings_model: type[S]
    run: ProbeRun[S, R]
    result_type: type[ProbeResult] = ProbeResult
    target_options: tuple[TargetOption, ...] = ()
    rollup_extras: RollupExtras | None = None
    route_of: RouteOf | None = None
    configure: Callable[[ProbeContext, ProbeSettings], None] | None = None
    startup: Callable[[ProbeContext, bool], dict[str, str]] | None = None


# A spec's runtime parts: what the agent, config, ingest and `netprobe probe` use, but not the reports.
RUNTIME_FIELDS = tuple(f.name for f in fields(ProbeRuntime))


@dataclass(frozen=True, slots=True)
class ProbeSpec(Generic[S, R]):
    """One registry entry: everything probe-specific, so config, scheduler, store, rollups, alerts,
    reports and the CLI work over the registry and never name a probe.

    The runtime parts (RUNTIME_FIELDS) are given here, or left to the function `runtime`, which
    imports the probe's runtime module and returns its ProbeRuntime the first time one of them is
    read: the reports read only the report metadata, and so never import pydantic, the engines or
    the packet code."""

    name: str
    settings_model: type[S] = _LATER
    run: ProbeRun[S, R] = _LATER
    result_type: type[ProbeResult] = ProbeResult
    # Returns this probe's ProbeCli, importing its command module: called only by `netprobe probe`,
    # so the agent never loads the commands or tables.
    cli: Callable[[], ProbeCli] | None = None
    target_options: tuple[TargetOption, ...] = ()
    rollup_extras: RollupExtras | None = None
    rollup_figures: tuple[RollupFigure, ...] = ()
    report: ReportRole = ReportRole()
    alert_metrics: tuple[AlertMetric, ...] = ()
    page: PageTable | None = None     # its table on the dashboard's target page; None: none
    # route events (netprobe.store.events): a round's route, for the probes whose rounds carry one
    # (mtr, rmtr), and the direction its path runs (None exactly when route_of is), stored with each
    # event and walked apart from the other direction's; the kind of event a route not of the
    # declared line is
    route_of: RouteOf | None = None
    route_direction: Direction | None = None
    mismatch_kind: str = "line_mismatch"
    # (key, why): settings that are the agent's, not a target's; config refuses them in [targets.<name>]
    agent_wide: tuple[tuple[str, str], ...] = ()
    # applies [probes.<name>] to the shared context (at start and on reload), e.g. the ICMP send cap
    configure: Callable[[ProbeContext, ProbeSettings], None] | None = None
    # the agent's start, told whether it runs rounds of this probe: opens what must fail fast (exit 2)
    # and returns fields for the "agent started" log line
    startup: Callable[[ProbeContext, bool], dict[str, str]] | None = None
    # Returns this probe's ProbeRuntime, importing its runtime module, when the spec leaves its
    # runtime parts to it.
    runtime: Callable[[], ProbeRuntime[Any, Any]] | None = None

    def __post_init__(self) -> None:
        defaults = {f.name: f.default for f in fields(self)}
        given = [n for n in RUNTIME_FIELDS if getattr(self, n) != defaults[n]]
        if self.runtime is None:
            if self.settings_model is _LATER or self.run is _LATER:
                raise TypeError(f"probe {self.name!r}: settings_model and run, or the runtime module")
            self._check_routes(self.route_of)
            return
        if given:
            raise TypeError(f"probe {self.name!r}: {', '.join(given)} given and left to its runtime")
        for name in RUNTIME_FIELDS:      # unset: the first read goes to __getattr__, which loads them
            object.__delattr__(self, name)

    if not TYPE_CHECKING:       # hidden from mypy: it would accept any attribute name on a spec
        def __getattr__(self, name: str) -> Any:
            if name not in RUNTIME_FIELDS:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            self._load_runtime()
            return object.__getattribute__(self, name)

    def _load_runtime(self) -> None:
        assert self.runtime is not None
        found = self.runtime()
        if not isinstance(found, ProbeRuntime):
            raise TypeError(f"probe {self.name!r}: its runtime is not a ProbeRuntime")
        self._check_routes(found.route_of)
        for name in RUNTIME_FIELDS:
            object.__setattr__(self, name, getattr(found, name))

    def _check_routes(self, route_of: RouteOf | None) -> None:
        if (route_of is None) != (self.route_direction is None):
            raise TypeError(f"probe {self.name!r}: route_of and route_direction go together")

    async def round(self, target: ProbeTarget, settings: ProbeSettings, ctx: ProbeContext) -> ProbeResult:
        """One round with settings validated elsewhere (config, the CLI) by this spec's model."""
        if not isinstance(settings, self.settings_model):
            raise TypeError(f"probe {self.name}: settings are {type(settings).__name__}, "
                            f"not {self.settings_model.__name__}")
        return await self.run(target, settings, ctx)
