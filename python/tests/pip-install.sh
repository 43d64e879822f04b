#!/usr/bin/env bash
# The pip route of docs/python.md, offline: a venv with --system-site-packages, then
# `pip install --no-build-isolation` of the package's sources (pyproject.toml, setup.py, python/),
# packaging this build's extension (SLUICE_PREBUILT: the CMake build inside setup.py is the one
# `make build` runs, so it is not repeated here). The installed package is imported from another
# folder, with no PYTHONPATH and no LD_LIBRARY_PATH, and reads a file; pip uninstall removes it.
# Usage: pip-install.sh PYTHON BUILD_DIR SOURCE_DIR
set -euo pipefail
python=$1 build=$2 src=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-pip.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# A copy of what pip reads, so that its build leaves nothing in the source tree.
mkdir -p "$tmp/src/python" "$tmp/src/docs"
cp "$src/pyproject.toml" "$src/setup.py" "$src/CMakeLists.txt" "$tmp/src/"
cp "$src/docs/python.md" "$tmp/src/docs/"
cp -r "$src/python/sluice" "$tmp/src/python/"
"$python" -m venv --system-site-packages "$tmp/venv"
SLUICE_PREBUILT="$build" "$tmp/venv/bin/pip" install --no-build-isolation --no-index -q "$tmp/src"
head -c 300000 /dev/urandom > "$tmp/data.bin"
venv_python() { (cd / && env -i PATH=/usr/bin:/bin "$tmp/venv/bin/python" "$@"); }
venv_python -c '
import sys, sluice
buf = bytearray(300000)
with sluice.File(sys.argv[1]) as f:
    r = f.read(buf)
assert r.bytes == 300000 and bytes(buf) == open(sys.argv[1], "rb").read(), r
assert sluice.__file__.startswith(sys.argv[2]), sluice.__file__
print("pip-installed sluice", sluice.__version__, "read", r.bytes, "bytes:", r.path)
' "$tmp/data.bin" "$tmp/venv/"
venv_python -m sluice --version
"$tmp/venv/bin/pip" uninstall -y -q sluice
if venv_python -c 'import sluice' 2>/dev/null; then echo "pip uninstall left sluice importable" >&2; exit 1; fi
echo "pip route: installed into a venv, imported from /, read a file, uninstalled"
