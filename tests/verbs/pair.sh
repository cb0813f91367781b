# tests/verbs/pair.sh: sourced by bench.sh and latprof.sh (not run). pair NAME PORT SERVER... --
# CLIENT...: one perftest-style pair, the server in the background, its output in $OUT/NAME.srv,
# the client's in $OUT/NAME.cli; the client's status.
pair() { # name port server-args... -- client-args...
  local name=$1 port=$2
  shift 2
  local s=() c=()
  while [[ $1 != -- ]]; do s+=("$1"); shift; done
  shift
  c=("$@")
  timeout 300 "${s[@]}" >"$OUT/$name.srv" 2>&1 &
  local sp=$!
  local rc=1 try
  # a slow guest may not be listening yet: the client fails at once then, so try again while
  # the server lives (at most 10 times)
  for try in 1 2 3 4 5 6 7 8 9 10; do
    sleep 1
    timeout 300 "${c[@]}" >"$OUT/$name.cli" 2>&1
    rc=$?
    ((rc == 0)) && break
    kill -0 $sp 2>/dev/null || break
    grep -qiE "couldn't connect|unable to (init|connect)|connection refused" "$OUT/$name.cli" || break
  done
  wait $sp
  return $rc
}
