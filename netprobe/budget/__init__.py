"""The latency budget: `netprobe budget` (docs/reports.md)."""
