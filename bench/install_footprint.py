"""Install footprint (issue 32): what `pip install netprobe` and its extras put on a machine.

    python3 bench/install_footprint.py [--no-influx] [--rss-after 15] [--keep DIR]

Builds the project's wheel once (`pip wheel --no-deps`), then for each install — `netprobe` (the
agent: the base dependencies), `netprobe[server]` (adds psycopg, NumPy, influxdb-client) and
`netprobe[influx]` — makes a fresh venv with Debian's /usr/bin/python3 in a temporary directory and
pip installs the wheel into it from the package index, as a user would (pip compiles .pyc files by
default, so they count). For each it measures the size of site-packages — netprobe and its
dependencies: pip, setuptools, pkg_resources and _distutils_hack, which every venv has, are left
out — with and without __pycache__, and the number of distributions installed besides pip and
setuptools (netprobe's own included), and prints the biggest distributions of the agent's install.

For the agent's install also: the import time of the agent's path (`-X importtime` of
`import netprobe.agent.cli, netprobe.agent.daemon`: the modules it imports beyond the interpreter's
start, best of 5; and the wall time of that `python -c` against a bare `python -c pass`, best of 5),
and the RSS of a running `netprobe agent run` (VmRSS from /proc/PID/status after --rss-after seconds)
on a small configuration: one target, 127.0.0.1, icmp and tcp to a port this script listens on,
SQLite state in the temporary directory, migrated beforehand as on every start but the first.

Goal: the agent's install ≤ 60 MB of site-packages (as pip installs it, .pyc included). Exit 1 when
it is above. Sizes are file sizes (du --apparent-size) in MB of 2^20 bytes. Needs root for the icmp
probe (raw socket), python3-venv, and the package index.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = "/usr/bin/python3"
GOAL_MB = 60.0
MB = 1024 * 1024
# What every venv has, whatever is installed into it: not netprobe's footprint.
VENV_OWN = ("pip", "setuptools", "pkg_resources", "_distutils_hack")
VENV_OWN_FILES = ("distutils-precedence.pth",)
AGENT_IMPORT = "import netprobe.agent.cli, netprobe.agent.daemon"

AGENT_TOML = """\
[agent]
id = "footprint"
region = "local"
isp = "loopback"
timezone = "UTC"

[storage]
url = "sqlite:///{db}"

[log]
level = "info"

[probes.icmp]
every = "5s"
count = 5
interval = "0.2s"
timeout = "1s"

[probes.tcp]
every = "5s"
count = 3
interval = "0.2s"
timeout = "1s"

[[targets]]
id = "loopback"
host = "127.0.0.1"
datacenter = "local"
line = "loopback"
probes = ["icmp", "tcp"]
family = "ipv4"
tcp_port = {port}
"""


@dataclass
class Install:
    spec: str                      # "netprobe", "netprobe[server]"
    mb: float = 0.0                # site-packages less the venv's own, as pip installed it
    mb_no_pyc: float = 0.0         # the same without __pycache__
    dists: dict[str, float] = field(default_factory=dict)  # distribution → MB (files its RECORD lists)
    import_ms: float | None = None
    wall_ms: float | None = None
    bare_ms: float | None = None
    rss_mb: float | None = None
    rss_note: str = ""


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)  # type: ignore[call-overload, no-any-return]


def build_wheel(out: Path) -> Path:
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        timeout=600)
    wheels = sorted(out.glob("netprobe-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"expected one netprobe wheel in {out}, found {wheels}")
    return wheels[0]


def site_packages(venv: Path) -> Path:
    found = sorted((venv / "lib").glob("python3*/site-packages"))
    if len(found) != 1:
        raise SystemExit(f"no single site-packages under {venv / 'lib'}: {found}")
    return found[0]


def is_venv_own(top: str) -> bool:
    name = re.split(r"[-.]", top, maxsplit=1)[0] if top.endswith(".dist-info") else top
    return name in VENV_OWN or top in VENV_OWN_FILES


def files_under(path: Path) -> Iterator[Path]:
    if path.is_file() or path.is_symlink():
        yield path
        return
    for dirpath, _dirs, names in os.walk(path):
        for n in names:
            yield Path(dirpath) / n


def size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def measure_tree(inst: Install, sp: Path) -> None:
    total = no_pyc = 0
    counted: set[Path] = set()
    for top in sp.iterdir():
        if is_venv_own(top.name):
            continue
        for f in files_under(top):
            s = size(f)
            total += s
            if "__pycache__" not in f.parts:
                no_pyc += s
            counted.add(f.resolve())
    inst.mb, inst.mb_no_pyc = total / MB, no_pyc / MB
    owned: set[Path] = set()
    for info in sp.glob("*.dist-info"):
        if is_venv_own(info.name):
            continue
        name = info.name.removesuffix(".dist-info").rsplit("-", 1)[0]
        record = info / "RECORD"
        n = 0
        if record.exists():
            for line in record.read_text().splitlines():
                rel = line.rsplit(",", 2)[0]
                if not rel:
                    continue
                f = (sp / rel).resolve()
                if f in counted and f not in owned:  # inside site-packages (not bin/), once
                    owned.add(f)
                    n += size(f)
        inst.dists[name] = n / MB
    rest = sum(size(f) for f in counted - owned)
    if rest:
        inst.dists["(no RECORD)"] = rest / MB


def make_venv(work: Path, spec: str, wheel: Path) -> Path:
    venv = work / re.sub(r"\W+", "-", spec).strip("-")
    run([PYTHON, "-m", "venv", str(venv)], timeout=300)
    extra = spec.removeprefix("netprobe")  # "" or "[server]"
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         f"{wheel}{extra}"], timeout=1800)
    return venv


def importtime_ms(py: Path, stmt: str, startup: set[str]) -> tuple[float, set[str]]:
    """Sum of `-X importtime`'s self times of the modules `stmt` imports that are not in `startup`
    (the modules a bare start imports), and the modules seen."""
    err = run([str(py), "-X", "importtime", "-c", stmt], timeout=120).stderr
    us, seen = 0, set()
    for line in err.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+\d+ \|( *)(\S+)", line)
        if m:
            seen.add(m.group(3))
            if m.group(3) not in startup:
                us += int(m.group(1))
    return us / 1000, seen


def wall_ms(py: Path, stmt: str, n: int = 5) -> float:
    best = float("inf")
    for _ in range(n):
        t = time.perf_counter()
        run([str(py), "-c", stmt], timeout=120)
        best = min(best, time.perf_counter() - t)
    return best * 1000


def measure_imports(inst: Install, venv: Path) -> None:
    py = venv / "bin" / "python"
    run([str(py), "-c", AGENT_IMPORT], timeout=120)  # warm the page cache: the first run reads from disk
    _, startup = importtime_ms(py, "pass", set())
    inst.import_ms = min(importtime_ms(py, AGENT_IMPORT, startup)[0] for _ in range(5))
    inst.bare_ms = wall_ms(py, "pass")
    inst.wall_ms = wall_ms(py, AGENT_IMPORT)


@contextlib.contextmanager
def listener() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that accepts and closes, for the tcp probe."""
    srv = socket.create_server(("127.0.0.1", 0), backlog=64)
    srv.settimeout(0.5)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.close()

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        th.join(timeout=2)
        srv.close()


def vmrss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def measure_rss(inst: Install, venv: Path, work: Path, after: float) -> None:
    cli = str(venv / "bin" / "netprobe")
    db, cfg, log = work / "agent.db", work / "agent.toml", work / "agent.log"
    run([cli, "db", "upgrade", "--db", f"sqlite:///{db}"], timeout=300)
    with listener() as port:
        cfg.write_text(AGENT_TOML.format(db=db, port=port))
        with log.open("wb") as out:
            agent = subprocess.Popen([cli, "agent", "run", "--config", str(cfg), "--duration",
                                      str(after + 10)], stdout=out, stderr=out)
        try:
            time.sleep(after)
            inst.rss_mb = vmrss_mb(agent.pid)
            code = agent.wait(timeout=after + 60)
        finally:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
    text = log.read_text(errors="replace")
    if code != 0 or "Traceback" in text:
        raise SystemExit(f"agent exited {code}:\n{text[-3000:]}")
    import sqlite3

    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rounds = dict(conn.execute("SELECT probe || ':' || status, count(*) FROM probe_results "
                                   "GROUP BY 1").fetchall())
    inst.rss_note = ", ".join(f"{k} {v}" for k, v in sorted(rounds.items())) or "no rounds stored"


def fmt(v: float | None, spec: str = ".1f") -> str:
    return "—" if v is None else format(v, spec)


def report(installs: list[Install], python: str, pip: str) -> bool:
    print(f"install footprint: fresh venvs of {python}, {pip}; sizes in MB (2^20 bytes, file sizes), "
          f"site-packages less {', '.join(VENV_OWN)} (every venv has them)")
    head = f"{'install':<18} {'MB':>7} {'MB no .pyc':>11} {'dists':>6}"
    print(head)
    print("-" * len(head))
    # dists: installed besides pip and setuptools, netprobe's own included
    for i in installs:
        dists = len(i.dists) - ("(no RECORD)" in i.dists)
        print(f"{i.spec:<18} {i.mb:>7.1f} {i.mb_no_pyc:>11.1f} {dists:>6}")
    agent = installs[0]
    print(f"\nagent ({agent.spec}):")
    print(f"  import of the agent's path (-X importtime, modules beyond a bare start, best of 5): "
          f"{fmt(agent.import_ms, '.0f')} ms")
    diff = None if agent.wall_ms is None or agent.bare_ms is None else agent.wall_ms - agent.bare_ms
    print(f"  `python -c '{AGENT_IMPORT}'` wall, best of 5: {fmt(agent.wall_ms, '.0f')} ms; "
          f"`python -c pass`: {fmt(agent.bare_ms, '.0f')} ms; difference {fmt(diff, '.0f')} ms")
    print(f"  RSS of `netprobe agent run` (1 target on 127.0.0.1, icmp + tcp every 5 s): "
          f"{fmt(agent.rss_mb)} MB (rounds: {agent.rss_note})")
    print(f"  biggest distributions of {agent.spec} (MB, .pyc included):")
    for name, mb in sorted(agent.dists.items(), key=lambda kv: -kv[1])[:8]:
        print(f"    {name:<28} {mb:>6.1f}")
    ok = agent.mb <= GOAL_MB
    print(f"\ngoal: agent install ≤ {GOAL_MB:g} MB: {agent.mb:.1f} MB — {'PASS' if ok else 'FAIL'}"
          + ("" if ok else f" ({agent.mb - GOAL_MB:.1f} MB over)"))
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-influx", action="store_true", help="skip the netprobe[influx] install")
    ap.add_argument("--rss-after", type=float, default=15.0, help="seconds before reading VmRSS (15)")
    ap.add_argument("--keep", type=Path, help="keep the venvs and the agent's files in this directory")
    args = ap.parse_args()
    if not Path(PYTHON).exists():
        ap.error(f"needs {PYTHON} (Debian's python3, with python3-venv)")
    if os.geteuid() != 0:
        ap.error("needs root (the agent's icmp probe opens a raw socket)")
    specs = ["netprobe", "netprobe[server]"] + ([] if args.no_influx else ["netprobe[influx]"])
    with contextlib.ExitStack() as stack:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            work = args.keep
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="np-install-")))
        wheel = build_wheel(work / "wheel")
        print(f"built {wheel.name}", flush=True)
        installs: list[Install] = []
        for spec in specs:
            t = time.monotonic()
            venv = make_venv(work, spec, wheel)
            inst = Install(spec)
            measure_tree(inst, site_packages(venv))
            if spec == "netprobe":
                measure_imports(inst, venv)
                agent_dir = work / "agent-state"
                agent_dir.mkdir(exist_ok=True)
                measure_rss(inst, venv, agent_dir, args.rss_after)
                py, pip = (run([str(venv / "bin" / "python"), *a], timeout=60).stdout.split()
                           for a in (["--version"], ["-m", "pip", "--version"]))
                python, pipv = f"{PYTHON} ({' '.join(py)})", f"pip {pip[1]}"
            installs.append(inst)
            print(f"measured {spec} ({time.monotonic() - t:.0f} s)", flush=True)
            if not args.keep:
                shutil.rmtree(venv)
        print()
        ok = report(installs, python, pipv)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
