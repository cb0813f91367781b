#!/usr/bin/env bash
# tests/fleet/slurm.sh PREPOST: a real one-node Slurm cluster for tools/explore-slurm. Starts a
# private munged (its own key and socket), slurmctld and slurmd (foreground daemons, no systemd)
# on a slurm.conf generated in a temporary directory with free ports, submits 4 shards of 48 seeds
# as a job array with a merge job after it, waits, and checks that the merged summary equals an
# unsharded run of the same seeds (tests/fleet/compare.py). The daemons are stopped at the end.
# Needs root (slurmd runs jobs as their user) and Debian's slurm-wlm and munge (tools/lib.sh).
set -euo pipefail
prepost=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

skip() { echo "SKIP: $*"; exit 77; }
missing=()
for c in munged mungekey slurmctld slurmd sbatch sinfo; do
  command -v "$c" >/dev/null || missing+=("$c")
done
if ((${#missing[@]})); then
  # A fresh machine: install them the way CI does (tools/lib.sh PP_PACKAGES), if we may.
  # shellcheck source=tools/lib.sh
  if [[ $(id -u) == 0 ]] && (cd "$src" && source tools/lib.sh && pp_setup slurm-wlm munge) >&2; then
    missing=()
  else
    skip "${missing[*]} not found and slurm-wlm/munge could not be installed (run as root: apt-get install -y slurm-wlm munge)"
  fi
fi
[[ $(id -u) == 0 ]] || skip "a one-node Slurm cluster here needs root (slurmd, SlurmUser=root)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/prepost-fleet-slurm.XXXXXX")
chmod 755 "$tmp" # munged wants its socket's directory searchable by all
pids=()
stop() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
fail() {
  echo "FAIL: $*"
  local f
  for f in "$tmp"/*.log "$tmp"/run/*.log; do
    [[ -f $f ]] && { echo "---- $f"; tail -n 20 "$f"; }
  done
  stop
  exit 1
}
trap 'stop; rm -rf "$tmp"' EXIT

# munge: a key of our own, a socket of our own
mungekey --create --keyfile="$tmp/munge.key"
munged -F -f --socket="$tmp/munge.sock" --key-file="$tmp/munge.key" --log-file="$tmp/munged.log" \
  --pid-file="$tmp/munged.pid" --seed-file="$tmp/munged.seed" >"$tmp/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [[ -S $tmp/munge.sock ]] && break; sleep 0.1; done
[[ -S $tmp/munge.sock ]] || fail "munged did not start"

read -r ctld_port d_port < <(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("", 0))
print(*[x.getsockname()[1] for x in s])')
host=$(hostname -s)
mkdir -p "$tmp/state" "$tmp/spool"
cat >"$tmp/slurm.conf" <<CONF
ClusterName=prepost
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
AuthType=auth/munge
AuthInfo=socket=$tmp/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=prepost Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$tmp/slurm.conf
slurmctld -D -i -f "$SLURM_CONF" >"$tmp/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$host" >"$tmp/slurmd.out" 2>&1 &
pids+=($!)
state=
for _ in $(seq 100); do
  state=$(sinfo -h -o %t 2>/dev/null || true)
  [[ $state == idle ]] && break
  sleep 0.3
done
[[ $state == idle ]] || fail "the node is not idle after 30 s (sinfo: '$state')"
echo "slurm: one-node cluster up ($host, slurmctld :$ctld_port, slurmd :$d_port)"

opts=(--protocol naive --no-shrink --max-messages 50)
rc=0
"$src/tools/explore-slurm" --out "$tmp/run" --shards 4 --from 7 --seeds 48 --prepost "$prepost" \
  --wait -- "${opts[@]}" || rc=$?
((rc == 1)) || fail "explore-slurm exited $rc, expected 1 (failures found and merged)"
for k in 1 2 3 4; do
  grep -q "shard $k/4" "$tmp/run/shard-$k.log" || fail "array task $k did not run shard $k/4"
done
rc=0
"$prepost" explore --from 7 --seeds 48 --json --out "$tmp/all" "${opts[@]}" >"$tmp/all.log" || rc=$?
((rc == 1)) || fail "the unsharded run exited $rc"
/usr/bin/python3 "$src/tests/fleet/compare.py" "$tmp/all/summary.json" "$tmp/run/merged/summary.json" 4 ||
  fail "merged != unsharded"
