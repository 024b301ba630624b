//! The processes of one run: nats-server (one, or a three-node cluster), three
//! `iop-control-plane --cluster` replicas each reaching the engine through proxies of
//! its own, and `iop-edge --simulate` processes (two of them sharing an Edge id). Every
//! port is on 127.0.0.1; every child is killed when the fleet is dropped.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use iop_cluster::testing::NatsServer;

use super::proxy::Proxy;

pub const CP_BIN: &str = env!("CARGO_BIN_EXE_iop-control-plane");
pub const EDGE_BIN: &str = env!("CARGO_BIN_EXE_iop-edge");
/// The replicas' reconcile interval (`--cluster-reconcile-ms`).
pub const RECONCILE: Duration = Duration::from_secs(5);

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill").args([name, &pid.to_string()]).status();
}

/// One replica process.
pub struct Cp {
    pub id: String,
    pub edges: SocketAddr,
    pub admin: SocketAddr,
    pub log: PathBuf,
    args: Vec<String>,
    child: std::sync::Mutex<Option<Child>>,
}

impl Cp {
    /// Starts it and waits (at most 30 s) until it listens: a restart after SIGKILL
    /// first waits out the liveness entry its predecessor left.
    fn spawn(&self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("cp log");
        let mut child = Command::new(CP_BIN)
            .args(&self.args)
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn iop-control-plane");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        if !line.contains("listening") {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "{} did not start: {line:?} (log {})",
                self.id,
                self.log.display()
            ));
        }
        *self.child.lock().unwrap() = Some(child);
        Ok(())
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.lock().unwrap().as_ref().map(Child::id)
    }

    pub fn pause(&self) {
        self.pid().into_iter().for_each(|p| signal(p, "-STOP"));
    }

    pub fn resume(&self) {
        self.pid().into_iter().for_each(|p| signal(p, "-CONT"));
    }

    pub fn kill(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops it as an operator's rolling upgrade does — SIGTERM: it drains (its Edges
    /// told to go elsewhere) and exits, within 30 s or it is killed — and starts it
    /// again; returns whether it exited on its own, and when it had exited and when
    /// it listened again.
    pub fn restart_gracefully(&self) -> (bool, Instant, Instant) {
        let mut clean = false;
        if let Some(mut child) = self.child.lock().unwrap().take() {
            signal(child.id(), "-TERM");
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if let Ok(Some(status)) = child.try_wait() {
                    clean = status.success();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let exited = Instant::now();
        self.spawn_within(Duration::from_secs(60));
        (clean, exited, Instant::now())
    }

    /// Kills it and starts it again, as a supervisor would: tried again until it
    /// starts (within 60 s), for a replica does not start while the engine is out
    /// of reach.
    pub fn restart(&self) {
        self.kill();
        self.spawn_within(Duration::from_secs(60));
    }

    fn spawn_within(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            match self.spawn() {
                Ok(()) => return,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(500))
                }
                Err(why) => panic!("{why}"),
            }
        }
    }
}

/// One Edge process; its log (stderr) is what the checker reads.
pub struct EdgeProc {
    pub edge_id: String,
    pub log: PathBuf,
    child: Child,
}

/// Everything of one run.
pub struct Fleet {
    pub nats: Vec<std::sync::Mutex<NatsServer>>,
    /// Per replica, one proxy per NATS server.
    pub links: Vec<Vec<Proxy>>,
    pub cps: Vec<Cp>,
    pub edges: Vec<EdgeProc>,
    dir: PathBuf,
    pub started: Instant,
}

impl Fleet {
    /// `servers` NATS servers (1 or 3, buckets with as many copies), three replicas,
    /// and the Edges `edge_ids` (an id listed twice runs as two processes; the n-th
    /// dials replica n mod 3 first).
    pub fn start(servers: usize, edge_ids: &[&str], dir: &Path) -> Fleet {
        let mut fleet = Fleet::new(servers, dir);
        for r in 0..3 {
            fleet.start_cp(r);
        }
        for (n, edge_id) in edge_ids.iter().enumerate() {
            fleet.add_edge(edge_id, n % 3);
        }
        fleet
    }

    /// The NATS servers and the proxies, and three replicas not started yet.
    pub fn new(servers: usize, dir: &Path) -> Fleet {
        std::fs::create_dir_all(dir).expect("run dir");
        let config =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/nats/nats-server.conf");
        let nats = if servers == 1 {
            vec![NatsServer::try_start_with_config(&config).expect("nats-server")]
        } else {
            NatsServer::try_start_cluster(servers, Some(&config)).expect("nats-server cluster")
        };
        let mut links = Vec::new();
        let mut cps = Vec::new();
        for r in 0..3 {
            let proxies: Vec<Proxy> = nats.iter().map(|n| Proxy::start(n.addr)).collect();
            let urls: Vec<String> = proxies
                .iter()
                .map(|p| format!("nats://{}", p.addr))
                .collect();
            let id = format!("cp-{r}");
            let edges = SocketAddr::from(([127, 0, 0, 1], free_port()));
            let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
            let args: Vec<String> = [
                "--listen",
                &edges.to_string(),
                "--admin",
                &admin.to_string(),
                "--cluster",
                &urls.join(","),
                "--replica-id",
                &id,
                "--cluster-replicas",
                &servers.to_string(),
                "--cluster-reconcile-ms",
                &RECONCILE.as_millis().to_string(),
                // Every group of claims and releases goes as one atomic batch, so the
                // faults land on the batched path (a default group needs a crowd).
                "--cluster-batch-min",
                "2",
                "--heartbeat-interval-ms",
                "1000",
                "--log-level",
                "info",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            cps.push(Cp {
                log: dir.join(format!("{id}.log")),
                id,
                edges,
                admin,
                args,
                child: std::sync::Mutex::new(None),
            });
            links.push(proxies);
        }
        Fleet {
            nats: nats.into_iter().map(std::sync::Mutex::new).collect(),
            links,
            cps,
            edges: Vec::new(),
            dir: dir.to_owned(),
            started: Instant::now(),
        }
    }

    /// Starts replica `r` (a three-node cluster may still be electing its JetStream
    /// leader: tried for 30 s).
    pub fn start_cp(&mut self, r: usize) {
        self.cps[r].spawn_within(Duration::from_secs(30));
    }

    /// Starts an `iop-edge --simulate` process for `edge_id` that dials replica
    /// `first` first, then the others.
    pub fn add_edge(&mut self, edge_id: &str, first: usize) {
        let example = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/edge.toml");
        let log = self.dir.join(format!("{edge_id}-{}.log", self.edges.len()));
        let mut command = Command::new(EDGE_BIN);
        command.args(["--edge-id", edge_id, "--simulate", "--log-level", "info"]);
        for i in 0..3 {
            let cp = &self.cps[(first + i) % 3];
            command.args(["--control-plane", &cp.edges.to_string()]);
        }
        let child = command
            .arg("--config")
            .arg(&example)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("edge log"))
            .spawn()
            .expect("spawn iop-edge");
        self.edges.push(EdgeProc {
            edge_id: edge_id.to_owned(),
            log,
            child,
        });
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for edge in &mut self.edges {
            let _ = edge.child.kill();
            let _ = edge.child.wait();
        }
        for cp in &self.cps {
            cp.resume();
            cp.kill();
        }
        for n in &self.nats {
            if let Ok(n) = n.lock() {
                n.resume();
            }
        }
    }
}
