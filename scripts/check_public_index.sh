#!/usr/bin/env bash
# The README's install resolves from the public package index alone: pip's configuration on this
# machine (its local wheel folder, its mirrors, its global constraints) set aside, a dry run of the
# README's install (constraints.txt and every extra) against https://pypi.org/simple. Only the
# packages' metadata is fetched (nothing is installed); fails when a pin is not on the index
# (e.g. a local build such as torch==X+cpu) or the pins conflict.
#   usage: scripts/check_public_index.sh
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
if ! python3 -c "import urllib.request; urllib.request.urlopen('https://pypi.org/simple/pip/', timeout=20)" 2>/dev/null; then
  echo "public index check: SKIPPED, pypi.org cannot be reached from this machine (nothing was checked)"
  exit 0
fi
report="$(mktemp)"
tool="$(mktemp -d)"
trap 'rm -f "$report"; rm -rf "$tool"' EXIT
# a pip that reads the index's metadata files (PEP 658/714: data-core-metadata, pip 23.3 on): an older one (a
# machine's python3 may bring 23.2) downloads every wheel whole to read its metadata, torch's CUDA build and its
# libraries included (gigabytes)
python3 -m venv "$tool"
"$tool/bin/python" -m pip install -q --disable-pip-version-check -c "$repo/constraints.txt" pip   # the pip CI installs with
env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL -u PIP_CONSTRAINT -u PIP_NO_INDEX PIP_CONFIG_FILE=/dev/null \
  "$tool/bin/python" -m pip install --disable-pip-version-check --dry-run --ignore-installed --quiet --report "$report" --index-url https://pypi.org/simple \
  -c "$repo/constraints.txt" -e "$repo[test,launchers,dask,gpytorch,search,tracking,docs]"
python3 - "$report" <<'PY'
import json, sys

chosen = json.load(open(sys.argv[1]))["install"]
elsewhere = [i["metadata"]["name"] for i in chosen   # only the project itself comes from this checkout
             if not i["download_info"]["url"].startswith("https://files.pythonhosted.org/") and i["metadata"]["name"] != "gnngp"]
if elsewhere:
    sys.exit(f"public index check: not from the public index: {', '.join(elsewhere)}")
torch = next(i["metadata"]["version"] for i in chosen if i["metadata"]["name"] == "torch")
print(f"public index check: the install resolves from pypi.org alone ({len(chosen)} packages, torch {torch})")
PY
