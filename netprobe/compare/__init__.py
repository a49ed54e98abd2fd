"""`netprobe compare`: the same prompts against several OpenAI-compatible endpoints (docs/numbers.md)."""
