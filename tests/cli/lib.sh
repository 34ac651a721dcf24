# Helpers the `kiln` CLI test scripts share; source it after setting $kiln (the binary).
# Makes $tmp, a temporary directory removed on exit.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
# has FILE TEXT WHAT: FILE contains TEXT, else fail naming WHAT and showing FILE.
has() { grep -qF -- "$2" "$1" || fail "$3: '$2' missing from $(cat "$1")"; }
# run NAME ARGS...: runs kiln with stdout+stderr in $tmp/NAME.txt, the exit status in $rc.
run() {
  local name="$1"; shift
  set +e
  "$kiln" "$@" > "$tmp/$name.txt" 2>&1; rc=$?
  set -e
}
# refused NAME TEXT ARGS...: kiln ARGS exits with 1 and prints TEXT.
refused() {
  local name="$1" text="$2"; shift 2
  run "$name" "$@"
  [ "$rc" -eq 1 ] || fail "$name: exit $rc (expected 1): $(cat "$tmp/$name.txt")"
  has "$tmp/$name.txt" "$text" "$name"
}
