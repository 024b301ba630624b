//! A Control Plane server and its admin API in the test's own process, on loopback.

use std::future::IntoFuture as _;
use std::net::SocketAddr;
use std::time::Duration;

use iop_server::admin::{self, AdminState};
use iop_tokio::{ControlPlaneHandle, ControlPlaneServer, ServerConfig};

/// A Control Plane with an admin API on loopback.
pub struct Cp {
    pub server: ControlPlaneServer,
    pub handle: ControlPlaneHandle,
    pub admin: SocketAddr,
    http: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Cp {
    pub async fn start(config: ServerConfig) -> Self {
        Self::start_with(config, |_| {}).await
    }

    /// [`start`](Self::start), the admin state changed by `tweak` first.
    pub async fn start_with(config: ServerConfig, tweak: impl FnOnce(&mut AdminState)) -> Self {
        let server = ControlPlaneServer::bind("127.0.0.1:0".parse().unwrap(), config)
            .await
            .unwrap();
        let handle = server.handle();
        let mut state = AdminState::new(handle.clone());
        state.command_answer_timeout = Duration::from_secs(10);
        tweak(&mut state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let admin = listener.local_addr().unwrap();
        let http = tokio::spawn(axum::serve(listener, admin::router(state)).into_future());
        Self {
            server,
            handle,
            admin,
            http,
        }
    }

    pub fn edges(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Posts `edge.ping` to `edge_id` in the background; the answer, when it comes.
    pub fn post_ping(&self, edge_id: &str) -> tokio::task::JoinHandle<super::Answer> {
        let (admin, path) = (self.admin, format!("/v1/edges/{edge_id}/commands"));
        tokio::task::spawn_blocking(move || {
            super::post(admin, &path, r#"{"operation":"edge.ping"}"#)
        })
    }

    pub async fn get(&self, path: &str) -> super::Answer {
        let (admin, path) = (self.admin, path.to_owned());
        tokio::task::spawn_blocking(move || super::get(admin, &path))
            .await
            .unwrap()
    }

    pub async fn post(&self, path: &str, body: &str) -> super::Answer {
        let (admin, path, body) = (self.admin, path.to_owned(), body.to_owned());
        tokio::task::spawn_blocking(move || super::post(admin, &path, &body))
            .await
            .unwrap()
    }

    /// Polls `GET path` until `done` holds for its JSON (at most 10 s).
    pub async fn get_until(
        &self,
        what: &str,
        path: &str,
        done: impl Fn(&serde_json::Value) -> bool + Send + 'static,
    ) -> serde_json::Value {
        let (admin, path, what) = (self.admin, path.to_owned(), what.to_owned());
        tokio::task::spawn_blocking(move || {
            super::wait_until(&what, || {
                let json = super::get(admin, &path).json();
                done(&json).then_some(json)
            })
        })
        .await
        .unwrap()
    }

    /// Waits until the Control Plane saw `edge_id`'s session end.
    pub async fn wait_disconnected(&self, edge_id: &str) {
        let (admin, path) = (self.admin, format!("/v1/edges/{edge_id}"));
        tokio::task::spawn_blocking(move || {
            super::wait_until("the edge disconnected", || {
                (super::get(admin, &path).json()["connected"] == false).then_some(())
            })
        })
        .await
        .unwrap();
    }

    pub async fn stop(self) {
        self.http.abort();
        self.server.shutdown().await;
    }
}
