"""[[alerts]] and [[notifiers]]: models and list validation, one definition for agent and collector.

Everything here names its field path (`alerts[1].notify[0]: unknown notifier 'opz'`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from netprobe.config.base import Ident, StrictModel, as_tuple, check_unique, is_http_url
from netprobe.config.durations import Duration
from netprobe.config.loader import validate_model
from netprobe.config.secrets import read_secret

Op = Literal[">", ">=", "<", "<="]
Scope = Literal["region", "isp"]
Kind = Literal["webhook", "alertmanager", "feishu", "dingtalk", "wecom", "log"]
SIGNED = ("dingtalk", "feishu")              # kinds whose bots can require a signature
WITH_HEADERS = ("webhook", "alertmanager")   # kinds that take extra HTTP headers
_GLOB = re.compile(r"[*?\[]")


Name = Ident          # alert and notifier names follow the id rule


def metrics() -> list[str]:
    """The alert metrics the registered probes provide (their specs' alert_metrics), in registry order."""
    from netprobe.probes import REGISTRY

    return list(dict.fromkeys(m.name for spec in REGISTRY.values() for m in spec.alert_metrics))


def _known_metric(value: str) -> str:
    known = metrics()
    if value not in known:
        raise ValueError(f"Input should be {', '.join(repr(m) for m in known)}")
    return value


Metric = Annotated[str, AfterValidator(_known_metric)]


class AlertRule(StrictModel):
    """One [[alerts]] table."""

    name: Name = Field(description="unique among alerts; Alertmanager's alertname")
    metric: Metric = Field(description="what is compared each window")
    op: Op = Field(default=">", description="bad when `value op threshold`")
    threshold: float = Field(description="the raise threshold")
    clear_threshold: float | None = Field(
        default=None, description="a firing alert clears only at or beyond this (below for > and >=, "
                                  "above for < and <=); default: threshold")
    window: Duration = Field(default=300.0, ge=5, le=86400,
                             description="length of the consecutive, UTC-aligned windows evaluated")
    for_windows: int = Field(default=1, ge=1, le=1000, description="bad windows in a row that raise it")
    targets: Annotated[tuple[str, ...], BeforeValidator(as_tuple)] = Field(
        default=("*",), min_length=1, description="target ids or glob patterns ('*': all)")
    notify: Annotated[tuple[str, ...], BeforeValidator(as_tuple)] = Field(
        min_length=1, description="names of [[notifiers]]")
    severity: str = Field(default="warning", min_length=1, max_length=32,
                          description="severity label passed to notifiers")
    slo_ttft_ms: float = Field(default=1000.0, gt=0, le=600_000,
                               description="attainment_pct: the time-to-first-token target, ms (a new "
                                           "TLS 1.3 connection: 3 round trips)")
    quorum: int | None = Field(default=None, ge=1, le=1000,
                               description="collector only: raise only when at least this many agents of "
                                           "one scope are bad on the same datacenter and line in a window")
    scope: Scope = Field(default="region", description="quorum: agents agree within one region or one isp")
    notify_local: bool = Field(default=True, description="quorum: notify a condition seen by fewer agents "
                                                         "(local to them: last mile); recorded either way")

    @field_validator("window")
    @classmethod
    def _whole_seconds(cls, value: float) -> float:
        if value != int(value):
            raise ValueError("must be a whole number of seconds (windows align to UTC epoch multiples)")
        return value

    @field_validator("clear_threshold")
    @classmethod
    def _hysteresis_side(cls, value: float | None, info: ValidationInfo) -> float | None:
        op, threshold = info.data.get("op"), info.data.get("threshold")
        if value is None or op is None or threshold is None:
            return value
        if op in (">", ">=") and value > threshold:
            raise ValueError(f"{value:g} is above threshold {threshold:g}: with op {op!r} an alert clears "
                             "at or below clear_threshold, so it must not exceed threshold")
        if op in ("<", "<=") and value < threshold:
            raise ValueError(f"{value:g} is below threshold {threshold:g}: with op {op!r} an alert clears "
                             "at or above clear_threshold, so it must not be under threshold")
        return value

    @model_validator(mode="after")
    def _quorum_keys(self) -> AlertRule:
        if self.quorum is None:
            given = [k for k in ("scope", "notify_local") if k in self.model_fields_set]
            if given:
                raise ValueError(f"{given[0]} applies only with quorum = N")
        return self

    @property
    def worst_first(self) -> bool:
        """Whether a higher value is worse (op > or >=)."""
        return self.op in (">", ">=")

    @property
    def clear_at(self) -> float:
        return self.threshold if self.clear_threshold is None else self.clear_threshold

    def is_bad(self, value: float) -> bool:
        t = self.threshold
        return {">": value > t, ">=": value >= t, "<": value < t, "<=": value <= t}[self.op]

    def is_clear(self, value: float) -> bool:
        """At or beyond the clear threshold and not bad (bad wins when both hold, e.g. `>=` with equal
        thresholds)."""
        beyond = value <= self.clear_at if self.op in (">", ">=") else value >= self.clear_at
        return beyond and not self.is_bad(value)

    def matches(self, target_id: str) -> bool:
        return any(fnmatch.fnmatchcase(target_id, pattern) for pattern in self.targets)


class NotifierConfig(StrictModel):
    """One [[notifiers]] table. Kind-specific keys are refused on kinds that do not use them."""

    name: Name = Field(description="unique among notifiers; what [[alerts]] notify lists")
    kind: Kind = Field(description="payload format")
    url: str = Field(default="", validate_default=True,
                     description="where to POST (webhook URL, Alertmanager base URL, bot webhook)")
    timeout: Duration = Field(default=10.0, gt=0, le=120, description="one delivery attempt")
    retries: int = Field(default=3, ge=0, le=10, description="further attempts after a failed one")
    style: Literal["markdown", "text"] = Field(
        default="markdown", description="feishu, dingtalk, wecom: a markdown (feishu: card) or text message")
    headers: Mapping[str, str] = Field(default_factory=dict, repr=False,
                                       description="webhook, alertmanager: extra HTTP headers (never logged)")
    secret: str = Field(default="", repr=False, description="dingtalk, feishu: signing secret (prefer "
                                                            "secret_file)")
    secret_file: str = Field(default="", description="file holding the signing secret (never logged)")
    secret_env: str = Field(default="", description="or the environment variable holding it")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str, info: ValidationInfo) -> str:
        kind = info.data.get("kind")
        if kind is None and not value:
            return value            # the kind is invalid: reported there
        if kind == "log":
            if value:
                raise ValueError("kind 'log' writes a log line and takes no url")
            return value
        if not value:
            raise ValueError(f"required for kind {kind!r}")
        if not is_http_url(value):
            raise ValueError("is not an http:// or https:// URL")   # the value may hold a bot token
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: Mapping[str, str], info: ValidationInfo) -> Mapping[str, str]:
        kind = info.data.get("kind")
        if value and kind not in WITH_HEADERS:
            raise ValueError(f"only for kind {' or '.join(WITH_HEADERS)}, not {kind!r}")
        return dict(value)

    @field_validator("secret", "secret_file", "secret_env")
    @classmethod
    def _signing(cls, value: str, info: ValidationInfo) -> str:
        kind = info.data.get("kind")
        if value and kind not in SIGNED:
            raise ValueError(f"only for kind {' or '.join(SIGNED)}, not {kind!r}")
        given = [k for k in ("secret", "secret_file") if info.data.get(k)]
        if value and given:
            raise ValueError(f"give one of secret, secret_file, secret_env (also got {given[0]})")
        return value

    def read_secret(self) -> str:
        """The signing secret ("" when unsigned); SetupError naming the key when it cannot be read."""
        return read_secret(f"notifiers[{self.name}]", inline=self.secret, file=self.secret_file,
                           env=self.secret_env)


def check_alerting(data: Mapping[str, Any], problems: list[str], target_ids: Sequence[str] | None = None,
                   *, agent: bool = False) -> tuple[tuple[AlertRule, ...], tuple[NotifierConfig, ...]]:
    """Validate the `alerts` and `notifiers` arrays of a config file; problems are appended, named by
    path. `target_ids`: the agent's targets, so a literal id that names none is caught (None: any).
    `agent`: an agent's file, where quorum has no meaning (an agent sees only itself)."""

    tables: dict[str, list[dict[str, Any]]] = {}
    for key, example in (("alerts", "[[alerts]]"), ("notifiers", "[[notifiers]]")):
        raw = data.get(key, [])
        if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
            problems.append(f"{key}: must be an array of tables ({example})")
            raw = []
        tables[key] = raw

    notifiers: list[NotifierConfig] = []
    names: dict[str, int] = {}
    for i, table in enumerate(tables["notifiers"]):
        notifier = validate_model(NotifierConfig, table, f"notifiers[{i}]", problems)
        check_unique(names, table.get("name"), i, f"notifiers[{i}].name", "notifier", "notifiers", problems)
        if notifier is not None:
            notifiers.append(notifier)

    rules: list[AlertRule] = []
    rule_names: dict[str, int] = {}
    for i, table in enumerate(tables["alerts"]):
        where = f"alerts[{i}]"
        if agent and "quorum" in table:
            problems.append(f"{where}.quorum: collector only: an agent sees only itself; put quorum rules "
                            "in the collector's [[alerts]]")
            table = {k: v for k, v in table.items() if k not in ("quorum", "scope", "notify_local")}
        rule = validate_model(AlertRule, table, where, problems)
        check_unique(rule_names, table.get("name"), i, f"{where}.name", "alert", "alerts", problems)
        notify = table.get("notify")
        for j, wanted in enumerate(notify if isinstance(notify, list) else []):
            if isinstance(wanted, str) and wanted not in names:
                known = ", ".join(names) or "none defined; add a [[notifiers]] table"
                problems.append(f"{where}.notify[{j}]: unknown notifier {wanted!r}; notifiers: {known}")
        patterns = table.get("targets")
        if target_ids is not None and isinstance(patterns, list):
            for j, pattern in enumerate(patterns):
                if isinstance(pattern, str) and not _GLOB.search(pattern) and pattern not in target_ids:
                    problems.append(f"{where}.targets[{j}]: unknown target {pattern!r}; targets: "
                                    f"{', '.join(target_ids)} (or a glob pattern such as '*')")
        if rule is not None:
            rules.append(rule)
    return tuple(rules), tuple(notifiers)
