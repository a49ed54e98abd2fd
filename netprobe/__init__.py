"""netprobe: route-quality monitor for LLM inference served across borders."""

__version__ = "0.1.0"
