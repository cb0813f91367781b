#!/usr/bin/env bash
# Runs an MPI test program under prepost mpirun twice and checks: the exit code, that both runs
# printed byte for byte the same (stdout and stderr: same binary and seed, same output), and that
# the output matches every --expect pattern (grep -E). --once runs it once and compares nothing
# (on a device, --backend verbs: wall time, the ranks' output interleaves as it happens).
#   tests/mpi/run.sh [--rc N] [--once] [--expect REGEX]... -- PREPOST mpirun ARGS...
set -u
flags="--once"
source "$(dirname "${BASH_SOURCE[0]}")/opts.sh"
parse_opts run.sh "$@"
set -- "${rest[@]}"
runs=$((${opt[once]:-0} ? 1 : 2))
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
check_expects "$tmp/out1" "$tmp/err1" || fail=1
((fail)) && show
exit $fail
