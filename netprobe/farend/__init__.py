"""`netprobe target`: a tiny SSE emitter run in each candidate datacenter.

It streams timestamped events (`GET /sse`) and imitates an OpenAI-compatible streaming endpoint
(`POST /v1/chat/completions`), so streaming quality over a route is measured without a GPU.
The API lives in `netprobe.farend.server` (make_app, serve) and `netprobe.farend.params` (Limits);
this package stays empty so `netprobe --help` does not import aiohttp.
"""
