# shellcheck shell=bash
# Shared helpers for tools/* and .ci/run. Source it from the repository root:
#
#   cd "$(dirname "${BASH_SOURCE[0]}")/.." && source tools/lib.sh
#
# pp_setup [EXTRA_PACKAGE...]  install the Debian packages the project needs, if any are missing
# pp_build PRESET [TARGET...]  configure build/PRESET once (CMakePresets.json), then build it
# pp_header TEXT / pp_err TEXT  output helpers
#
# Environment: PP_SKIP_SETUP=1 skips pp_setup (machines that are not Debian, or provisioned
# another way).

# What a fresh Debian 12 machine needs to build and test prepost. python3 parses the JSON that
# tools/run and tools/bench-sim read. libibverbs-dev builds the verbs backend (no RDMA hardware
# needed); ibverbs-providers holds the drivers it loads at run time (rxe in the test guest).
PP_PACKAGES=(cmake ninja-build pkg-config gcc g++ libsimgrid-dev libcriterion-dev libyaml-dev
             gcovr python3 libibverbs-dev ibverbs-providers)

# tshark decodes the pcap export in tests/test_export.c (noninteractive: no setuid dumpcap).
PP_PACKAGES+=(tshark)
# localedef and the locale sources: tests/CMakeLists.txt compiles de_DE.UTF-8 for test_param's
# decimal-comma test.
PP_PACKAGES+=(locales)
# headless Chromium renders the SVG export and Pillow reads its screenshot
# (tests/test_export.c: svg_renders_in_a_browser).
PP_PACKAGES+=(chromium python3-pil)

# clang and its libFuzzer runtime build the fuzz targets of tests/fuzz/run, which ctest runs for
# a bounded time (fuzz_trace_libfuzzer, fuzz_wire_libfuzzer); without them those tests say
# "skipped".
PP_PACKAGES+=(clang libclang-rt-14-dev)

# libsodium authenticates the verbs backend's TCP bootstrap (per-job secret, HMACs):
# backends/verbs/boot.c.
PP_PACKAGES+=(libsodium-dev)

# libjansson-dev reads and writes the explorer's JSON summaries (`prepost explore --json`, `merge`);
# libzstd-dev compresses traces in the CLI's sink (zstd, the CLI, checks them in the tests).
PP_PACKAGES+=(libjansson-dev libzstd-dev zstd)

# The fleet recipes' tests: tools/explore-slurm runs a Slurm job array on a one-node slurmctld +
# slurmd that tests/fleet/slurm.sh starts (munge authenticates them), tools/explore-parallel runs
# shards with GNU parallel.
PP_PACKAGES+=(slurm-wlm munge parallel)

# Started by a cluster's launcher: libpmix-dev is the PMIx client the verbs backend links
# (backends/verbs/pmix.c: rank, size and connection information from mpirun or srun --mpi=pmix);
# openmpi-bin's mpirun launches prepost ranks in the guest suite's mpirun step (tests/verbs/suite.sh).
PP_PACKAGES+=(libpmix-dev openmpi-bin)

# libpcap reads captures (pcap, pcapng) for `prepost trace import --pcap` (tools/import/import.c).
PP_PACKAGES+=(libpcap-dev)

# prepost mpirun's MPI library (tools/mpi/) is compiled against Debian's MPICH 4.0.2 mpi.h
# (libmpich-dev) to have its ABI; mpicc.mpich (mpich) builds the MPI test programs (tests/mpi/).
PP_PACKAGES+=(libmpich-dev mpich)
# libopenmpi-dev (mpicc.openmpi) builds tests/mpi/osu.c for Open MPI + UCX, which tools/bench-mpi
# --guest runs next to prepost mpirun --backend verbs and MPICH.
PP_PACKAGES+=(libopenmpi-dev)

# The interpreter of the python3 package (not a pyenv/venv shim that may shadow it on PATH).
PP_PYTHON=/usr/bin/python3
[[ -x $PP_PYTHON ]] || PP_PYTHON=python3

pp_err() { printf 'tools/%s: error: %s\n' "${0##*/}" "$*" >&2; }

pp_header() { printf '\n==== %s ====\n' "$*"; }

# Prints the packages among "$@" that dpkg does not report as installed, one per line.
pp_missing_packages() {
  local pkg status
  local -A have=()
  while read -r pkg status; do
    [[ $status == installed ]] && have[$pkg]=1
  done < <(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "$@" 2>/dev/null || true)
  for pkg in "$@"; do
    [[ -n ${have[$pkg]:-} ]] || printf '%s\n' "$pkg"
  done
}

# pp_setup [EXTRA_PACKAGE...]: installs whatever is missing of PP_PACKAGES and the extras. Silent
# when everything is there; one line naming what it installed otherwise.
pp_setup() {
  [[ ${PP_SKIP_SETUP:-0} == 1 ]] && return 0
  if ! command -v dpkg-query >/dev/null 2>&1; then
    pp_err "dpkg-query not found: pp_setup only knows Debian. Install the equivalents of:" \
           "${PP_PACKAGES[*]} $*, then rerun with PP_SKIP_SETUP=1"
    return 1
  fi
  local -a missing
  mapfile -t missing < <(pp_missing_packages "${PP_PACKAGES[@]}" "$@")
  ((${#missing[@]} == 0)) && return 0

  if [[ $(id -u) -ne 0 ]]; then
    pp_err "missing Debian packages: ${missing[*]}." \
           "Run this script as root, or install them first: sudo apt-get install -y ${missing[*]}"
    return 1
  fi

  local log
  log=$(mktemp "${TMPDIR:-/tmp}/pp_setup.XXXXXX")
  # apt-get update at most once per run, including nested scripts (exported flag).
  if [[ ${PP_APT_UPDATED:-0} != 1 ]]; then
    if ! apt-get update >"$log" 2>&1; then
      tail -n 20 "$log" >&2
      rm -f "$log"
      pp_err "apt-get update failed (output above)"
      return 1
    fi
    export PP_APT_UPDATED=1
  fi
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" \
       >>"$log" 2>&1; then
    tail -n 20 "$log" >&2
    rm -f "$log"
    pp_err "apt-get install ${missing[*]} failed (output above)"
    return 1
  fi
  rm -f "$log"

  local -a still
  mapfile -t still < <(pp_missing_packages "${missing[@]}")
  if ((${#still[@]} > 0)); then
    pp_err "still not installed after apt-get install: ${still[*]}"
    return 1
  fi
  [[ -x /usr/bin/python3 ]] && PP_PYTHON=/usr/bin/python3
  printf 'pp_setup: installed %s\n' "${missing[*]}"
}

# pp_build PRESET [TARGET...]: configures build/PRESET the first time (later changes to
# CMakeLists.txt or CMakePresets.json make `cmake --build` re-run the configure step by itself),
# then builds everything, or only the given targets.
pp_build() {
  local preset=$1
  shift
  if [[ ! -f build/$preset/build.ninja ]]; then
    if ! cmake --preset "$preset"; then
      pp_err "configuring preset '$preset' failed"
      return 1
    fi
  fi
  local -a targets=()
  (($# > 0)) && targets=(--target "$@")
  if ! cmake --build --preset "$preset" "${targets[@]}"; then
    pp_err "building preset '$preset' failed"
    return 1
  fi
}
