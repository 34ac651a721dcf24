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
# zero_checkpoint FILE ENTRY SHAPES: a checkpoint of zero float32 tensors, as `kiln train
# --save` writes one but without digests: ENTRY is its config entry ({"model": NAME, "config":
# {...}, ...}) and SHAPES its tensors ({"fc1.weight": [1, 784], ...}), both JSON.
zero_checkpoint() {
  python3 - "$@" <<'PY'
import json, struct, sys
path, entry, shapes = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
kiln = {"format_version": 1, "kiln_version": "0.1.0", "contents": "model", "config": entry}
header, offset = {"__metadata__": {"format": "pt", "kiln": json.dumps(kiln)}}, 0
for name, shape in shapes.items():
    count = 1
    for d in shape:
        count *= d
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + 4 * count]}
    offset += 4 * count
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + bytes(offset))
PY
}
