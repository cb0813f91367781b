#!/usr/bin/env bash
# Records an MPI program's run with `prepost mpirun --trace` and replays it: the run's exit code,
# then `prepost replay` must match every record (exit 0), then `prepost replay --hang` gives
# --hang-rc and prints every --expect pattern (grep -E). --twice records the run a second time
# and checks that the two traces are byte for byte the same (same binary, seed and scenario).
#   tests/mpi/trace.sh PREPOST [--rc N] [--hang-rc N] [--twice] [--expect REGEX]... -- MPIRUN-ARGS...
set -u
prepost=$1; shift
flags="--twice" valued="--hang-rc --dump-expect"
source "$(dirname "${BASH_SOURCE[0]}")/opts.sh"
parse_opts trace.sh "$@"
set -- "${rest[@]}"
hang_rc=${opt[hang-rc]:-0}
fail=0
"$prepost" mpirun --trace "$tmp/t.trace" "$@" >"$tmp/run" 2>&1
rc=$?
if [[ $rc != "$rc_want" ]]; then
  echo "FAIL: mpirun exit code $rc, expected $rc_want"; cat "$tmp/run"; fail=1
fi
if ((${opt[twice]:-0})); then
  "$prepost" mpirun --trace "$tmp/t2.trace" "$@" >"$tmp/run2" 2>&1
  rc=$?
  if [[ $rc != "$rc_want" ]] || ! cmp "$tmp/t.trace" "$tmp/t2.trace"; then
    echo "FAIL: the second run's trace differs (exit $rc)"; cat "$tmp/run2"
    "$prepost" trace dump "$tmp/t.trace" >"$tmp/d1" 2>&1
    "$prepost" trace dump "$tmp/t2.trace" >"$tmp/d2" 2>&1
    diff "$tmp/d1" "$tmp/d2" | head -20; fail=1
  fi
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
if [[ -n ${opt[dump-expect]:-} ]]; then
  "$prepost" trace dump "$tmp/t.trace" >"$tmp/dump" 2>&1
  if ! grep -Eq -- "${opt[dump-expect]}" "$tmp/dump"; then
    echo "FAIL: no line of the trace's dump matches '${opt[dump-expect]}'"; fail=1
  fi
fi
if ! check_expects "$tmp/run" "$tmp/hang"; then
  cat "$tmp/run" "$tmp/hang"; fail=1
fi
exit $fail
