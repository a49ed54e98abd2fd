"""The latency budget: `netprobe budget` (DESIGN §5)."""
