"""Where rounds go after the probe: a bounded, batched pipeline and its sinks (agent and collector)."""
