#!/usr/bin/env bash
# Build the wheel, install it (not editable) into a fresh virtual environment with the CI
# versions, and run `gnngp run` and `python -m gnngp_cli run --help` from a folder outside the
# checkout: the configs must come from the installed package.
#   usage: scripts/check_wheel.sh
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m pip wheel -q --no-deps -w "$work/dist" "$repo"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --no-compile -c "$repo/constraints.txt" "$work"/dist/gnngp-*.whl
cd "$work"
"$work/venv/bin/gnngp" run hydra.run.dir="$work/run" progress=false
test -s "$work/run/results.csv"
help="$("$work/venv/bin/python" -m gnngp_cli run --help)"
grep -q "model: " <<<"$help"
"$work/venv/bin/python" -m gnngp_cli run --help | head -1   # a reader that leaves early: no traceback
"$work/venv/bin/python" -m gnngp_cli --version
echo "wheel check: $(basename "$work"/dist/gnngp-*.whl) installs and runs outside the checkout"
