"""What the probes print is what was measured: an IPv6 address such as 2001:2:0:a::1 must not become
an emoji code such as `:a:`."""

from __future__ import annotations

import pytest

from netprobe.textout import Out


def test_addresses_are_not_read_as_emoji_codes(capsys: pytest.CaptureFixture[str]) -> None:
    Out().print("hop 2001:2:0:a::1 and 2001:db8:b::1")
    assert "2001:2:0:a::1 and 2001:db8:b::1" in capsys.readouterr().out
