"""Resolver: literals, names, caching/refresh, failures as data.

Only names the hosts file answers (localhost, IPv4) reach the real system resolver here: any other
name would send a DNS query off the machine. DNS failures of real names are exercised inside an
empty network namespace (lab test), where the query cannot leave; the other failure tests replace
socket.getaddrinfo (which asyncio's getaddrinfo calls in a thread) to control the answer.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from typing import Any

import pytest

from netprobe.net.resolve import Resolver


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fake_dns(monkeypatch: pytest.MonkeyPatch, answers: dict[str, str | Exception]) -> list[str]:
    """Route getaddrinfo for the given names to fixed answers; returns the log of lookups."""
    real = socket.getaddrinfo
    calls: list[str] = []

    def getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0,
                    flags: int = 0) -> Any:
        if host not in answers:
            return real(host, port, family, type, proto, flags)
        calls.append(host)
        answer = answers[host]
        if isinstance(answer, Exception):
            raise answer
        fam = socket.AF_INET6 if ":" in answer else socket.AF_INET
        sockaddr = (answer, 0, 0, 0) if fam == socket.AF_INET6 else (answer, 0)
        return [(fam, socket.SOCK_STREAM, 6, "", sockaddr)]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return calls


async def test_literals_bypass_dns() -> None:
    r = Resolver()
    v4 = await r.resolve("127.0.0.1")
    assert (v4.address, v4.family, v4.dns_ms, v4.error) == ("127.0.0.1", socket.AF_INET, None, None)
    v6 = await r.resolve("::1", socket.AF_INET6)
    assert (v6.address, v6.family, v6.dns_ms) == ("::1", socket.AF_INET6, None)
    bracketed = await r.resolve("[::1]")
    assert bracketed.address == "::1"


async def test_literal_of_the_wrong_family_is_a_family_error() -> None:
    r = Resolver()
    got = await r.resolve("198.18.0.1", socket.AF_INET6)
    assert got.address is None and got.error_kind == "family"
    assert got.error == "198.18.0.1 is IPv4 but the target asks for ipv6"
    got6 = await r.resolve("2001:2::1", socket.AF_INET)
    assert got6.error_kind == "family" and "IPv6" in (got6.error or "")


async def test_localhost_resolves_and_is_cached() -> None:
    r = Resolver()
    first = await r.resolve("localhost", socket.AF_INET)
    assert first.address == "127.0.0.1" and first.error is None and not first.cached
    assert first.dns_ms is not None and first.dns_ms >= 0
    second = await r.resolve("localhost", socket.AF_INET)
    assert second.address == "127.0.0.1" and second.cached and second.dns_ms is None
    any_family = await r.resolve("localhost")
    assert any_family.address == "127.0.0.1" and any_family.family == socket.AF_INET


async def test_refresh_picks_up_a_dns_change(monkeypatch: pytest.MonkeyPatch) -> None:
    answers: dict[str, str | Exception] = {"svc.example.test": "198.18.1.1"}
    calls = fake_dns(monkeypatch, answers)
    clock = FakeClock()
    r = Resolver(refresh=300.0, clock=clock)
    assert (await r.resolve("svc.example.test")).address == "198.18.1.1"
    answers["svc.example.test"] = "198.18.2.2"
    clock.now += 299.0
    cached = await r.resolve("svc.example.test")
    assert cached.address == "198.18.1.1" and cached.cached
    clock.now += 2.0
    fresh = await r.resolve("svc.example.test")
    assert fresh.address == "198.18.2.2" and not fresh.cached and fresh.dns_ms is not None
    assert calls == ["svc.example.test", "svc.example.test"]


async def test_failed_lookup_is_data_and_retried_after_negative_refresh(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_dns(monkeypatch, {"nonexistent.invalid": socket.gaierror(socket.EAI_NONAME,
                                                                          "Name or service not known")})
    clock = FakeClock()
    r = Resolver(refresh=300.0, negative_refresh=30.0, clock=clock)
    got = await r.resolve("nonexistent.invalid")
    assert got.address is None and got.error_kind == "dns"
    assert got.error == "cannot resolve nonexistent.invalid: Name or service not known"
    assert got.dns_ms is not None
    assert (await r.resolve("nonexistent.invalid")).cached
    clock.now += 31.0
    await r.resolve("nonexistent.invalid")
    assert len(calls) == 2


async def test_name_without_an_address_of_the_family(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dns(monkeypatch, {"v4only.example.test": "198.18.1.1"})
    got = await Resolver().resolve("v4only.example.test", socket.AF_INET6)
    assert got.error_kind == "dns" and got.error == "cannot resolve v4only.example.test: no IPv6 address"


async def test_concurrent_lookups_share_one_query(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_dns(monkeypatch, {"many.example.test": "198.18.3.3"})
    r = Resolver()
    got = await asyncio.gather(*(r.resolve("many.example.test") for _ in range(20)))
    assert {g.address for g in got} == {"198.18.3.3"}
    assert calls == ["many.example.test"]


async def test_a_cancelled_caller_does_not_cancel_the_shared_lookup() -> None:
    r = Resolver()
    first = asyncio.create_task(r.resolve("localhost", socket.AF_INET))
    second = asyncio.create_task(r.resolve("localhost", socket.AF_INET))
    await asyncio.sleep(0)
    first.cancel()
    assert (await second).address == "127.0.0.1"


@pytest.mark.lab
def test_real_unresolvable_name_in_an_isolated_namespace() -> None:
    """The system resolver really fails (no network in a fresh namespace): an error, not an exception."""
    code = ("import asyncio; from netprobe.net.resolve import Resolver; "
            "r = asyncio.run(Resolver().resolve('nonexistent.invalid')); print(r.error_kind, r.error)")
    out = subprocess.run(["unshare", "--net", sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("dns cannot resolve nonexistent.invalid: ")
