#!/usr/bin/env bash
# prepost explore --program: runs it (the failing seeds' scenarios kept in a temporary --out),
# checks its exit code and every --expect pattern (grep -E), then runs the first reproduction line
# it printed and checks that it fails again with the exit status explore reported.
#   tests/mpi/explore.sh PREPOST [--rc N] [--expect REGEX]... -- EXPLORE-ARGS...
set -u
prepost=$1; shift
source "$(dirname "${BASH_SOURCE[0]}")/opts.sh"
parse_opts explore.sh "$@"
set -- "${rest[@]}"
fail=0
"$prepost" explore --out "$tmp" "$@" >"$tmp/out" 2>&1
rc=$?
if [[ $rc != "$rc_want" ]]; then
  echo "FAIL: explore exit code $rc, expected $rc_want"; fail=1
fi
check_expects "$tmp/out" || fail=1
line=$(grep -m1 '^  reproduce: prepost mpirun ' "$tmp/out")
if [[ -n $line ]]; then
  want=$(grep -m1 -B1 '^  reproduce: ' "$tmp/out" | head -1 | sed -nE 's/.*: exit ([0-9]+).*/\1/p')
  read -r -a cmd <<<"${line#  reproduce: prepost }"
  "$prepost" "${cmd[@]}" >"$tmp/repro" 2>&1
  got=$?
  if [[ -z $want || $got != "$want" ]]; then
    echo "FAIL: the reproduction exited $got, explore reported '${want}'"; cat "$tmp/repro"; fail=1
  fi
elif ((rc_want == 1)); then
  echo "FAIL: no reproduction line"; fail=1
fi
((fail)) && cat "$tmp/out"
exit $fail
