"""`netprobe target`: the datacenter-side far end of a route, run in each candidate datacenter.

It streams timestamped events (`GET /sse`) and imitates an OpenAI-compatible streaming endpoint
(`POST /v1/chat/completions`), so streaming quality over a route is measured without a GPU. With
`--tokens` it is also the reflector: the tracer of the way back (`POST /api/v1/trace`, rmtr rounds)
and, with `--udp`, the far end of owd rounds.
Here is what every far end shares (the command, the server, the reflector's tokens); what a probe's
far end needs lives in its package (netprobe.probes.sse: the streams and their Limits; owd: the UDP
reflector; rmtr: the tracer). The API is `netprobe.farend.server` (make_app, serve); this package
stays empty so `netprobe --help` does not import aiohttp.
"""
