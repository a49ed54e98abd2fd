"""Alerting on /metrics (agent and collector): firing alerts, transitions, evaluation errors, and each
notifier's deliveries — so a notifier that silently fails is itself something to alert on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from netprobe.sinks.metrics import Family

if TYPE_CHECKING:
    from netprobe.alerts.engine import Alerting


def alert_families(alerting: Alerting) -> list[Family]:
    """Read from the running Alerting when scraped."""
    engine = alerting.engine
    stats = engine.stats if engine is not None else None
    notifiers = sorted(alerting.dispatcher.stats().items())
    return [
        ("netprobe_alerts_firing", "Alerts firing after the last evaluation", "gauge", (),
         [((), stats.firing if stats else 0)]),
        ("netprobe_alert_transitions", "Alert state changes notified", "counter", ("state",),
         [((state,), stats.transitions.get(state, 0) if stats else 0) for state in ("firing", "resolved")]),
        ("netprobe_alert_evaluation_errors", "Rule evaluations that failed (the database was away; retried)",
         "counter", (), [((), stats.errors if stats else 0)]),
        ("netprobe_alert_notifications", "Notifications by notifier and outcome (sent, failed after every "
         "attempt, dropped from a full queue)", "counter", ("notifier", "outcome"),
         [((name, outcome), s.get(outcome, 0)) for name, s in notifiers
          for outcome in ("sent", "failed", "dropped")]),
        ("netprobe_alert_notification_retries", "Failed delivery attempts that were retried", "counter",
         ("notifier",), [((name,), s.get("retries", 0)) for name, s in notifiers]),
        ("netprobe_alert_notification_queue_depth", "Notifications waiting", "gauge", ("notifier",),
         [((name,), s.get("queued", 0)) for name, s in notifiers]),
    ]
