#!/usr/bin/env bash
# Runs an MPI test program under prepost mpirun twice and checks: the exit code, that both runs
# printed byte for byte the same (stdout and stderr: same binary and seed, same output), and that
# the output matches every --expect pattern (grep -E). --once runs it once and compares nothing
# (on a device, --backend verbs: wall time, the ranks' output interleaves as it happens).
#   tests/mpi/run.sh [--rc N] [--once] [--expect REGEX]... -- PREPOST mpirun ARGS...
set -u
rc_want=0
runs=2
expects=()
while (($#)); do
  case $1 in
    --rc) rc_want=$2; shift 2 ;;
    --expect) expects+=("$2"); shift 2 ;;
    --once) runs=1; shift ;;
    --) shift; break ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
fail=0
for ((i = 1; i <= runs; i++)); do
  "$@" >"$tmp/out$i" 2>"$tmp/err$i"
  rc[$i]=$?
done
show() { echo "--- stdout"; cat "$tmp/out1"; echo "--- stderr"; cat "$tmp/err1"; }
if [[ ${rc[1]} != "$rc_want" ]]; then
  echo "FAIL: exit code ${rc[1]}, expected $rc_want"; fail=1
fi
if ((runs == 2)) && { [[ ${rc[2]} != "${rc[1]}" ]] || ! cmp -s "$tmp/out1" "$tmp/out2" || ! cmp -s "$tmp/err1" "$tmp/err2"; }; then
  echo "FAIL: the two runs differ (exit ${rc[1]} and ${rc[2]})"
  diff "$tmp/out1" "$tmp/out2"; diff "$tmp/err1" "$tmp/err2"; fail=1
fi
for e in "${expects[@]}"; do
  if ! cat "$tmp/out1" "$tmp/err1" | grep -Eq -- "$e"; then
    echo "FAIL: no line matches '$e'"; fail=1
  fi
done
((fail)) && show
exit $fail
