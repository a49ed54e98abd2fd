"""The Debian package, built by packaging/build-deb.sh and installed on this machine with dpkg.

Install, then remove, then purge, checking at each step what is on disk: the environment in
/opt/netprobe, /usr/bin/netprobe, the units, the configuration examples (conffiles), the state
directory and the netprobe user. In between, the installed program runs as that user with CAP_NET_RAW
alone, the way netprobe-agent.service runs it. Root only; the package is purged whatever happens.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import netprobe
from tests.support.lab import require_root

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "packaging" / "build-deb.sh"
UNIT_DIR = Path("/usr/lib/systemd/system")
UNITS = sorted(p.name for p in (ROOT / "systemd").glob("netprobe-*.service"))
CONFIGS = {"agent.example.toml": ROOT / "config.example.toml",
           "collector.example.toml": ROOT / "config.collector.example.toml"}
STATE = Path("/var/lib/netprobe")
ETC = Path("/etc/netprobe")
OPT = Path("/opt/netprobe")
BIN = Path("/usr/bin/netprobe")
# As netprobe-agent.service runs it: the netprobe user, no capability but CAP_NET_RAW.
AS_AGENT = ["setpriv", "--reuid=netprobe", "--regid=netprobe", "--init-groups",
            "--inh-caps=-all,+net_raw", "--ambient-caps=-all,+net_raw", "--bounding-set=-all,+net_raw"]
NO_CAPS = ["setpriv", "--reuid=netprobe", "--regid=netprobe", "--init-groups",
           "--inh-caps=-all", "--bounding-set=-all"]


def run(*cmd: str, check: bool = True, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False,
                          env=env, cwd="/")
    if check:
        assert done.returncode == 0, f"{cmd}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def dpkg(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """dpkg, waiting (up to 5 min) while another apt-get or dpkg holds its lock."""
    deadline = time.monotonic() + 300
    while True:
        done = run("dpkg", *args, check=False, timeout=300)
        if done.returncode != 2 or "lock" not in done.stderr or time.monotonic() > deadline:
            break
        time.sleep(2)
    if check:
        assert done.returncode == 0, f"dpkg {args}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def purge() -> None:
    dpkg("--purge", "netprobe", check=False)


def user_exists(name: str = "netprobe") -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def group_exists(name: str = "netprobe") -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def directives(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln and not ln.startswith(("#", ";"))]


def package_status() -> str:
    done = run("dpkg-query", "-W", "-f=${Status}", "netprobe", check=False)
    return done.stdout if done.returncode == 0 else "not installed"


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("deb")
    started = time.monotonic()
    done = run("bash", str(BUILD), str(out), timeout=900)
    print(f"build: {time.monotonic() - started:.0f} s; {done.stdout.strip()}")
    path = out / f"netprobe_{netprobe.__version__}_amd64.deb"
    assert path.is_file(), done.stdout + done.stderr
    return path


@pytest.fixture
def clean_machine(deb: Path) -> Iterator[Path]:
    """No netprobe package before (a stale one from an interrupted run is purged) nor after."""
    require_root()  # dpkg -i
    purge()
    assert not user_exists() and not ETC.exists() and not OPT.exists()
    try:
        yield deb
    finally:
        purge()


def test_package_metadata(deb: Path) -> None:
    info = run("dpkg-deb", "--field", str(deb), "Package", "Version", "Architecture", "Depends").stdout
    assert f"Version: {netprobe.__version__}\n" in info and "Architecture: amd64" in info
    # Built for CPython 3.11 and run by /usr/bin/python3.11: depend on that interpreter itself.
    assert "Depends: python3.11, adduser" in info
    conffiles = run("dpkg-deb", "--info", str(deb), "conffiles").stdout.split()
    assert sorted(conffiles) == sorted(f"/etc/netprobe/{n}" for n in CONFIGS)
    listing = run("dpkg-deb", "--contents", str(deb)).stdout
    assert "/var/lib/netprobe" not in listing   # made by postinst: dpkg -r would delete an empty one
    assert "site-packages/pip/" not in listing and "site-packages/setuptools/" not in listing


def test_install_run_remove_purge(clean_machine: Path) -> None:
    deb = clean_machine
    started = time.monotonic()
    dpkg("--install", str(deb))
    installed = time.monotonic() - started
    assert package_status() == "install ok installed"

    # the user, the state directory
    user = pwd.getpwnam("netprobe")
    assert user.pw_uid < 1000 and user.pw_dir == str(STATE) and user.pw_shell.endswith("nologin")
    assert grp.getgrgid(user.pw_gid).gr_name == "netprobe"
    st = STATE.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (user.pw_uid, user.pw_gid, 0o700)

    # the program: a symlink into the environment, which runs on Debian's interpreter without pip
    assert BIN.is_symlink() and os.readlink(BIN) == "/opt/netprobe/venv/bin/netprobe"
    python = OPT / "venv" / "bin" / "python"
    assert python.resolve() == Path("/usr/bin/python3.11").resolve()
    assert "/opt/netprobe/venv" in (OPT / "venv" / "pyvenv.cfg").read_text()
    # built in a staging directory: every script names the installed interpreter
    for script in (OPT / "venv" / "bin").iterdir():
        if not script.is_symlink() and script.read_bytes().startswith(b"#!"):
            assert script.read_text().splitlines()[0] == "#!/opt/netprobe/venv/bin/python", script
    assert run(str(python), "-c", "import pip", check=False).returncode != 0
    assert run(str(python), "-c", "import setuptools", check=False).returncode != 0
    # the [server] extra: collector, reports and their database drivers
    run(str(python), "-c", "import netprobe.collector.app, psycopg, numpy, influxdb_client")
    for path in [OPT, *OPT.rglob("*")]:
        st = path.lstat()
        assert st.st_uid == 0, path
        assert stat.S_ISLNK(st.st_mode) or not st.st_mode & 0o022, f"{path} is writable by others"

    # the configuration examples: the repository's, as conffiles, and valid
    assert ETC.stat().st_uid == 0 and stat.S_IMODE(ETC.stat().st_mode) == 0o755
    for name, source in CONFIGS.items():
        shipped = ETC / name
        assert shipped.read_text() == source.read_text()
        assert stat.S_IMODE(shipped.stat().st_mode) == 0o644
        run(str(BIN), "config", "check", str(shipped))

    # the units: the repository's, with /usr/bin/netprobe and the static user; the rest line for line
    for name in UNITS:
        unit = UNIT_DIR / name
        assert stat.S_IMODE(unit.stat().st_mode) == 0o644
        source = directives((ROOT / "systemd" / name).read_text())
        packaged = directives(unit.read_text())
        exec_start = [ln for ln in packaged if ln.startswith("ExecStart=")]
        assert len(exec_start) == 1 and exec_start[0].startswith("ExecStart=/usr/bin/netprobe ")
        assert [ln for ln in packaged if ln.startswith(("User=", "Group=", "DynamicUser="))] == \
            ["User=netprobe", "Group=netprobe"]
        kept = [ln for ln in source if not ln.startswith(("ExecStart=", "User=", "DynamicUser="))]
        assert [ln for ln in packaged if not ln.startswith(("ExecStart=", "User=", "Group="))] == kept
    assert "StateDirectory=netprobe" in (UNIT_DIR / "netprobe-agent.service").read_text()
    verify = run("systemd-analyze", "verify", "--man=no", *(str(UNIT_DIR / n) for n in UNITS))
    assert verify.stdout.strip() == "" and verify.stderr.strip() == "", verify.stdout + verify.stderr
    # installing enables and starts nothing
    assert not list(Path("/etc/systemd/system").glob("*.wants/netprobe-*"))

    # icmp as the agent runs it: the netprobe user with CAP_NET_RAW only ...
    ping = run(*AS_AGENT, str(BIN), "probe", "icmp", "127.0.0.1", "--count", "3", "--interval", "0.1",
               "--json")
    result = json.loads(ping.stdout)
    assert (result["sent"], result["received"]) == (3, 3), ping.stdout
    # ... which is what makes it work: without the capability the same command fails
    if Path("/proc/sys/net/ipv4/ping_group_range").read_text().split() == ["1", "0"]:
        denied = run(*NO_CAPS, str(BIN), "probe", "icmp", "127.0.0.1", "--count", "1", check=False)
        assert denied.returncode == 2 and "CAP_NET_RAW" in denied.stderr, denied.stderr
    # the agent's database in its state directory, made by that user
    env = {"PATH": "/usr/bin:/bin", "STATE_DIRECTORY": str(STATE)}
    run(*AS_AGENT, str(BIN), "db", "upgrade", env=env)
    db = STATE / "netprobe.db"
    assert db.stat().st_uid == user.pw_uid
    (ETC / "agent.toml").write_text((ETC / "agent.example.toml").read_text())

    # remove: the program goes; configuration, state and the user stay
    dpkg("--remove", "netprobe")
    assert package_status() == "deinstall ok config-files"
    assert not OPT.exists() and not BIN.exists() and not BIN.is_symlink()
    assert not any((UNIT_DIR / n).exists() for n in UNITS)
    assert all((ETC / n).is_file() for n in CONFIGS) and (ETC / "agent.toml").is_file()
    assert db.is_file() and user_exists()

    # installed again over the kept state: the same user, the database untouched
    dpkg("--install", str(deb))
    assert pwd.getpwnam("netprobe").pw_uid == user.pw_uid and db.stat().st_uid == user.pw_uid
    dpkg("--remove", "netprobe")

    # purge: nothing left, the user and group included
    dpkg("--purge", "netprobe")
    assert package_status() == "not installed"
    assert not ETC.exists() and not STATE.exists() and not OPT.exists()
    assert not user_exists() and not group_exists()
    print(f"dpkg -i: {installed:.1f} s; installed size "
          f"{run('dpkg-deb', '--field', str(deb), 'Installed-Size').stdout.strip()} KiB; "
          f".deb {deb.stat().st_size // 1024} KiB")

