"""The central collector (docs/deployment.md, docs/api.md): authenticated ingest of result envelopes
from many agents into one database (PostgreSQL in production), its own /metrics, optionally InfluxDB.

Modules: config (TOML), tokens (per-agent bearer tokens, hashed), body (size-capped, gzip-aware
reading), app (aiohttp handlers), metrics (Prometheus), server (run and graceful shutdown), cli."""
