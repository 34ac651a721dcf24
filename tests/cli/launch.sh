#!/usr/bin/env bash
# `kiln launch` end to end: a job of two "machines" (two launchers on this one, with
# --nnodes 2 and a shared --master) trains example_data_parallel to identical weights, and a
# failing rank fails the job with its status, naming it.
# Usage: launch.sh KILN_BINARY EXAMPLE_DATA_PARALLEL_BINARY
set -euo pipefail
kiln="$1"
example="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A free port for node 0's rendezvous store.
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$kiln" launch --nnodes 2 --node-rank 1 --master "127.0.0.1:$port" --nproc 1 -- "$example" \
  > "$tmp/node1.txt" 2>&1 &
node1=$!
set +e
timeout 120 "$kiln" launch --nnodes 2 --node-rank 0 --master "127.0.0.1:$port" --nproc 1 -- "$example" \
  > "$tmp/node0.txt" 2>&1
rc0=$?
wait "$node1"
rc1=$?
set -e
[ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ] ||
  fail "two nodes: exit $rc0 and $rc1: $(cat "$tmp/node0.txt" "$tmp/node1.txt")"
grep -q '^\[rank 0\] data_parallel rank 0: all checks passed' "$tmp/node0.txt" || fail "node 0: $(cat "$tmp/node0.txt")"
grep -q '^\[rank 1\] data_parallel rank 1: all checks passed' "$tmp/node1.txt" || fail "node 1: $(cat "$tmp/node1.txt")"

# Rank 1 exits with status 3: the job fails with 3 and says which rank.
set +e
"$kiln" launch --nproc 2 --grace-ms 200 -- sh -c 'if [ "$KILN_RANK" = 1 ]; then exit 3; fi; sleep 30' \
  > "$tmp/fail.txt" 2>&1
rc=$?
set -e
[ "$rc" -eq 3 ] || fail "a failing rank: exit $rc: $(cat "$tmp/fail.txt")"
grep -q "kiln launch: rank 1 (pid [0-9]*) exited with status 3" "$tmp/fail.txt" || fail "no rank named: $(cat "$tmp/fail.txt")"
echo "launch.sh: all passed"
