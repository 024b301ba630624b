//! Ours, as the round-trip benches set it up: a `ControlPlaneServer` on the calling
//! thread's runtime and one `EdgeClient`, enrolled, on the Edge's runtime.

use std::time::{Duration, Instant};

use iop_tokio::core::edge::EdgeConfig;
use iop_tokio::core::registry::NodeRegistry;
use iop_tokio::{ControlPlaneHandle, ControlPlaneServer, EdgeClient, EdgeHandle, ServerConfig};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long the Edge may take to enrol.
const ENROL_BOUND: Duration = Duration::from_secs(10);

/// A Control Plane with one enrolled Edge.
pub struct Ours {
    server: ControlPlaneServer,
    client: EdgeHandle,
}

impl Ours {
    /// Binds a Control Plane on 127.0.0.1 (on the calling task's runtime), connects an
    /// Edge `edge_id` owning `registry` on `edge_rt`, and waits until it is enrolled.
    pub async fn start(
        edge_rt: &tokio::runtime::Handle,
        edge_id: &str,
        registry: NodeRegistry,
    ) -> Result<Self, BoxError> {
        let server = ControlPlaneServer::bind(
            "127.0.0.1:0".parse()?,
            ServerConfig::new(iop_tokio::EnrolmentPolicy::AcceptAny),
        )
        .await?;
        let client = {
            let _in_edge_runtime = edge_rt.enter();
            EdgeClient::new(EdgeConfig::new(edge_id, iop_tokio::process_seed()))
                .with_node_registry(registry)
                .connect(server.local_addr())?
        };
        let cp = server.handle();
        let start = Instant::now();
        while cp.stats().live_sessions < 1 {
            if start.elapsed() > ENROL_BOUND {
                return Err("the edge never enrolled".into());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Ok(Self { server, client })
    }

    /// The application's handle to the Control Plane.
    pub fn cp(&self) -> ControlPlaneHandle {
        self.server.handle()
    }

    /// Shuts the Edge down (on `edge_rt`), then the Control Plane.
    pub async fn shutdown(self, edge_rt: &tokio::runtime::Handle) -> Result<(), BoxError> {
        let client = self.client;
        edge_rt
            .spawn(async move { client.shutdown().await })
            .await?;
        self.server.handle().shutdown().await;
        Ok(())
    }
}
