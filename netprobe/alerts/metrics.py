"""Alerting on /metrics (agent and collector): firing alerts, transitions, evaluation errors, and each
notifier's deliveries — so a notifier that silently fails is itself something to alert on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from netprobe.alerts.engine import Alerting


class AlertsCollector(Collector):
    """Read from the running Alerting when scraped."""

    def __init__(self, alerting: Alerting) -> None:
        self._alerting = alerting

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        engine = self._alerting.engine
        stats = engine.stats if engine is not None else None
        yield GaugeMetricFamily("netprobe_alerts_firing", "Alerts firing after the last evaluation",
                                value=stats.firing if stats else 0)
        transitions = CounterMetricFamily("netprobe_alert_transitions", "Alert state changes notified",
                                          labels=["state"])
        for state in ("firing", "resolved"):
            transitions.add_metric([state], stats.transitions.get(state, 0) if stats else 0)
        yield transitions
        yield CounterMetricFamily("netprobe_alert_evaluation_errors",
                                  "Rule evaluations that failed (the database was away; retried)",
                                  value=stats.errors if stats else 0)
        delivered = CounterMetricFamily("netprobe_alert_notifications",
                                        "Notifications by notifier and outcome (sent, failed after every "
                                        "attempt, dropped from a full queue)", labels=["notifier", "outcome"])
        retries = CounterMetricFamily("netprobe_alert_notification_retries",
                                      "Failed delivery attempts that were retried", labels=["notifier"])
        queued = GaugeMetricFamily("netprobe_alert_notification_queue_depth", "Notifications waiting",
                                   labels=["notifier"])
        for name, s in sorted(self._alerting.dispatcher.stats().items()):
            for outcome in ("sent", "failed", "dropped"):
                delivered.add_metric([name, outcome], s.get(outcome, 0))
            retries.add_metric([name], s.get("retries", 0))
            queued.add_metric([name], s.get("queued", 0))
        yield from (delivered, retries, queued)
