"""`netprobe diagnose URL`: network floor, one request, a concurrency sweep, then which segment of the
TTFT budget is over and what that points to. steps.py measures, verdict.py decides (pure),
render.py prints, cli.py wires the command."""
