# Sourced by run.sh, trace.sh and explore.sh: the options they share, their temporary folder and
# the --expect check.
#   flags="--once" valued="--hang-rc"   # the script's own options, before sourcing is fine
#   source opts.sh; parse_opts run.sh "$@"; set -- "${rest[@]}"
# --rc N (rc_want, default 0) and --expect REGEX (repeatable: expects) for every script; a flag of
# $flags sets opt[NAME]=1, an option of $valued takes its value into opt[NAME] (NAME without the
# dashes); `--` ends the options, what follows is in rest. An unknown option: exit 2.
rc_want=0
expects=()
rest=()
declare -A opt=()
parse_opts() {
  local me=$1
  shift
  while (($#)); do
    case $1 in
      --rc) rc_want=$2; shift 2 ;;
      --expect) expects+=("$2"); shift 2 ;;
      --) shift; break ;;
      *)
        if [[ " ${flags:-} " == *" $1 "* ]]; then
          opt[${1#--}]=1; shift
        elif [[ " ${valued:-} " == *" $1 "* ]]; then
          opt[${1#--}]=$2; shift 2
        else
          echo "$me: unknown option $1" >&2; exit 2
        fi ;;
    esac
  done
  rest=("$@")
}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
# check_expects FILE...: every --expect pattern must match a line of the files (grep -E); prints
# FAIL for each that does not, returns 1 then
check_expects() {
  local e bad=0
  for e in "${expects[@]}"; do
    if ! cat "$@" | grep -Eq -- "$e"; then
      echo "FAIL: no line matches '$e'"; bad=1
    fi
  done
  return $bad
}
