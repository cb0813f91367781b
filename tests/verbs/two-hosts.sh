#!/usr/bin/env bash
# tests/verbs/two-hosts.sh [BUILD_DIR]: the verbs backend between two hosts. Runs on the HOST,
# from anywhere (tools/test runs it after the one-guest suite):
#
#   tests/verbs/two-hosts.sh build/default
#
# Boots two Soft-RoCE guests joined by a link (tools/guest/pair: rxe0 on eth0 in each, so every
# packet between the ranks takes rxe's UDP/IP path through a netdev) and runs one prepost rank in
# each, started as a cluster's launcher leaves them without PMIx: rank and size in
# OMPI_COMM_WORLD_RANK/SIZE, the ranks meet at `--coordinator 169.254.77.1:PORT` (rank 0's
# guest, where rank 0 runs the coordinator), the job secret from PREPOST_JOB_SECRET_FILE (made
# here for the run, read by both guests through their view of this machine's /). The cases, one
# after another in the same boot (the scenarios are models/scenarios/NAME.yaml):
#
#   p2p    rnr-slow-consumer-eager   eager with credits (a p2p protocol), no loss
#   ring   rnr-slow-consumer-ring    the ring FIFO with credits, no loss
#   lossy  lossy                     `tc netem loss $TWO_HOSTS_LOSS%` (2) on each guest's eth0,
#                                    for RoCE's UDP packets only (port 4791; the TCP bootstrap
#                                    is left alone), with qp.timeout=16 (below)
#
# The lossy case raises the scenario's ACK timeout from 10 (4.2 ms) to 16 (268 ms), here and in
# the simulator run it is compared with. Under emulation an ACK takes tens of milliseconds to
# come back, so a 4.2 ms timeout fires on nearly every window, and Debian 12's rxe (kernel
# 6.1.192) mishandles a timeout retry that races the late ACKs: captured on eth0, the requester
# sends a zero-length SEND_ONLY at the acknowledged PSN and every later message one PSN late, and
# the responder answers with NAK "invalid request" (REM_INV_REQ_ERR) or fails the receive
# (LOC_QP_OP_ERR / REM_OP_ERR). Measured: 7 of 45 runs failed that way at timeout 10, 0 of 30 at
# 16 (backends/verbs/README.md, "Two hosts"); retries still come, from the NAKs of real losses.
#
# Each guest captures the lossy case's RoCE packets on eth0 (tcpdump, 128 bytes of each: the
# headers), into $GUEST_OUT/{a,b}/lossy.pcap.
#
# Then tests/verbs/two_hosts.py compares each with the simulator running the same scenario (the
# lossy one with faults.loss at the same rate): outcomes and counts, never timing; it asserts the
# traffic crossed the link (rxe's and eth0's packet counters in both guests) and that netem
# dropped rxe's packets and rxe retransmitted them, and reads the captures with `prepost trace
# import`: every retransmission repeats its original (the race above would show there first,
# named). Ends with "two hosts: N passed, N failed".
#
# Exit status: 0 all passed, 1 something failed, 10 the guests cannot run here (the reason is
# printed). Environment: TWO_HOSTS_LOSS (percent, 2), GUEST_TIMEOUT (per guest, 600 s),
# GUEST_OUT (where both guests' files go; a temp folder by default).
#
# Inside each guest it runs itself as `two-hosts.sh --guest RANK BUILD_DIR LOSS`.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
# NAME SCENARIO LOSS SETS: SETS are scenario keys for both backends, k=v[,k=v...], or - for none
CASES=("p2p rnr-slow-consumer-eager 0 -" "ring rnr-slow-consumer-ring 0 -"
  "lossy lossy ${TWO_HOSTS_LOSS:-2} qp.timeout=16")
COORD=169.254.77.1 # guest A's address on the link (tools/guest/pair)
PORT0=18520        # the coordinator's port of the first case; one port per case

# snapshot FILE: rxe0's hw_counters, eth0's statistics and its qdiscs (tc -s -j). Read with
# bash's own `read`: under emulation each process started from the 9p root costs about a second.
snapshot() {
  local f v
  sleep 0.2 # the kernel caches hw_counters for their lifespan (10 ms)
  {
    for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do
      [[ ${f##*/} != lifespan ]] && read -r v <"$f" && echo "rxe.${f##*/} $v"
    done
    for f in /sys/class/net/eth0/statistics/*; do
      read -r v <"$f" && echo "eth0.${f##*/} $v"
    done
    echo "qdisc $(tc -s -j qdisc show dev eth0)"
  } >"$1"
}

# netem PERCENT: drop that share of eth0's outgoing RoCE v2 packets (UDP port 4791): a prio
# qdisc whose third band is netem, and a u32 filter that sends RoCE there; the rest (the TCP
# bootstrap, ARP) takes the second band, untouched
netem() {
  modprobe -a sch_prio sch_netem cls_u32 &&
    tc qdisc add dev eth0 root handle 1: prio &&
    tc qdisc add dev eth0 parent 1:3 handle 30: netem loss "$1%" &&
    tc filter add dev eth0 parent 1: protocol ip prio 1 u32 \
      match ip protocol 17 0xff match ip dport 4791 0xffff flowid 1:3
}

if [[ ${1:-} == --guest ]]; then
  R=$2 B=$3
  P=$B/tools/prepost
  port=$PORT0
  ip -br addr show eth0
  for c in "${CASES[@]}"; do
    read -r name sc loss sets <<<"$c"
    [[ $name == lossy ]] && loss=$4
    set_args=()
    [[ $sets != - ]] && for kv in ${sets//,/ }; do set_args+=(--set "$kv"); done
    if [[ $loss != 0 ]]; then
      netem "$loss" >"$GUEST_OUT/$name.netem.txt" 2>&1
      echo "rank $R: $name: tc netem loss $loss% on eth0 for UDP 4791 (status $?)"
    fi
    cap=
    if [[ $loss != 0 ]]; then # the lossy case's packets, for two_hosts.py's import check
      tcpdump -i eth0 -s 128 -U -w "$GUEST_OUT/$name.pcap" udp port 4791 \
        2>"$GUEST_OUT/$name.tcpdump" &
      cap=$!
      for _ in $(seq 50); do # until it listens (a second or two under emulation)
        grep -q "listening on" "$GUEST_OUT/$name.tcpdump" 2>/dev/null && break
        sleep 0.1
      done
    fi
    snapshot "$GUEST_OUT/$name.before"
    t0=$EPOCHREALTIME
    OMPI_COMM_WORLD_RANK=$R OMPI_COMM_WORLD_SIZE=2 timeout 300 "$P" run "models/scenarios/$sc.yaml" \
      --backend verbs --coordinator "$COORD:$port" --boot-timeout 60s --timeout 180s --json "${set_args[@]}" \
      >"$GUEST_OUT/$name.json" 2>"$GUEST_OUT/$name.stderr"
    rc=$?
    t1=$EPOCHREALTIME
    echo "$rc" >"$GUEST_OUT/$name.rc"
    snapshot "$GUEST_OUT/$name.after"
    if [[ -n $cap ]]; then # (the snapshot's 0.2 s let the last packets reach it)
      kill -INT "$cap"
      wait "$cap"
    fi
    echo "rank $R: $name ($sc): exit $rc after $(((${t1/./} - ${t0/./}) / 1000)) ms (prepost's whole run)"
    ((rc == 0)) || sed 's/^/    /' "$GUEST_OUT/$name.stderr" | tail -5
    port=$((port + 1))
  done
  exit 0 # the verdicts are two_hosts.py's, on the host
fi

B=${1:-build/default}
P=$B/tools/prepost
[[ -x $P ]] || { echo "two hosts: FAIL: $P is not built"; exit 1; }
OUT=${GUEST_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/prepost-two-hosts.XXXXXX")}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 1
SECRET=$(mktemp -d "${TMPDIR:-/tmp}/prepost-secret.XXXXXX") || exit 1
(umask 077 && head -c 32 /dev/urandom >"$SECRET/job.secret") || exit 1
loss=${TWO_HOSTS_LOSS:-2}
[[ $loss =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "two hosts: TWO_HOSTS_LOSS must be a percentage" >&2; exit 2; }
PREPOST_JOB_SECRET_FILE=$SECRET/job.secret GUEST_OUT=$OUT GUEST_TIMEOUT=${GUEST_TIMEOUT:-600} \
  tools/guest/pair tests/verbs/two-hosts.sh --guest 0 "$B" "$loss" \
  -- tests/verbs/two-hosts.sh --guest 1 "$B" "$loss"
prc=$?
rm -rf "$SECRET"
((prc == 10)) && exit 10
((prc == 0)) || echo "two hosts: the pair ended with status $prc"
cases=()
for c in "${CASES[@]}"; do cases+=("${c// /:}"); done
/usr/bin/python3 tests/verbs/two_hosts.py "$P" --out "$OUT" --loss "$loss" "${cases[@]/#/--case=}"
rc=$?
((prc == 0)) || rc=1
exit "$rc"
