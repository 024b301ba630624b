//! What one replica takes from another is bounded (PROTOCOL.md §8 "The engine's
//! contract"): a flood of routed requests holds no more tasks than the replica's cap
//! and is answered `busy` past it, a routed command waits no longer than the
//! replica's own bound whatever wait it names, and a replica that pages its views for
//! ever, or answers with what no replica writes, ends its listing.

mod cluster_support;

use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use cluster_support::*;
use iop_tokio::core::cp::DuplicatePolicy;
use iop_tokio::core::proto::{self, EdgeHelloRequest, Envelope};
use tokio::io::AsyncWriteExt;

/// Routed requests a replica of these tests answers at once.
const CAP: usize = 8;
/// The longest a routed command of these tests waits.
const MAX_WAIT: Duration = Duration::from_millis(500);
/// Routed commands of the flood.
const FLOOD: usize = 2_000;
/// The tests of this file one at a time: each floods or starves a replica, and a
/// bound one measures is not to be another's load.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A raw Edge `edge_id` on `node` that advertises `x.hang` and never answers a
/// command; its stream, and its session id once the hello is accepted.
async fn silent_edge(node: &Node, edge_id: &str) -> (tokio::net::TcpStream, u64) {
    let mut stream = tokio::net::TcpStream::connect(node.addr()).await.unwrap();
    let hello = Envelope::new(EdgeHelloRequest {
        edge_id: edge_id.into(),
        protocol_version: proto::PROTOCOL_VERSION,
        operations: vec!["x.hang".into()],
        ..Default::default()
    });
    let mut wire = Vec::new();
    proto::encode_frame(&hello, u32::MAX, &mut wire).unwrap();
    stream.write_all(&wire).await.unwrap();
    let session = eventually("the silent Edge's session", || {
        live_session(&node.cp(), edge_id)
    })
    .await;
    (stream, session)
}

fn error_code(reply: &async_nats::Message) -> String {
    reply
        .headers
        .as_ref()
        .and_then(|h| h.get("Iop-Error"))
        .map(|v| v.as_str().to_owned())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn a_flood_of_routed_requests_is_answered_busy_past_the_cap_and_waits_no_longer_than_the_bound()
 {
    let _alone = ONE_AT_A_TIME.lock().await;
    let nats = NatsServer::start_with_accounts();
    let a = node_with(&[&nats], "cp-a", DuplicatePolicy::Replace, |c| {
        c.max_routed_requests = CAP;
        c.max_routed_wait = MAX_WAIT;
    })
    .await;
    let (_edge, session) = silent_edge(&a, "edge-1").await;
    let tasks = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let before = tasks();

    // 2 000 commands at once, each asking to wait a million seconds for an Edge that
    // never answers, from a client on a runtime of its own: this runtime's tasks are
    // the replica's.
    let url = nats.url();
    let seed = nats.accounts().map(|a| a.replica.clone());
    let started = Instant::now();
    let flood = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            // Another replica: the replicas' credentials, a replica's inbox.
            let options = async_nats::ConnectOptions::new()
                .custom_inbox_prefix(iop_cluster::permissions::replica_inbox_prefix("flood"));
            let options = match seed {
                Some(seed) => options.nkey(seed),
                None => options,
            };
            let peer = options.connect(url).await.unwrap();
            let mut requests = tokio::task::JoinSet::new();
            for _ in 0..FLOOD {
                let peer = peer.clone();
                let request = routed_command(
                    "edge-1",
                    session,
                    "x.hang",
                    Some("1000000000"),
                    Duration::from_secs(20),
                );
                requests.spawn(
                    async move { peer.send_request("iop.cluster.cp-a.edge", request).await },
                );
            }
            let mut codes = std::collections::BTreeMap::<String, usize>::new();
            while let Some(reply) = requests.join_next().await {
                let reply = reply.unwrap().expect("every request answered");
                *codes.entry(error_code(&reply)).or_default() += 1;
            }
            codes
        })
    });
    let mut peak = 0;
    while !flood.is_finished() && started.elapsed() < WAIT {
        peak = peak.max(tasks().saturating_sub(before));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let codes = flood.join().unwrap();
    let took = started.elapsed();
    let count = |code: &str| codes.get(code).copied().unwrap_or(0);
    assert_eq!(count("busy") + count("timeout"), FLOOD, "{codes:?}");
    assert!(count("busy") >= FLOOD - 4 * CAP, "{codes:?}");
    assert!(count("timeout") >= 1, "{codes:?}");
    // Every wait was cut to the bound: all answered long before any named wait.
    assert!(took < MAX_WAIT * 20, "answered after {took:?}");
    assert!(
        peak <= CAP + 16,
        "the replica's tasks grew by {peak} under the flood"
    );
    a.stop().await;
}

/// A process answering as replica `ghost` (a live record names it for `edge-x`):
/// every views page it sends names a next page after the last, for ever, and every
/// other request gets an error no replica sends. Counts the requests it answered.
async fn ghost(nats: &NatsServer, a: &Node) -> std::sync::Arc<std::sync::atomic::AtomicUsize> {
    use futures_lite::StreamExt as _;
    let client = nats.connect().await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let mut requests = client.subscribe("iop.cluster.ghost.edge").await.unwrap();
    // The server knows the subscription before anyone can ask ghost anything: an
    // unflushed one answers the first page "no responders".
    client.flush().await.unwrap();
    // Only then the record that sends cp-a to it.
    let owners = js.get_key_value("iop-owners").await.unwrap();
    owners
        .put(
            "edge-x",
            br#"{"replica":"ghost","live":true}"#.to_vec().into(),
        )
        .await
        .unwrap();
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = answered.clone();
    tokio::spawn(async move {
        while let Some(request) = requests.next().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let after = request
                .headers
                .as_ref()
                .and_then(|h| h.get("Iop-After"))
                .map(|v| v.as_str().to_owned())
                .unwrap_or_default();
            let mut headers = HeaderMap::new();
            let body = match request.headers.as_ref().and_then(|h| h.get("Iop-Kind")) {
                Some(kind) if kind.as_str() == "views" => {
                    headers.insert("Iop-After", format!("{after}a").as_str());
                    // Its first page in this replica's schema, the next ones in a
                    // version it does not speak.
                    let schema = if after.is_empty() {
                        proto::cluster::SCHEMA
                    } else {
                        "iop.cluster.v9"
                    };
                    headers.insert("Iop-Schema", schema);
                    let view = proto::cluster::EdgeView {
                        edge_id: "edge-x".into(),
                        ..Default::default()
                    };
                    let page = proto::cluster::EdgeViewPage {
                        views: vec![view],
                        ..Default::default()
                    };
                    proto::Message::encode_to_vec(&page)
                }
                // A page of a list far past the limit asked, claiming a huge total.
                Some(kind) if kind.as_str() == "list" => {
                    headers.insert("Iop-Schema", proto::cluster::SCHEMA);
                    let view = proto::cluster::EdgeView {
                        edge_id: "edge-x".into(),
                        ..Default::default()
                    };
                    let page = proto::cluster::EdgeViewPage {
                        views: vec![view; 600],
                        total: u64::MAX,
                        more: true,
                    };
                    proto::Message::encode_to_vec(&page)
                }
                _ => {
                    headers.insert("Iop-Error", "owned-by-me");
                    headers.insert("Iop-Command-Id", "not an id");
                    vec![b'x'; 64 * 1024]
                }
            };
            let _ = client
                .publish_with_headers(request.reply.unwrap(), headers, body.into())
                .await;
        }
    });
    let router = a.replica.router();
    eventually("cp-a seeing ghost's record", || {
        router
            .other_replicas()
            .contains(&"ghost".to_owned())
            .then_some(())
    })
    .await;
    answered
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn a_replica_paging_for_ever_or_answering_what_no_replica_sends_is_bounded() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let nats = NatsServer::start_with_accounts();
    let a = node(&nats, "cp-a", DuplicatePolicy::Replace).await;
    let answered = ghost(&nats, &a).await;
    let router = a.replica.router();

    // One live record names ghost: its listing takes the pages that one needs, and
    // one of slack, then ends.
    let views = bounded("the fleet's views", router.remote_views()).await;
    let pages = answered.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        views.len() <= 3 && pages <= 3,
        "{} views in {pages} pages",
        views.len()
    );
    assert_eq!(
        views.len(),
        1,
        "ghost's first page is kept, its next of another schema not"
    );

    // A page of a list past the limit asked counts as no answer: ghost is named, none
    // of its views or its total taken.
    let list = bounded(
        "a page of the list",
        router.list_edges(&iop_tokio::fleet::EdgeFilter::default(), "", 10),
    )
    .await;
    assert_eq!(list.silent, vec!["ghost".to_owned()]);
    assert_eq!((list.edges.len(), list.total), (0, 0));

    // An error it makes up is passed on as `unavailable`, its message cut to the
    // protocol's text limit, its command id dropped.
    let e = bounded(
        "a status through ghost",
        router.status("edge-x", Vec::new()),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind.code(), "unavailable", "{e:?}");
    assert!(
        e.message.len() <= proto::limits::MAX_TEXT_LEN,
        "{} bytes",
        e.message.len()
    );
    assert_eq!(e.command_id, None);
    a.stop().await;
}
