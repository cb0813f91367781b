#!/usr/bin/env bash
# Records an MPI program's run with `prepost mpirun --trace` and replays it: the run's exit code,
# then `prepost replay` must match every record (exit 0), then `prepost replay --hang` gives
# --hang-rc and prints every --expect pattern (grep -E).
#   tests/mpi/trace.sh PREPOST [--rc N] [--hang-rc N] [--expect REGEX]... -- MPIRUN-ARGS...
set -u
prepost=$1; shift
rc_want=0 hang_rc=0
expects=()
while (($#)); do
  case $1 in
    --rc) rc_want=$2; shift 2 ;;
    --hang-rc) hang_rc=$2; shift 2 ;;
    --expect) expects+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "trace.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
fail=0
"$prepost" mpirun --trace "$tmp/t.trace" "$@" >"$tmp/run" 2>&1
rc=$?
if [[ $rc != "$rc_want" ]]; then
  echo "FAIL: mpirun exit code $rc, expected $rc_want"; cat "$tmp/run"; fail=1
fi
"$prepost" replay "$tmp/t.trace" >"$tmp/replay" 2>&1
rc=$?
if [[ $rc != 0 ]] || ! grep -q "^replay matched: " "$tmp/replay"; then
  echo "FAIL: the replay did not match (exit $rc)"; cat "$tmp/replay"; fail=1
fi
"$prepost" replay --hang "$tmp/t.trace" >"$tmp/hang" 2>&1
rc=$?
if [[ $rc != "$hang_rc" ]]; then
  echo "FAIL: replay --hang exit code $rc, expected $hang_rc"; cat "$tmp/hang"; fail=1
fi
for e in "${expects[@]}"; do
  if ! cat "$tmp/run" "$tmp/hang" | grep -Eq -- "$e"; then
    echo "FAIL: no line matches '$e'"; cat "$tmp/run" "$tmp/hang"; fail=1
  fi
done
exit $fail
