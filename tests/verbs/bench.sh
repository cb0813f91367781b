#!/usr/bin/env bash
# tests/verbs/bench.sh [BUILD_DIR] [ITERS]: prepost bench next to perftest and ucx_perftest, in
# the same boot of the Soft-RoCE guest, and the ratios (absolute figures under emulation mean
# little; ratios measured side by side do):
#
#   tools/guest/run tests/verbs/bench.sh build/default
#
# Latency: 64 B, usec, half a round trip (ib_send_lat t_typical; ucx tag_lat 50th percentile).
# Bandwidth: 64 KiB, MB/sec (ib_write_bw BW average; ucx tag_bw average). Engine rows come from
# `prepost bench --json` (see `prepost bench --help` for how each is measured). Not a test: it
# prints a table and fails only when a tool could not run.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
B=${1:-build/default}
N=${2:-1000}
P=$B/tools/prepost
OUT=${GUEST_OUT:-$(mktemp -d)}
DEV=$(ls /sys/class/infiniband | head -1)
[[ -n $DEV ]] || { echo "bench.sh: no RDMA device"; exit 1; }

# perftest: server in the background, client against 127.0.0.1 (GID 1: RoCE v2 IPv4-mapped)
pair() { # name port server-args... -- client-args...
  local name=$1 port=$2
  shift 2
  local s=() c=()
  while [[ $1 != -- ]]; do s+=("$1"); shift; done
  shift
  c=("$@")
  timeout 120 "${s[@]}" >"$OUT/$name.srv" 2>&1 &
  local sp=$!
  sleep 1
  timeout 120 "${c[@]}" >"$OUT/$name.cli" 2>&1
  local rc=$?
  wait $sp
  return $rc
}
D=(-d "$DEV" -x 1)
pair send_lat 18515 ib_send_lat "${D[@]}" -s 64 -n "$N" -p 18515 -- \
  ib_send_lat "${D[@]}" -s 64 -n "$N" -p 18515 127.0.0.1 || echo "bench.sh: ib_send_lat failed"
pair write_bw 18516 ib_write_bw "${D[@]}" -s 65536 -n $((2 * N)) -p 18516 -- \
  ib_write_bw "${D[@]}" -s 65536 -n $((2 * N)) -p 18516 127.0.0.1 || echo "bench.sh: ib_write_bw failed"
# UCX: its UD wire-up times out on the IPv4-mapped GID here; the fe80:: GID (index 0) works
export UCX_NET_DEVICES=$DEV:1 UCX_TLS=rc_verbs,ud_verbs,self UCX_IB_GID_INDEX=0 UCX_WARN_UNUSED_ENV_VARS=n
pair tag_lat 13337 ucx_perftest -p 13337 -- \
  ucx_perftest -p 13337 -t tag_lat -s 64 -n "$N" 127.0.0.1 || echo "bench.sh: ucx tag_lat failed"
pair tag_bw 13338 ucx_perftest -p 13338 -- \
  ucx_perftest -p 13338 -t tag_bw -s 65536 -n $((2 * N)) 127.0.0.1 || echo "bench.sh: ucx tag_bw failed"
unset UCX_NET_DEVICES UCX_TLS UCX_IB_GID_INDEX

"$P" bench --iters "$N" --lat-size 64 --bw-size 65536 --json >"$OUT/prepost-bench.json" 2>"$OUT/prepost-bench.err"
prc=$?

# figures: perftest's result line starts with the size; UCX's with "Final:"
pt_lat=$(awk '$1 == 64 && NF >= 5 {print $5}' "$OUT/send_lat.cli" | tail -1)
pt_bw=$(awk '$1 == 65536 && NF >= 4 {print $4}' "$OUT/write_bw.cli" | tail -1)
ucx_lat=$(awk '$1 == "Final:" {print $3}' "$OUT/tag_lat.cli" | tail -1)
ucx_bw=$(awk '$1 == "Final:" {print $6}' "$OUT/tag_bw.cli" | tail -1)
echo "perftest: ib_send_lat 64 B t_typical ${pt_lat:-?} usec; ib_write_bw 64 KiB ${pt_bw:-?} MB/sec"
echo "UCX:      tag_lat 64 B 50%ile ${ucx_lat:-?} usec; tag_bw 64 KiB ${ucx_bw:-?} MB/sec"
if ((prc != 0)); then
  echo "bench.sh: prepost bench failed:"
  cat "$OUT/prepost-bench.err"
  exit 1
fi
/usr/bin/python3 - "$OUT/prepost-bench.json" "${pt_lat:-}" "${pt_bw:-}" "${ucx_lat:-}" "${ucx_bw:-}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ref = {"usec": (sys.argv[2], sys.argv[4]), "MB/sec": (sys.argv[3], sys.argv[5])}
def num(x):
    try:
        return float(x)
    except ValueError:
        return None
print(f"prepost bench on {d['device']} (GID index {d['gid_index']}, MTU {d['active_mtu']}), "
      f"{d['iters']} iterations")
print(f"{'path':<18} {'value':>10} {'unit':<7} {'/perftest':>10} {'/UCX':>8}  how")
for r in d["results"]:
    v = r["value"]
    pt, ucx = (num(x) for x in ref[r["unit"]])
    ratio = lambda ref_: f"{v / ref_:.2f}" if v is not None and ref_ else "-"
    val = f"{v:.2f}" if v is not None else "-"
    print(f"{r['path']:<18} {val:>10} {r['unit']:<7} {ratio(pt):>10} {ratio(ucx):>8}  {r['note']}")
print("ratios: latency > 1 is slower than the reference, bandwidth < 1 is slower")
PY
