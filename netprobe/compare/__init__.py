"""`netprobe compare`: the same prompts against several OpenAI-compatible endpoints (DESIGN §10)."""
