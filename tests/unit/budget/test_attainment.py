"""SLO attainment (docs/numbers.md), checked three ways: closed forms by hand, and the convolution against a
seeded Monte Carlo of the same model, written here independently of the code under test."""

from __future__ import annotations

import math

import numpy as np
import pytest

from netprobe.budget.attainment import (
    HANDSHAKE_RTO_MS,
    MIN_RTO_MS,
    Dist,
    SloModel,
    attainment_pct,
)
from netprobe.stats import LogNormal
from tests.support.budget import gpu_budget_at, outcome


def test_a_constant_rtt_without_loss_is_a_step_at_k_round_trips() -> None:
    rtt = Dist.of([30.0])
    for k in (1, 3, 4):
        m = SloModel(ttft_ms=30.0 * k + 0.5, round_trips=k)
        assert attainment_pct(rtt, 0.0, None, m) == pytest.approx(100.0)
        assert attainment_pct(rtt, 0.0, None, SloModel(ttft_ms=30.0 * k - 0.5, round_trips=k)) == \
            pytest.approx(0.0, abs=1e-9)
    # a constant server adds its time; two calls in series pay everything twice (to the grid's
    # resolution: each of the 8 parts is split between two cells of 980/2047 ms)
    m = SloModel(ttft_ms=2 * (90 + 400) + 5, round_trips=3, calls=2)
    assert attainment_pct(rtt, 0.0, LogNormal.through(400, 400), m) == pytest.approx(100.0)
    assert attainment_pct(rtt, 0.0, LogNormal.through(400, 400), SloModel(ttft_ms=2 * 490 - 5, calls=2)) == \
        pytest.approx(0.0, abs=1e-9)


def test_one_lossy_round_trip_shifts_by_the_rto_at_the_loss_probability() -> None:
    rtt, p = Dist.of([50.0]), 0.1
    rto = MIN_RTO_MS + 50.0          # a warm connection's trip: 200 ms + the smoothed RTT
    warm = SloModel(ttft_ms=0, round_trips=1, handshake=False)
    # 50 ms at 1 − p; 50 + RTO at p(1 − p); 50 + 3·RTO (doubled) at p²(1 − p); …
    for t, want in ((49, 0.0), (51, 90.0), (50 + rto + 1, 99.0), (50 + 3 * rto + 1, 99.9)):
        assert attainment_pct(rtt, p, None, SloModel(ttft_ms=t, round_trips=1, handshake=False)) == \
            pytest.approx(want, abs=1e-6), t
    # the first trip of a new connection is a SYN: a loss waits the initial RTO of 1 s
    for t, want in ((51, 90.0), (50 + HANDSHAKE_RTO_MS - 1, 90.0), (50 + HANDSHAKE_RTO_MS + 1, 99.0)):
        assert attainment_pct(rtt, p, None, SloModel(ttft_ms=t, round_trips=1)) == \
            pytest.approx(want, abs=1e-6), t
    assert warm.handshake is False


def _monte_carlo(rtt: Dist, p: float, server: LogNormal | None, m: SloModel, draws: int, seed: int) -> float:
    """The model by simulation: each trip an RTT draw plus a doubling RTO per loss, then the server."""
    rng = np.random.default_rng(seed)
    total = np.zeros(draws)
    mean = float(rtt.values @ rtt.weights)
    for _ in range(m.calls):
        for trip in range(m.round_trips):
            total += rng.choice(rtt.values, size=draws, p=rtt.weights)
            rto = HANDSHAKE_RTO_MS if (m.handshake and trip == 0) else MIN_RTO_MS + mean
            losses = rng.geometric(1 - p, size=draws) - 1 if p > 0 else np.zeros(draws)
            total += rto * (2.0 ** losses - 1)
        if server is not None:
            total += rng.lognormal(server.mu, server.sigma, size=draws)
    return 100.0 * float((total <= m.ttft_ms).mean())


def _sketch_like(seed: int, centre: float, spread: float) -> Dist:
    """An RTT distribution as a merged sketch holds it: DDSketch-style values (2 % apart) with counts."""
    rng = np.random.default_rng(seed)
    samples = centre + rng.gamma(2.0, spread, size=50_000)
    gamma = 1.02
    keys = np.ceil(np.log(samples) / math.log(gamma))
    values, counts = np.unique(2 * gamma ** keys / (gamma + 1), return_counts=True)
    return Dist.of(values, counts)


@pytest.mark.parametrize(("centre", "spread", "loss", "server", "model"), [
    (30.0, 2.0, 0.0, (300, 600), SloModel(ttft_ms=450, round_trips=3)),
    (30.0, 2.0, 0.02, (300, 600), SloModel(ttft_ms=500, round_trips=3)),
    (60.0, 8.0, 0.05, (250, 700), SloModel(ttft_ms=1000, round_trips=4)),
    (160.0, 20.0, 0.03, (200, 400), SloModel(ttft_ms=1300, round_trips=1, handshake=False, calls=3)),
    (45.0, 3.0, 0.10, None, SloModel(ttft_ms=1200, round_trips=3)),
])
def test_convolution_agrees_with_a_seeded_monte_carlo(centre: float, spread: float, loss: float,
                                                      server: tuple[float, float] | None,
                                                      model: SloModel) -> None:
    rtt = _sketch_like(1, centre, spread)
    srv = LogNormal.through(*server) if server else None
    got = attainment_pct(rtt, loss, srv, model)
    mc = _monte_carlo(rtt, loss, srv, model, draws=400_000, seed=2)
    assert 2.0 < mc < 99.95 or server is None        # the target sits where the curve is steep
    assert got == pytest.approx(mc, abs=0.3)


def test_e2e_quantiles_and_the_gpu_budget() -> None:
    rtt = Dist.of([30.0])
    m = SloModel(ttft_ms=1000, round_trips=3)
    # no server given: a fixed time per call, what the network's X-quantile leaves
    assert gpu_budget_at(rtt, 0.0, None, m) == pytest.approx(910.0, abs=0.5)
    assert gpu_budget_at(rtt, 0.0, None, SloModel(ttft_ms=1000, calls=2)) == pytest.approx(410.0, abs=0.5)
    assert gpu_budget_at(Dist.of([400.0]), 0.0, None, m) is None        # the network alone is over
    # a log-normal server: its shape scaled until X % just holds
    server = LogNormal.through(300, 600)
    got = outcome(rtt, 0.0, server, m)
    assert got.e2e_ttft_ms["p50"] == pytest.approx(390.0, rel=0.01)
    assert got.e2e_ttft_ms["p95"] == pytest.approx(690.0, rel=0.01)
    z = math.log(910 / 300) / server.sigma                              # P(server ≤ 910 ms)
    assert got.attainment_pct == pytest.approx(50 * math.erfc(-z / math.sqrt(2)), abs=0.05)
    budget = got.gpu_budget_at_pct_ms
    assert budget is not None and budget == pytest.approx(910.0, rel=0.01)   # its P95 may reach 910 ms
    ratio = budget / server.quantile(0.95)
    scaled = LogNormal(server.mu + math.log(ratio), server.sigma)
    assert attainment_pct(rtt, 0.0, scaled, m) == pytest.approx(95.0, abs=0.1)


def test_unlikely_loss_patterns_are_dropped_within_their_bound() -> None:
    """PRUNE drops loss patterns less likely than 1e-12 (DRAWN_PRUNE 1e-6 for charts), as MAX_LOSSES
    drops the rest: the attainment moves by no more than the dropped mass. Without a server, a case's
    figure does not depend on the other cases of its batch (batches are formed by loss); cases that
    share a server share a grid step, so theirs moves within the grid's resolution."""
    from netprobe.budget.attainment import (
        DRAWN_CELLS,
        DRAWN_PRUNE,
        GRID_CELLS,
        PRUNE,
        Rtts,
        attainments,
        curves,
    )

    rng = np.random.default_rng(7)
    dists = [Dist.of(rng.lognormal(math.log(c), 0.15, 400)) for c in (60, 150, 240, 300)]
    losses = [0.0, 0.001, 0.01, 0.03, 0.05, 0.2]
    cases = [(d, p) for d in dists for p in losses]
    rtts = Rtts.of([d for d, _ in cases])
    loss = np.array([p for _, p in cases])
    m, server = SloModel(ttft_ms=1000.0), LogNormal.through(150, 400)
    for servers in ([None] * len(cases), [server] * len(cases)):
        # the grids' resolution against a Monte Carlo: 0.3 points at GRID_CELLS, ~1 at DRAWN_CELLS
        for cells, prune, bound, grid in ((GRID_CELLS, PRUNE, 1e-8, 0.3),
                                          (DRAWN_CELLS, DRAWN_PRUNE, 1e-3, 1.0)):
            exact = attainments(rtts, loss, servers, m, cells, prune=0.0)
            got = attainments(rtts, loss, servers, m, cells, prune)
            assert np.abs(got - exact).max() < bound, (cells, prune)
            alone = [float(attainments(Rtts.of([d]), [p], servers[:1], m, cells, prune)[0]) for d, p in cases]
            assert np.abs(got - np.array(alone)).max() < (1e-9 if servers[0] is None else grid)
    # the drawn curves are returned in the cases' order, whatever order the batches took
    drawn = curves(rtts, loss, [None] * len(cases), m)
    for k in (0, 7, len(cases) - 1):
        xs, fs = curves(Rtts.of([cases[k][0]]), [cases[k][1]], [None], m)[0]
        assert np.allclose(drawn[k][0], xs) and np.allclose(drawn[k][1], fs, atol=1e-9)
