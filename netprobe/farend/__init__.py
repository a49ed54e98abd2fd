"""`netprobe target`: the datacenter-side far end of a route, run in each candidate datacenter.

It streams timestamped events (`GET /sse`) and imitates an OpenAI-compatible streaming endpoint
(`POST /v1/chat/completions`), so streaming quality over a route is measured without a GPU. With
`--tokens` it is also the reflector: the tracer of the way back (`POST /api/v1/trace`, rmtr rounds)
and, with `--udp`, the far end of owd rounds.
The API lives in `netprobe.farend.server` (make_app, serve) and `netprobe.farend.params` (Limits);
this package stays empty so `netprobe --help` does not import aiohttp.
"""
