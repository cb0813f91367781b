#!/usr/bin/env bash
# tests/fleet/parallel.sh PREPOST: tools/explore-parallel runs 5 shards of 60 seeds with GNU
# parallel (2 at a time) and merges them; the merged summary must equal an unsharded run of the
# same seeds (tests/fleet/compare.py).
set -euo pipefail
prepost=$1
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if ! command -v parallel >/dev/null; then
  echo "SKIP: GNU parallel is not installed (Debian: apt-get install parallel; tools/lib.sh lists it)"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/prepost-fleet-parallel.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
opts=(--protocol naive --no-shrink --max-messages 50)
rc=0
"$src/tools/explore-parallel" --out "$tmp/run" --shards 5 --jobs 2 --from 11 --seeds 60 \
  --prepost "$prepost" -- "${opts[@]}" || rc=$?
((rc == 1)) || { echo "explore-parallel exited $rc, expected 1 (failures found)"; cat "$tmp"/run/shard-*.log; exit 1; }
rc=0
"$prepost" explore --from 11 --seeds 60 --json --out "$tmp/all" "${opts[@]}" >"$tmp/all.log" || rc=$?
((rc == 1)) || { echo "the unsharded run exited $rc"; cat "$tmp/all.log"; exit 1; }
/usr/bin/python3 "$src/tests/fleet/compare.py" "$tmp/all/summary.json" "$tmp/run/merged/summary.json" 5
