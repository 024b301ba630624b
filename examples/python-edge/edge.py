"""A minimal IOP Edge in Python, written from PROTOCOL.md, proto/iop/control.proto and
proto/iop/limits.toml alone: hello, heartbeats and liveness, status with paging,
load updates pushed on change (with --load-churn its providers' in_flight moves),
commands (edge.ping) with idempotency and replay after a reconnect, GoAway and
retry_after, the per-field caps, and node addresses and tokens that never leave it.

    python3 -m grpc_tools.protoc -I proto --python_out=/tmp/pb proto/iop/control.proto
    python3 examples/python-edge/edge.py --control-plane 127.0.0.1:7700 \\
        --edge-id py-edge-1 --config examples/python-edge/nodes.toml --pb-dir /tmp/pb
"""
import argparse, os, random, socket, struct, sys, time, tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
LIMITS = tomllib.load(open(os.path.join(HERE, "../../proto/iop/limits.toml"), "rb"))
L = {name: row["value"] for name, row in LIMITS["limits"].items()}
FIELDS = LIMITS["fields"]
ID_RE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


class ProtocolError(Exception):
    """The Control Plane broke a rule: GoAway{PROTOCOL_ERROR}, then close (§2)."""


class Closed(Exception):
    """The session is over; `retry_after` (s) is the earliest next dial."""

    def __init__(self, why, retry_after=0.0):
        super().__init__(why)
        self.retry_after = retry_after


def check_caps(msg, pb):
    """Refuses a decoded message over a cap of limits.toml (§7), recursively."""
    for field, value in msg.ListFields():
        name = f"iop.{msg.DESCRIPTOR.name}.{field.name}"
        cap = FIELDS.get(name, {})
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            if len(value) > cap.get("max_items", 1 << 32):
                raise ProtocolError(f"{name}: {len(value)} entries")
            for k, v in value.items():
                for part, text in ((".key", k), (".value", v)):
                    if len(text.encode()) > FIELDS.get(name + part, {}).get("max_bytes", 1 << 32):
                        raise ProtocolError(f"{name}{part} too long")
            continue
        repeated = field.label == field.LABEL_REPEATED
        items = value if repeated else [value]
        if repeated and len(items) > cap.get("max_items", 1 << 32):
            raise ProtocolError(f"{name}: {len(items)} elements")
        for item in items:
            if isinstance(item, (str, bytes)):
                size = len(item.encode() if isinstance(item, str) else item)
                if size > cap.get("max_bytes", 1 << 32):
                    raise ProtocolError(f"{name}: {size} bytes")
            elif hasattr(item, "ListFields"):
                check_caps(item, pb)


class Edge:
    def __init__(self, args, pb):
        self.pb, self.edge_id, self.addr = pb, args.edge_id, args.control_plane
        config = tomllib.load(open(args.config, "rb"))
        self.nodes = sorted(config["nodes"], key=lambda n: n["id"])  # never sent: address, token
        self.operations = ["edge.ping"]
        self.instance = "%016x" % random.getrandbits(64)
        self.held = {}  # command_id -> [request bytes, response, latest event, finished at]
        self.node_sequence = 0
        self.backoff = 0.25
        self.churn = args.load_churn
        self.in_flight = {}  # (node id, provider id) -> requests running

    # ---- framing ---------------------------------------------------------------
    def send(self, **body):
        env = self.pb.Envelope(correlation_id=body.pop("correlation_id", 0), **body)
        data = env.SerializeToString()
        if len(data) > self.peer_max:  # never send what the peer must refuse (§4.6)
            print(f"not sent: {len(data)} bytes over the peer's limit", file=sys.stderr)
            return
        self.sock.sendall(struct.pack(">I", len(data)) + data)

    def recv(self, timeout):
        """The next envelope, or None when `timeout` passes with no byte."""
        self.sock.settimeout(timeout)
        while True:
            if len(self.buf) >= 4:
                (n,) = struct.unpack(">I", self.buf[:4])
                if n == 0 or n > self.max_in:
                    raise ProtocolError(f"frame length {n}")
                if len(self.buf) >= 4 + n:
                    body, self.buf = self.buf[4:4 + n], self.buf[4 + n:]
                    env = self.pb.Envelope()
                    try:
                        env.ParseFromString(body)
                    except Exception as e:
                        raise ProtocolError(f"undecodable frame: {e}")
                    check_caps(env, self.pb)
                    return env
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return None
            if not chunk:
                raise Closed("the Control Plane closed the connection")
            self.buf += chunk
            self.last_heard = time.monotonic()

    # ---- one session -------------------------------------------------------------
    def session(self):
        host, port = self.addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.buf, self.max_in, self.peer_max = b"", L["PRE_HELLO_MAX_FRAME_LEN"], L["PRE_HELLO_MAX_FRAME_LEN"]
        self.last_heard = time.monotonic()
        self.evict()
        running = sorted(i for i, h in self.held.items() if h[3] is None)
        finished = sorted((i for i, h in self.held.items() if h[3] is not None), key=lambda i: -self.held[i][3])
        self.send(hello_request=self.pb.EdgeHelloRequest(
            edge_id=self.edge_id, protocol_version=1, software_version="python-edge 0.1",
            operations=self.operations, metadata={"iop.instance_id": self.instance},
            inflight_command_ids=running + finished, load_updates=True))
        deadline = time.monotonic() + L["DEFAULT_HELLO_TIMEOUT"] / 1000
        while True:
            env = self.recv(max(0.01, deadline - time.monotonic()))
            if env is None:
                raise Closed("no hello response in time")
            kind = env.WhichOneof("body")
            if kind == "go_away":
                raise Closed(f"GoAway {env.go_away.reason}", env.go_away.retry_after_ms / 1000)
            if kind != "hello_response":
                raise ProtocolError(f"{kind} before the hello response")
            r = env.hello_response
            if not r.accepted:
                raise Closed(f"hello rejected {r.reject_reason}: {r.message}", r.retry_after_ms / 1000)
            break
        if r.protocol_version > 1:
            raise ProtocolError(f"accepted with protocol version {r.protocol_version}")
        self.peer_max = r.max_frame_len or L["DEFAULT_MAX_FRAME_LEN"]
        if self.peer_max < L["MIN_MAX_FRAME_LEN"]:
            raise ProtocolError(f"max_frame_len {self.peer_max} below 64 KiB")
        self.max_in = L["DEFAULT_MAX_FRAME_LEN"]
        ms = r.heartbeat_interval_ms or L["DEFAULT_HEARTBEAT_INTERVAL"]
        self.interval = min(max(ms, L["MIN_HEARTBEAT_INTERVAL"]), L["MAX_HEARTBEAT_INTERVAL"]) / 1000
        self.accepted_at = time.monotonic()
        self.node_sequence = 0
        # Load updates (§4.8): none until a full status is answered, then changes only.
        push_ms = r.load_update_interval_ms
        self.push_every = min(max(push_ms, L["MIN_LOAD_UPDATE_INTERVAL"]), L["MAX_LOAD_UPDATE_INTERVAL"]) / 1000 if push_ms else None
        self.based, self.reported, self.load_sequence, self.next_push = False, {}, 0, 0.0
        self.node_event("EDGE_READY")
        for command_id in sorted(self.held):  # replay the latest event of each (§4.4)
            self.send(command_event=self.held[command_id][2])
        beat, next_beat = 0, time.monotonic()
        while True:
            now = time.monotonic()
            if now - self.last_heard > L["LIVENESS_INTERVALS"] * self.interval:
                self.go_away("HEARTBEAT_TIMEOUT", "the control plane went silent")
                raise Closed("the control plane went silent")
            if now >= next_beat:
                beat += 1
                self.send(heartbeat=self.pb.Heartbeat(sequence=beat, sent_at_unix_ms=int(time.time() * 1000)))
                next_beat = now + self.interval
            if self.churn and random.random() < 0.2:
                self.churn_load()
            if self.based and self.push_every and now >= self.next_push and self.push():
                self.next_push = now + self.push_every
            wake = min(next_beat, self.last_heard + 3 * self.interval, now + 0.05 if self.churn else now + 1)
            env = self.recv(max(0.01, wake - now))
            if env is not None:
                self.handle(env)

    def handle(self, env):
        kind = env.WhichOneof("body")
        if kind is None or kind == "heartbeat_ack":
            return  # an unknown body after the hello is ignored (§3)
        if kind == "go_away":
            raise Closed(f"GoAway {env.go_away.reason}", env.go_away.retry_after_ms / 1000)
        if kind == "status_request":
            return self.status(env.correlation_id, env.status_request)
        if kind == "command_request":
            return self.command(env.command_request)
        raise ProtocolError(f"unexpected {kind} from the Control Plane")

    def node_event(self, kind):
        self.node_sequence += 1
        self.send(node_event=self.pb.EdgeNodeEvent(
            edge_id=self.edge_id, kind=self.pb.NodeEventKind.Value("NODE_EVENT_KIND_" + kind),
            sequence=self.node_sequence, occurred_at_unix_ms=int(time.time() * 1000)))

    def go_away(self, reason, message):
        try:
            self.send(go_away=self.pb.GoAway(reason=self.pb.GoAwayReason.Value("GO_AWAY_REASON_" + reason), message=message[:4096]))
        except OSError:
            pass

    # ---- status (§4.3, §5.2) ---------------------------------------------------------
    def status(self, correlation_id, req):
        pb, wanted, after = self.pb, set(req.node_ids), req.start_after_node_id
        nodes = []
        for n in self.nodes:
            if (wanted and n["id"] not in wanted) or (after and n["id"] <= after):
                continue
            ready = n.get("ready", True)
            providers = []
            for p in n["providers"]:
                numbers = self.numbers(n, p)
                del numbers["node_connected"]
                providers.append(pb.ProviderSnapshot(
                    provider_id=p["id"], category=pb.ProviderCategory.Value("PROVIDER_CATEGORY_" + p["category"].upper()),
                    models=p.get("models", []), **numbers))
            nodes.append(pb.EdgeNodeSnapshot(
                node_id=n["id"], connected=ready, state=pb.NODE_STATE_READY if ready else pb.NODE_STATE_DISCONNECTED,
                generation=1, labels=n.get("labels", {}), provider_snapshots=providers,
                config=pb.NodeConfigSummary(revision="1", provider_ids=[p["id"] for p in n["providers"]])))
        resp = pb.EdgeStatusResponse(edge_id=self.edge_id, nodes=nodes,
                                     observed_at_unix_ms=int(time.time() * 1000), registry_revision=1)
        while resp.ByteSize() + 16 > self.peer_max and resp.nodes:  # fit the peer's frame (§4.3)
            del resp.nodes[-1]
            resp.truncated = True
        self.send(correlation_id=correlation_id, status_response=resp)
        by_id = {n["id"]: n for n in self.nodes}
        for s in resp.nodes:  # what this session was told last, per provider
            for p in by_id[s.node_id]["providers"]:
                self.reported[(s.node_id, p["id"])] = self.numbers(by_id[s.node_id], p)
        if not wanted and not resp.truncated:
            self.based = True

    # ---- load (§5.2) and its updates (§4.8) -------------------------------------------
    def numbers(self, n, p):
        """A provider's §5.2 numbers: zeros and not eligible when offline or not ready."""
        ready = n.get("ready", True)
        if not ready or p.get("offline", False):
            return dict(status=self.pb.PROVIDER_STATUS_UNAVAILABLE, health=self.pb.PROVIDER_HEALTH_OFFLINE,
                        admission_eligible=False, node_connected=ready)
        busy = self.in_flight.get((n["id"], p["id"]), 0)
        return dict(status=self.pb.PROVIDER_STATUS_AVAILABLE, health=self.pb.PROVIDER_HEALTH_HEALTHY,
                    capacity=p["capacity"], long_context_capacity=p.get("long_context_capacity", 0),
                    in_flight=busy, admission_eligible=busy < p["capacity"], node_connected=True)

    def churn_load(self):
        """A request starts or ends on a random online provider (--load-churn): always a change."""
        online = [(n, p) for n in self.nodes if n.get("ready", True)
                  for p in n["providers"] if not p.get("offline", False) and p["capacity"] > 0]
        if not online:
            return
        n, p = random.choice(online)
        key = (n["id"], p["id"])
        busy = self.in_flight.get(key, 0)
        step = 1 if busy == 0 else -1 if busy >= p["capacity"] else random.choice((-1, 1))
        self.in_flight[key] = busy + step

    def push(self):
        """One update with every provider whose numbers changed since last told; False: none."""
        changed = []
        for n in self.nodes:
            for p in n["providers"]:
                now = self.numbers(n, p)
                if self.reported.get((n["id"], p["id"])) != now:
                    changed.append(self.pb.ProviderLoad(node_id=n["id"], provider_id=p["id"], **now))
                    self.reported[(n["id"], p["id"])] = now
        if not changed:
            return False
        self.load_sequence += 1
        resync = len(changed) > L["MAX_LOAD_UPDATE_PROVIDERS"]
        self.send(load_update=self.pb.EdgeLoadUpdate(
            sequence=self.load_sequence, observed_at_unix_ms=int(time.time() * 1000),
            providers=[] if resync else changed, resync=resync))
        return True

    # ---- commands (§4.4, §6) ----------------------------------------------------------
    def reject(self, command_id, reason, message):
        self.send(command_response=self.pb.EdgeCommandResponse(
            command_id=command_id, accepted=False, message=message,
            reject_reason=self.pb.CommandRejectReason.Value("COMMAND_REJECT_REASON_" + reason)))

    def command(self, req):
        pb, cid = self.pb, req.command_id
        if not cid or len(cid.encode()) > L["MAX_ID_LEN"]:
            return self.reject(cid.encode()[:128].decode(errors="ignore"), "INVALID_COMMAND", "command_id must be 1-128 bytes")
        self.evict()
        if cid in self.held:
            request, response, latest, _ = self.held[cid]
            if request != req.SerializeToString(deterministic=True):
                return self.reject(cid, "INVALID_COMMAND", "command_id already used for a different request")
            self.send(command_response=response)
            return self.send(command_event=latest)
        if req.operation not in self.operations:
            return self.reject(cid, "UNKNOWN_OPERATION", f"operation {req.operation!r} is not offered")
        if req.target_selector not in ("", "*"):
            return self.reject(cid, "INVALID_SELECTOR", f"selector {req.target_selector[:200]!r}: edge.ping targets the Edge")
        if sum(1 for h in self.held.values() if h[3] is None) >= L["MAX_INFLIGHT_COMMANDS"]:
            return self.reject(cid, "BUSY", "too many commands in flight")
        response = pb.EdgeCommandResponse(command_id=cid, accepted=True)
        self.send(command_response=response)
        now_ms = int(time.time() * 1000)
        self.send(command_event=pb.EdgeCommandEvent(command_id=cid, phase=pb.COMMAND_PHASE_ACCEPTED, sequence=1, occurred_at_unix_ms=now_ms))
        done = pb.EdgeCommandEvent(command_id=cid, phase=pb.COMMAND_PHASE_SUCCEEDED, sequence=2,
                                   message="pong", occurred_at_unix_ms=now_ms)
        self.held[cid] = [req.SerializeToString(deterministic=True), response, done, time.monotonic()]
        self.send(command_event=done)

    def evict(self):
        """Forgets finished commands after the retention window, at most 1 024 kept."""
        keep = L["DEFAULT_COMMAND_RETENTION"] / 1000
        done = sorted((h[3], i) for i, h in self.held.items() if h[3] is not None)
        for at, i in done[: max(0, len(done) - L["MAX_RETAINED_COMMANDS"])]:
            del self.held[i]
        for at, i in done:
            if i in self.held and time.monotonic() - at > keep:
                del self.held[i]

    # ---- dialling for ever (§4.1, §4.2) -----------------------------------------------
    def run(self):
        while True:
            retry_after, began = 0.0, time.monotonic()
            self.accepted_at = None
            try:
                self.session()
            except ProtocolError as e:
                print(f"protocol error: {e}", file=sys.stderr)
                self.go_away("PROTOCOL_ERROR", str(e))
            except Closed as e:
                print(f"session ended: {e}", file=sys.stderr)
                retry_after = e.retry_after
            except OSError as e:
                print(f"connection: {e}", file=sys.stderr)
            finally:
                try:
                    self.sock.close()
                except (AttributeError, OSError):
                    pass
            healthy = self.accepted_at and time.monotonic() - self.accepted_at > L["LIVENESS_INTERVALS"] * self.interval
            self.backoff = L["DEFAULT_BACKOFF_BASE"] / 1000 if healthy else min(self.backoff * 2, L["DEFAULT_BACKOFF_MAX"] / 1000)
            time.sleep(max(retry_after, random.uniform(0, self.backoff)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--control-plane", required=True, help="HOST:PORT")
    ap.add_argument("--edge-id", required=True)
    ap.add_argument("--config", default=os.path.join(HERE, "nodes.toml"))
    ap.add_argument("--pb-dir", required=True, help="where protoc wrote iop/control_pb2.py")
    ap.add_argument("--load-churn", action="store_true", help="requests start and end on its providers")
    args = ap.parse_args()
    if not args.edge_id or len(args.edge_id) > 128 or not set(args.edge_id) <= ID_RE:
        sys.exit("--edge-id must match [A-Za-z0-9._-]{1,128}")
    sys.path.insert(0, args.pb_dir)
    from iop import control_pb2
    Edge(args, control_pb2).run()


if __name__ == "__main__":
    main()
