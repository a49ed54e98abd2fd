"""Name → address for every probe: literals bypass DNS, names are cached and re-resolved periodically.

A lookup that fails is a `Resolved` with `error_kind` set, never an exception: an unresolvable host
is a probe error (data), and a DNS outage must not crash the agent.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

from netprobe.times import utc_now

_FAMILY_NAMES: dict[int, str] = {socket.AF_INET: "IPv4", socket.AF_INET6: "IPv6"}


def family_name(family: int) -> str:
    return _FAMILY_NAMES.get(family, "any family")


@dataclass(frozen=True, slots=True)
class Resolved:
    """The outcome of one resolve() call.

    `dns_ms` is the time of the lookup done for *this* call: None for an address literal or a
    cache hit (`cached=True`), so a round reports DNS time only when it actually paid for it.
    """

    host: str
    address: str | None
    family: int  # of `address` (AF_INET / AF_INET6); the requested family when the lookup failed
    dns_ms: float | None
    error_kind: str | None = None  # "dns" | "family"
    error: str | None = None
    resolved_at: datetime = field(default_factory=utc_now)
    cached: bool = False


def parse_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address if `host` is an IP literal ("[::1]" accepted), else None."""
    text = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _literal(host: str, addr: ipaddress.IPv4Address | ipaddress.IPv6Address, family: int) -> Resolved:
    got = socket.AF_INET if addr.version == 4 else socket.AF_INET6
    if family and family != got:
        return Resolved(host=host, address=None, family=family, dns_ms=None, error_kind="family",
                        error=f"{addr} is {family_name(got)} but the target asks for "
                              f"{family_name(family).lower()}")
    return Resolved(host=host, address=str(addr), family=got, dns_ms=None)


class Resolver:
    """Caching resolver shared by all probes of a process (one per ProbeContext).

    A name is looked up with the system resolver (getaddrinfo, so /etc/hosts and nsswitch apply)
    and the first address of the requested family is used, in getaddrinfo's order (RFC 6724 /
    gai.conf), as ping does. Successful answers are reused for `refresh` seconds, then looked up
    again so a DNS change is picked up; failures are remembered for `negative_refresh` seconds so
    a dead resolver does not stall every round. Concurrent lookups of one name share one query.
    """

    def __init__(self, refresh: float = 300.0, negative_refresh: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.refresh = refresh
        self.negative_refresh = min(negative_refresh, refresh)
        self._clock = clock
        self._cache: dict[tuple[str, int], tuple[Resolved, float]] = {}
        self._inflight: dict[tuple[str, int], asyncio.Task[Resolved]] = {}

    async def resolve(self, host: str, family: int = 0) -> Resolved:
        literal = parse_literal(host)
        if literal is not None:
            return _literal(host, literal, family)
        key = (host.lower(), family)
        hit = self._cache.get(key)
        if hit is not None and self._clock() < hit[1]:
            return replace(hit[0], host=host, dns_ms=None, cached=True)
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.create_task(self._lookup(host, family))
            self._inflight[key] = task
            task.add_done_callback(lambda _t: self._inflight.pop(key, None))
        # shield: one caller being cancelled must not cancel the lookup the others wait on
        result = await asyncio.shield(task)
        ttl = self.refresh if result.error is None else self.negative_refresh
        self._cache[key] = (result, self._clock() + ttl)
        return result

    async def _lookup(self, host: str, family: int) -> Resolved:
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter_ns()
        try:
            infos = await loop.getaddrinfo(host, None, family=family, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError, OSError) as exc:
            dns_ms = (time.perf_counter_ns() - t0) / 1e6
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            wanted = f" ({family_name(family)})" if family else ""
            return Resolved(host=host, address=None, family=family, dns_ms=dns_ms, error_kind="dns",
                            error=f"cannot resolve {host}{wanted}: {reason}")
        dns_ms = (time.perf_counter_ns() - t0) / 1e6
        for fam, _type, _proto, _canon, sockaddr in infos:
            if fam in _FAMILY_NAMES and (not family or fam == family):
                address = str(sockaddr[0])
                if fam == socket.AF_INET6 and len(sockaddr) == 4 and sockaddr[3]:  # link-local zone
                    address = f"{address}%{sockaddr[3]}"
                return Resolved(host=host, address=address, family=int(fam), dns_ms=dns_ms)
        return Resolved(host=host, address=None, family=family, dns_ms=dns_ms, error_kind="dns",
                        error=f"cannot resolve {host}: no {family_name(family)} address")
