"""A row's profile made when read (rows.Profile) is the tuple of HourProfiles it stands for: the same
hours, equality, hash and dicts."""

from __future__ import annotations

from netprobe.report.rows import HourProfile, Profile, ProfileColumns, profile_dicts
from netprobe.stats import loss_pct


def _columns() -> ProfileColumns:
    n = 2 * 24
    present = [0 if k % 5 == 0 else 3 for k in range(n)]
    return ProfileColumns(p5=[1.0 + k for k in range(n)], p50=[2.0 + k for k in range(n)],
                          p95=[None if k == 7 else 3.0 + k for k in range(n)],
                          sent=[0 if k == 9 else 100 + k for k in range(n)], received=[97] * n,
                          rounds=[5 + k for k in range(n)], present=present)


def test_profile_is_its_hours() -> None:
    cols = _columns()
    for i in range(2):
        want = tuple(HourProfile(h, None, None, None, None, 0) if not cols.present[i * 24 + h] else
                     HourProfile(h, cols.p5[i * 24 + h], cols.p50[i * 24 + h], cols.p95[i * 24 + h],
                                 loss_pct(cols.sent[i * 24 + h], 97) if cols.sent[i * 24 + h] else None,
                                 cols.rounds[i * 24 + h]) for h in range(24))
        got = Profile(cols, i)
        assert got == want and want == tuple(got) and len(got) == 24 and got[3] == want[3]
        assert list(got[2:4]) == list(want[2:4]) and hash(got) == hash(want)
        assert profile_dicts(got) == [p.to_dict() for p in want] == profile_dicts(want)
    assert Profile(cols, 0) != Profile(cols, 1) and Profile(cols, 0) == Profile(cols, 0)
