"""Turn a unit from systemd/ into the one the Debian package ships.

    python3 packaging/unit.py systemd/netprobe-agent.service OUT.service

The repository's units run /usr/local/bin/netprobe (where `pip install .` puts it) as a dynamic user.
The package puts netprobe at /usr/bin/netprobe and makes a static netprobe system user, so those two
things change; every other line (StateDirectory=, the capabilities and all the hardening) is kept as
it is. A unit that no longer has the lines expected here stops the build rather than ship half-changed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PIP_PATH = "/usr/local/bin/netprobe"
PACKAGE_PATH = "/usr/bin/netprobe"


def packaged(name: str, text: str) -> str:
    lines = text.splitlines()
    out: list[str] = [f"# Packaged copy of systemd/{name} (the netprobe Debian package):",
                      f"# runs {PACKAGE_PATH} as the netprobe system user."]
    exec_start = users = 0
    for line in lines:
        if line.startswith("ExecStart="):
            if not line.startswith(f"ExecStart={PIP_PATH} "):
                raise SystemExit(f"{name}: ExecStart= does not run {PIP_PATH}: {line}")
            line = line.replace(PIP_PATH, PACKAGE_PATH, 1)
            exec_start += 1
        elif line == "DynamicUser=yes":
            out += ["User=netprobe", "Group=netprobe"]
            users += 1
            continue
        elif re.match(r"^(User|Group|DynamicUser)=", line):
            continue                  # the collector names its dynamic user netprobe: now the static one
        elif line.startswith("#"):
            line = (line.replace("a throwaway UID per run", "the netprobe system user")
                    .replace("A throwaway UID per run", "The netprobe system user")
                    .replace("the throwaway UID", "the netprobe user"))
        out.append(line)
    if exec_start != 1 or users != 1:
        raise SystemExit(f"{name}: expected one ExecStart= and one DynamicUser=yes, "
                         f"found {exec_start} and {users}")
    result = "\n".join(out) + "\n"
    if PIP_PATH in result or "throwaway" in result:
        raise SystemExit(f"{name}: {PIP_PATH} or a dynamic user is still mentioned")
    return result


def main() -> None:
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    dst.write_text(packaged(src.name, src.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main()
