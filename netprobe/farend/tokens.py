"""The reflector's per-agent tokens (`netprobe target --tokens FILE`, docs/probes.md): a JSON file the
operator manages with `netprobe target add-agent / revoke-agent`. It never holds a token: only its
sha256 (for the bearer check of POST /api/v1/trace) and the owd key derived from it (the HMAC key of
owd packets, which the reflector must hold to check them). Written atomically, mode 0600."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netprobe.config.base import check_id_arg
from netprobe.config.secrets import hash_token, new_token
from netprobe.errors import UsageError
from netprobe.probes.owd import packets
from netprobe.times import iso, utc_now

VERSION = 1


@dataclass(frozen=True, slots=True)
class ReflectorKeys:
    """What a running reflector checks against: live agents only."""

    owd: dict[bytes, bytes]          # key id → owd key
    bearer: dict[str, str]           # token sha256 → agent id


def _read(path: Path, missing_ok: bool) -> dict[str, Any]:
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if missing_ok:
            return {"version": VERSION, "agents": {}}
        raise UsageError(f"--tokens: {path} does not exist; `netprobe target add-agent` creates it") from None
    except OSError as exc:
        raise UsageError(f"--tokens: cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise UsageError(f"--tokens: {path} is not JSON: {exc}") from None
    agents = data.get("agents") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(agents, dict):
        raise UsageError(f"--tokens: {path} is not a netprobe reflector tokens file (version {VERSION})")
    for agent_id, entry in data["agents"].items():
        ok = (isinstance(entry, dict) and isinstance(entry.get("token_sha256"), str)
              and isinstance(entry.get("owd_key"), str) and len(entry["owd_key"]) == 64)
        if not ok:
            raise UsageError(f"--tokens: {path}: agent {agent_id!r} has a malformed entry")
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), 0o600)
            json.dump(data, fh, indent=2, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def issue(path: Path, agent_id: str) -> tuple[str, bool]:
    """A new token for `agent_id` → (token, rotated): the old one, if any, stops working."""
    check_id_arg(agent_id, "AGENT_ID")
    data = _read(path, missing_ok=True)
    rotated = agent_id in data["agents"]
    token = new_token()
    data["agents"][agent_id] = {"token_sha256": hash_token(token), "owd_key": packets.derive_key(token).hex(),
                                "created_at": iso(utc_now()), "revoked_at": None}
    _write(path, data)
    return token, rotated


def revoke(path: Path, agent_id: str) -> bool:
    """Revoke `agent_id` → True if it was live until now."""
    data = _read(path, missing_ok=False)
    entry = data["agents"].get(agent_id)
    if entry is None:
        raise UsageError(f"agent {agent_id!r} has no reflector token in {path}")
    if entry.get("revoked_at"):
        return False
    entry["revoked_at"] = iso(utc_now())
    _write(path, data)
    return True


def load(path: Path) -> ReflectorKeys:
    data = _read(path, missing_ok=False)
    live = [e for e in data["agents"].values() if not e.get("revoked_at")]
    owd = {packets.key_id(k): k for k in (bytes.fromhex(e["owd_key"]) for e in live)}
    bearer = {e["token_sha256"]: a for a, e in data["agents"].items() if not e.get("revoked_at")}
    return ReflectorKeys(owd, bearer)


__all__ = ["ReflectorKeys", "issue", "load", "revoke"]
