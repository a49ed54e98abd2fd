"""The target page: one agent × target over a span (DESIGN §11).

A stub with the page's signature: the smoke graph, path history and alert history are built apart and
replace this module."""

from __future__ import annotations

from netprobe.dashboard.layout import e, span_links
from netprobe.store import fleet
from netprobe.store.reads import Source


async def target_page(store: Source, agent_id: str, target_id: str, days: int,
                      base: str) -> tuple[str, str] | None:
    """(title, HTML body fragment), or None when the agent or the target is unknown."""
    agents, targets = await fleet.load_agents(store), await fleet.load_targets(store)
    agent, target = agents.get(agent_id), targets.get(target_id)
    if agent is None or target is None:
        return None
    title = f"{target_id} from {agent_id}"
    body = (f"<h1>{e(title)}</h1>{span_links(base, ('target', agent_id, target_id), days)}"
            f"<p>Agent {e(agent_id)} ({e(agent.region or '—')}, {e(agent.isp or '—')}) → target "
            f"{e(target_id)} ({e(target.host or '—')}, datacenter {e(target.datacenter or '—')}, "
            f"line {e(target.line or '—')}), last {days} day{'s' * (days != 1)}.</p>")
    return title, body
