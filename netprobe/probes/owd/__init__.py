"""One-way delay (docs/probes.md): the wire format both ends share, the agent side and its figures,
and the far end's UDP reflector."""
