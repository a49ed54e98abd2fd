"""The target page: one agent × target over a span (DESIGN §11).

A stub with the page's signature and a plain hourly-median chart: the smoke graph, TCP/SSE figures,
path history and alert history are built apart and replace this module."""

from __future__ import annotations

from datetime import timedelta

from netprobe.dashboard.layout import e, loss_colour, span_links
from netprobe.store import Store, fleet
from netprobe.times import utc_now

W, H, PAD = 900, 240, 40


async def target_page(store: Store, agent_id: str, target_id: str, days: int,
                      base: str) -> tuple[str, str] | None:
    """(title, HTML body fragment), or None when the agent or the target is unknown."""
    agents, targets = await fleet.load_agents(store), await fleet.load_targets(store)
    agent, target = agents.get(agent_id), targets.get(target_id)
    if agent is None or target is None:
        return None
    now = utc_now()
    start = now - timedelta(days=days)
    rows = await store.hourly(agent_id, target_id, "icmp", start, now)
    hours = [h for h in rows if h.rtt_p50_ms is not None]
    title = f"{target_id} from {agent_id}"
    body = [f"<h1>{e(title)}</h1>{span_links(base, ('target', agent_id, target_id), days)}",
            f"<p>Agent {e(agent_id)} ({e(agent.region or '—')}, {e(agent.isp or '—')}) → target "
            f"{e(target_id)} ({e(target.host or '—')}, datacenter {e(target.datacenter or '—')}, "
            f"line {e(target.line or '—')}), last {days} day{'s' * (days != 1)}: hourly median RTT (icmp), "
            "each hour coloured by its loss.</p>"]
    if not hours:
        body.append("<p>No icmp rollups in this span.</p>")
        return title, "".join(body)
    top = max(h.rtt_p50_ms or 0.0 for h in hours) * 1.1 or 1.0
    span = (now - start).total_seconds()

    def x(h_start: float) -> float:
        return PAD + (W - 2 * PAD) * h_start / span

    marks = []
    for h in hours:
        left = x((h.hour - start).total_seconds())
        width = max(2.0, x((h.hour - start).total_seconds() + 3600) - left)
        y = H - PAD - (H - 2 * PAD) * (h.rtt_p50_ms or 0.0) / top
        marks.append(f'<rect x="{left:.1f}" y="{y - 1.5:.1f}" width="{width:.1f}" height="3" '
                     f'fill="{loss_colour(h.loss_pct)}"/>')
    body.append(f'<svg width="{W}" height="{H}" role="img" aria-label="hourly median RTT">'
                f'<rect x="{PAD}" y="{PAD}" width="{W - 2 * PAD}" height="{H - 2 * PAD}" fill="#f6f8fa" '
                f'stroke="#d0d7de"/>{"".join(marks)}'
                f'<text x="{PAD}" y="{PAD - 8}" font-size="12">{top:.0f} ms</text>'
                f'<text x="{PAD}" y="{H - PAD + 16}" font-size="12">{start:%Y-%m-%d %H:%M} UTC</text></svg>')
    return title, "".join(body)
