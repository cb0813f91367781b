#!/usr/bin/env bash
# tests/verbs/bench.sh [BUILD_DIR] [ITERS]: prepost bench next to perftest and ucx_perftest, in
# the same boot of the Soft-RoCE guest, and the ratios of like against like (absolute figures
# under emulation mean little; ratios measured side by side do):
#
#   tools/guest/run tests/verbs/bench.sh build/default
#
# Latency: LAT_SIZES (default 64 B), usec, t_typical (the median) against t_typical: ib_send_lat,
# ib_write_lat (half a round trip), ib_read_lat (one READ), ucx_perftest tag_lat (its median).
# Bandwidth: BW_SIZES (default 64 KiB, 1 MiB and 4 MiB; 2 x ITERS messages a test, but at most
# BW_BYTES bytes and at least 128 messages), MB/sec average against average: ib_send_bw, ib_write_bw,
# ib_read_bw, ucx_perftest tag_bw and ucp_put_bw (their whole-run "overall" column). Engine rows come from `prepost bench --json`
# (`prepost bench --help` says how each is measured: latency as half of a back-to-back
# ping-pong's round trip, like the raw rows and perftest). Prints a table and writes
# $GUEST_OUT/bench-ratios.json: {"ratios": {KEY: ratio}, "figures": {...}, "sizes": ...}, one key
# per ratio, e.g. eager_lat_vs_send_lat, rget_lat_vs_read_plus_eager_lat, eager_bw_vs_write_bw,
# rndv_bw_vs_write_bw (RGET), rput_bw_vs_write_bw, ring_bw_vs_write_bw (ring-cts),
# rget_lat_vs_raw_rget_lat (the same verbs without the engine), and the kernel's clocksource: in
# the emulated guest boot it with GUEST_APPEND=tsc=reliable for latency (HPET makes every
# clock_gettime a system call; backends/verbs/README.md, "Where the latency goes"). Not a test:
# it fails only when a tool could not run.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
B=${1:-build/default}
N=${2:-1000}
P=$B/tools/prepost
OUT=${GUEST_OUT:-$(mktemp -d)}
DEV=$(ls /sys/class/infiniband | head -1)
LAT_SIZES=${LAT_SIZES:-64}
BW_SIZES=${BW_SIZES:-65536 1048576 4194304}
# a bandwidth test moves 2 x ITERS messages, but at most BW_BYTES (default 256 MiB) and at
# least 128 messages (perftest's default tx depth): 2,000 x 4 MiB would take ~5 min a test at
# rxe's ~30 MB/s under TCG (perftest's own runs passed the 300 s bound here)
BW_BYTES=${BW_BYTES:-268435456}
bw_iters() { # bw_iters SIZE: the messages of one bandwidth test of SIZE bytes
  local n=$((2 * N)) cap=$((BW_BYTES / $1))
  ((cap < n)) && n=$cap
  ((n < 128)) && n=128
  echo $n
}
[[ -n $DEV ]] || { echo "bench.sh: no RDMA device"; exit 1; }

# perftest: server in the background, client against 127.0.0.1 (GID 1: RoCE v2 IPv4-mapped)
# shellcheck source=tests/verbs/pair.sh
source tests/verbs/pair.sh
D=(-d "$DEV" -x 1)
port=18600
UCX_ENV=(UCX_NET_DEVICES=$DEV:1 UCX_TLS=rc_verbs,ud_verbs,self UCX_IB_GID_INDEX=0
  UCX_WARN_UNUSED_ENV_VARS=n) # its UD wire-up times out on the IPv4-mapped GID here; fe80:: works
ucx() { # ucx NAME PORT ARGS...: one ucx_perftest pair
  local name=$1 port=$2
  shift 2
  pair "$name" "$port" env "${UCX_ENV[@]}" ucx_perftest -p "$port" -- \
    env "${UCX_ENV[@]}" ucx_perftest -p "$port" "$@" 127.0.0.1
}
# Each size's references and prepost's rows run back to back, so that like is measured next to
# like (a loaded host's speed drifts over minutes): latency first, then bandwidth size by size.
for s in $LAT_SIZES; do
  for t in send write read; do
    port=$((port + 1))
    pair "${t}_lat_$s" $port "ib_${t}_lat" "${D[@]}" -s "$s" -n "$N" -p $port -- \
      "ib_${t}_lat" "${D[@]}" -s "$s" -n "$N" -p $port 127.0.0.1 || echo "bench.sh: ib_${t}_lat $s failed"
  done
  port=$((port + 1))
  ucx "tag_lat_$s" $port -t tag_lat -s "$s" -n "$N" || echo "bench.sh: ucx tag_lat $s failed"
done
"$P" bench --iters "$N" --sizes "$(echo $LAT_SIZES | tr ' ' ,)" --test lat --json \
  >"$OUT/prepost-bench-lat.json" 2>"$OUT/prepost-bench-lat.err"
prc=$?
for s in $BW_SIZES; do
  n=$(bw_iters "$s")
  for t in send write read; do
    port=$((port + 1))
    pair "${t}_bw_$s" $port "ib_${t}_bw" "${D[@]}" -s "$s" -n "$n" -p $port -- \
      "ib_${t}_bw" "${D[@]}" -s "$s" -n "$n" -p $port 127.0.0.1 || echo "bench.sh: ib_${t}_bw $s failed"
  done
  for t in tag_bw ucp_put_bw; do
    port=$((port + 1))
    ucx "${t}_$s" $port -t $t -s "$s" -n "$n" || echo "bench.sh: ucx $t $s failed"
  done
  # bench's bandwidth rows send 2 x --iters messages
  "$P" bench --iters $((n / 2)) --sizes "$s" --test bw --json \
    >"$OUT/prepost-bench-bw-$s.json" 2>"$OUT/prepost-bench-bw-$s.err"
  prc=$((prc | $?))
done
if ((prc != 0)); then
  echo "bench.sh: prepost bench failed:"
  cat "$OUT/prepost-bench-lat.err" "$OUT"/prepost-bench-bw-*.err
  exit 1
fi
bw_msgs=$(for s in $BW_SIZES; do printf '%s:%s ' "$s" "$(bw_iters "$s")"; done)
/usr/bin/python3 - "$OUT" "$LAT_SIZES" "$BW_SIZES" "$N" "$bw_msgs" <<'PY'
import json, math, os, sys
out, lat_sizes, bw_sizes = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
lat_iters = int(sys.argv[4])
bw_messages = {k: int(v) for k, v in (x.split(":") for x in sys.argv[5].split())}

def lines(name):
    try:
        return open(os.path.join(out, name)).read().splitlines()
    except OSError:
        return []

def finite(text):
    # a figure, or None: perftest prints "inf" and "-nan" when its cycle clock failed it (seen
    # in a loaded TCG boot: ib_write_lat's whole row inf), and a ratio against that is no ratio
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) else None

def perftest(name, size, col):
    # perftest's result line starts with the size: latency t_typical is column 5, bandwidth
    # BW average column 4
    v = None
    for l in lines(name + ".cli"):
        f = l.split()
        if len(f) > col and f[0] == str(size):
            v = finite(f[col - 1])
    return v

def ucx(name, col):
    v = None
    for l in lines(name + ".cli"):
        f = l.split()
        if f and f[0] == "Final:" and len(f) >= col:
            v = finite(f[col - 1])
    return v

ref = {}  # (tool, test, size) -> value
for s in lat_sizes:
    for t in ("send", "write", "read"):
        ref[(t, "lat", s)] = perftest(f"{t}_lat_{s}", s, 5)
    ref[("ucx_tag", "lat", s)] = ucx(f"tag_lat_{s}", 3)   # typical (median) latency
for s in bw_sizes:
    for t in ("send", "write", "read"):
        ref[(t, "bw", s)] = perftest(f"{t}_bw_{s}", s, 4)
    # overall bandwidth: the whole run's, as perftest's BW average and prepost's figures are
    # (the Final line's "average" column is its last report interval's: 3.63 MB/s against
    # 36.05 overall for one 4 MiB ucp_put_bw run here)
    ref[("ucx_tag", "bw", s)] = ucx(f"tag_bw_{s}", 7)
    ref[("ucx_put", "bw", s)] = ucx(f"ucp_put_bw_{s}", 7)

eng = {}  # (row, test, size) -> value (t_typical or bw average)
dev = None
for f in ["prepost-bench-lat.json"] + [f"prepost-bench-bw-{s}.json" for s in bw_sizes]:
    d = json.load(open(os.path.join(out, f)))
    dev = d
    for r in d["results"]:
        eng[(r["row"], r["test"], str(r["size"]))] = r["value"]

ratios, figures = {}, {}
def ratio(key, num, den):
    if num is not None and den and math.isfinite(num / den):
        ratios[key] = round(num / den, 4)
    else:
        ratios[key] = None

multi_lat, multi_bw = len(lat_sizes) > 1, len(bw_sizes) > 1
for s in lat_sizes:
    sfx = f"_{s}" if multi_lat else ""
    e = lambda row: eng.get((row, "lat", s))
    r = lambda t: ref.get((t, "lat", s))
    ratio("raw_send_lat_vs_send_lat" + sfx, e("raw_send"), r("send"))
    ratio("raw_write_lat_vs_write_lat" + sfx, e("raw_write"), r("write"))
    ratio("raw_read_lat_vs_read_lat" + sfx, e("raw_read"), r("read"))
    ratio("eager_lat_vs_send_lat" + sfx, e("eager"), r("send"))
    ratio("eager_lat_vs_ucx_tag_lat" + sfx, e("eager"), r("ucx_tag"))
    ratio("rget_lat_vs_read_lat" + sfx, e("rget"), r("read"))
    ratio("rget_lat_vs_raw_rget_lat" + sfx, e("rget"), e("raw_rget"))
    ratio("rget_lat_vs_read_plus_eager_lat" + sfx, e("rget"),
          (r("read") + e("eager")) if r("read") is not None and e("eager") is not None else None)
    ratio("rput_lat_vs_write_lat" + sfx, e("rput"), r("write"))
    ratio("ring_credits_lat_vs_write_lat" + sfx, e("ring-credits"), r("write"))
    ratio("ring_lat_vs_write_lat" + sfx, e("ring-cts"), r("write"))
for s in bw_sizes:
    sfx = f"_{s}" if multi_bw else ""
    e = lambda row: eng.get((row, "bw", s))
    r = lambda t: ref.get((t, "bw", s))
    ratio("raw_send_bw_vs_send_bw" + sfx, e("raw_send"), r("send"))
    ratio("raw_write_bw_vs_write_bw" + sfx, e("raw_write"), r("write"))
    ratio("raw_read_bw_vs_read_bw" + sfx, e("raw_read"), r("read"))
    ratio("eager_bw_vs_write_bw" + sfx, e("eager"), r("write"))
    ratio("eager_bw_vs_ucx_tag_bw" + sfx, e("eager"), r("ucx_tag"))
    ratio("rndv_bw_vs_write_bw" + sfx, e("rget"), r("write"))
    ratio("rput_bw_vs_write_bw" + sfx, e("rput"), r("write"))
    ratio("rput_bw_vs_ucx_put_bw" + sfx, e("rput"), r("ucx_put"))
    ratio("ring_credits_bw_vs_write_bw" + sfx, e("ring-credits"), r("write"))
    ratio("ring_bw_vs_write_bw" + sfx, e("ring-cts"), r("write"))
for (k, t, s), v in sorted(ref.items()):
    figures[f"{'ib_' + k if k in ('send', 'write', 'read') else k}_{t}_{s}"] = v
for (k, t, s), v in sorted(eng.items()):
    figures[f"prepost_{k}_{t}_{s}"] = v
try:
    clocksource = open("/sys/devices/system/clocksource/clocksource0/current_clocksource").read().strip()
except OSError:
    clocksource = None
doc = {"device": dev["device"], "active_mtu": dev["active_mtu"], "lat_iters": lat_iters,
       "clocksource": clocksource,
       "bw_messages": bw_messages,
       "lat_sizes": [int(x) for x in lat_sizes], "bw_sizes": [int(x) for x in bw_sizes],
       "lat_unit": "usec (t_typical, the median)", "bw_unit": "MB/sec (average)",
       "ratios": ratios, "figures": figures}
with open(os.path.join(out, "bench-ratios.json"), "w") as f:
    json.dump(doc, f, indent=1, sort_keys=True)
print(f"prepost bench on {dev['device']} (MTU {dev['active_mtu']}, clocksource {clocksource}), "
      f"latency {lat_iters} "
      "iterations, bandwidth messages per size " +
      ", ".join(f"{k} B: {v}" for k, v in bw_messages.items()) +
      "; latency usec t_typical, bandwidth MB/sec average")
print(f"{'figure':<34} {'value':>10}")
for k, v in figures.items():
    print(f"{k:<34} {'-' if v is None else f'{v:.2f}':>10}")
print(f"\n{'ratio (like against like)':<40} {'value':>8}")
for k, v in ratios.items():
    print(f"{k:<40} {'-' if v is None else f'{v:.2f}':>8}")
print("latency ratio > 1: slower than the reference; bandwidth ratio < 1: slower")
print("written: " + os.path.join(out, "bench-ratios.json"))
PY
