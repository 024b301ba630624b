#!/usr/bin/env bash
# Checks the admin API against its OpenAPI document (iop-server/src/admin/http/openapi.json)
# with schemathesis, on a live iop-control-plane with a simulated Edge: no 5xx, every
# status code, content type and body as documented. Usage: scripts/schemathesis.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-90}"
version="4.32.5"

if ! schemathesis --version 2>/dev/null | grep -q "$version"; then
    python3 -m pip install --quiet --disable-pip-version-check "schemathesis==$version"
fi
cargo build -q --locked -p iop-server --bin iop-control-plane --bin iop-edge
# Where cargo put them: CARGO_TARGET_DIR, a `build.target-dir` in a cargo config, or target/.
target_dir="$(cargo metadata --format-version 1 --no-deps --locked |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
bin="$target_dir/debug"
work="$(mktemp -d)"
cp_pid=""
edge_pid=""
cleanup() {
    [ -n "$edge_pid" ] && kill "$edge_pid" 2>/dev/null || true
    [ -n "$cp_pid" ] && kill "$cp_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

"$bin/iop-control-plane" --listen 127.0.0.1:0 --admin 127.0.0.1:0 --log-level warn \
    >"$work/cp.out" 2>"$work/cp.err" &
cp_pid=$!
for _ in $(seq 100); do
    grep -q "listening" "$work/cp.out" 2>/dev/null && break
    sleep 0.1
done
edges=$(sed -n 's/.*edges=\([^ ]*\).*/\1/p' "$work/cp.out")
admin=$(sed -n 's/.*admin=\([^ ]*\).*/\1/p' "$work/cp.out")
[ -n "$admin" ] || { echo "the control plane did not start" >&2; cat "$work/cp.err" >&2; exit 1; }
"$bin/iop-edge" --control-plane "$edges" --edge-id edge-1 --config examples/edge.toml \
    --simulate --log-level warn >/dev/null 2>"$work/edge.err" &
edge_pid=$!
for _ in $(seq 100); do
    curl -fs "http://$admin/v1/edges/edge-1" | grep -q '"connected":true' && break
    sleep 0.1
done

# The event streams never end, so they are left out; the checks that judge whether a
# request should have been accepted cannot know which operations an Edge advertises.
cd "$work"
schemathesis run "http://$admin/v1/openapi.json" \
    --checks all \
    --exclude-checks positive_data_acceptance,negative_data_rejection \
    --exclude-path /v1/events \
    --exclude-path /v1/load/watch \
    --max-time "$seconds" \
    --seed 1
