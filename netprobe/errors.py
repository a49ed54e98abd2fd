"""The one exception tree. Network failures are data (ProbeResult.status), never these."""

from __future__ import annotations


class NetprobeError(Exception):
    """Root of every error netprobe raises on purpose."""

    exit_code = 1


class UsageError(NetprobeError):
    """Bad command-line input (a host, a port, a file of targets)."""

    exit_code = 2


class ConfigError(NetprobeError):
    """Invalid configuration; `problems` holds one "field.path: message" per error."""

    exit_code = 2

    def __init__(self, problems: list[str], source: str = "") -> None:
        self.problems = problems
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(where + "; ".join(problems))


class SetupError(NetprobeError):
    """The host cannot do what was asked (no raw-socket permission, no TUN, not root)."""

    exit_code = 2


class StorageError(NetprobeError):
    """The database could not be opened, migrated or written."""


class RefusedValueError(StorageError):
    """The database refused a value (too long for its column, out of range, …): retrying the same
    write cannot succeed. `detail` is the database's first line about it."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail


class LabError(NetprobeError):
    """The lab could not be built or changed."""
