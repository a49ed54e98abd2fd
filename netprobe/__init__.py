"""netprobe: route-quality monitor for LLM inference served across borders."""

__version__ = "0.2.0"
