"""Alerts (docs/alerts.md): rules over consecutive windows of stored rounds, raised and cleared with
hysteresis, state persisted in `alert_states`, notifications on raise and clear only.

config    the [[alerts]] / [[notifiers]] models, shared by the agent's and the collector's config
values    one window's value per agent × target for a metric, from raw rounds and route events
states    the state machine (pure) and its rows in `alert_states`
quorum    collector rules with `quorum = N`: groups of one region/isp × datacenter × line, local alerts
transitions  one window of a rule applied to its states: transitions, agreement, alert_events rows
engine    the scheduled evaluator: aligned windows, settle delay, resume after a restart
formats   the payload of each notifier kind (webhook, Alertmanager v2, Feishu, DingTalk, WeCom)
notify    delivery: a bounded queue per notifier, retries with backoff, counters
cli       `netprobe alerts test`
"""
