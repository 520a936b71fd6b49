#!/usr/bin/env bash
# Build the wheel, install it (not editable) into a fresh virtual environment with the CI
# versions, and run `gnngp run` and `python -m gnngp_cli run --help` from a folder outside the
# checkout: the configs must come from the installed package.
#   usage: scripts/check_wheel.sh
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# built from a copy of the checkout's files (tracked, or untracked and not ignored): a build writes its
# egg-info and build folders into the tree it builds, and CI runs this beside the editable install
mkdir "$work/src"
if git -C "$repo" rev-parse --git-dir > /dev/null 2>&1; then
  git -C "$repo" ls-files -z --cached --others --exclude-standard | tar -C "$repo" --ignore-failed-read --null -T - -cf - | tar -C "$work/src" -xf -
else   # not a git checkout (an unpacked archive): every file but the environment, the data and the outputs
  tar -C "$repo" --exclude=./.venv --exclude=./data --exclude=./outputs --exclude=./site --exclude='*.egg-info' -cf - . | tar -C "$work/src" -xf -
fi
python3 -m pip wheel -q --no-deps -w "$work/dist" "$work/src"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --no-compile -c "$repo/constraints.txt" "$work"/dist/gnngp-*.whl
cd "$work"
"$work/venv/bin/gnngp" run hydra.run.dir="$work/run" progress=false
test -s "$work/run/results.csv"
# the help, from the installed configs (a reader that leaves early is the fast suite's: tests/cli/test_cli.py)
"$work/venv/bin/python" -m gnngp_cli run --help > "$work/help.txt"
grep -q "model: " "$work/help.txt"
head -1 "$work/help.txt"
"$work/venv/bin/python" -m gnngp_cli --version
echo "wheel check: $(basename "$work"/dist/gnngp-*.whl) installs and runs outside the checkout"
