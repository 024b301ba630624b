//! `iop-control-plane`'s identity on the cluster engine: `cluster-nkey` makes a
//! replica's key, `cluster-permissions` prints what its NATS user needs, a replica
//! started with `--cluster-nkey` works on an engine running
//! `examples/nats/accounts.conf`, one without credentials does not start, and a
//! password in the URL is never printed.

mod cli_support;

use std::path::PathBuf;
use std::process::Command;

use cli_support::{CP_BIN, control_plane, edge, get, temp_path, wait_connected};
use iop_cluster::testing::NatsServer;

const ACCOUNTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../examples/nats/accounts.conf"
);

fn run(args: &[&str]) -> std::process::Output {
    Command::new(CP_BIN).args(args).output().unwrap()
}

/// A Control Plane started with `flags` beside its addresses, run to its end (one
/// that is expected not to start): its exit code and stderr.
fn refused(flags: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(CP_BIN)
        .args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
        .args(flags)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A new seed file from `cluster-nkey`, and the public key it printed.
fn nkey(name: &str) -> (PathBuf, String) {
    let file = temp_path(name);
    let out = run(&["cluster-nkey", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let public = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    (file, public)
}

#[test]
fn cluster_nkey_writes_a_private_seed_once_and_prints_its_public_key() {
    let (file, public) = nkey("a.nk");
    assert!(public.starts_with('U') && public.len() == 56, "{public}");
    let seed = std::fs::read_to_string(&file).unwrap();
    assert!(seed.starts_with("SU"), "a user seed");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    // Never overwritten.
    let again = run(&["cluster-nkey", file.to_str().unwrap()]);
    assert!(!again.status.success());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), seed);
    let _ = std::fs::remove_file(&file);
}

#[test]
fn cluster_permissions_prints_the_block_the_example_holds() {
    let out = run(&["cluster-permissions"]);
    assert!(out.status.success());
    let block = String::from_utf8(out.stdout).unwrap();
    assert!(
        block.contains("IOP_REPLICA_A = {")
            && block.contains("IOP_REPLICA_C = {")
            && block.contains("IOP_OBSERVER = {"),
        "{block}"
    );
    assert!(std::fs::read_to_string(ACCOUNTS).unwrap().contains(&block));
}

#[test]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
fn a_replica_with_its_own_nkey_works_on_the_example_engine_and_no_other_starts() {
    let (seed_a, public_a) = nkey("replica-a.nk");
    let mut text = std::fs::read_to_string(ACCOUNTS).unwrap();
    text = text.replace("$IOP_NKEY_REPLICA_A,", &format!("{public_a},"));
    for other in ["REPLICA_B", "REPLICA_C", "OBSERVER", "ADMIN", "APP"] {
        let (file, public) = nkey(other);
        let _ = std::fs::remove_file(file);
        text = text
            .replace(&format!("$IOP_NKEY_{other},"), &format!("{public},"))
            .replace(&format!("$IOP_NKEY_{other} "), &format!("{public} "));
    }
    let config = temp_path("accounts.conf");
    std::fs::write(&config, text).unwrap();
    let nats = NatsServer::start_with_config(&config);
    let url = nats.url();
    let seed = seed_a.to_str().unwrap();
    let a = control_plane(&[
        "--cluster",
        &url,
        "--replica-id",
        "a",
        "--cluster-nkey",
        seed,
    ]);
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/edge.toml");
    let (_edge, _log) = edge(a.edges, "edge-1", &example, &[]);
    wait_connected(a.admin, "edge-1");
    assert_eq!(get(a.admin, "/healthz").json()["cluster"], "ok");

    // Without credentials, or with a password the engine does not know: no start, and
    // the password is never printed.
    for url in [
        url.clone(),
        url.replace("nats://", "nats://iop:hunter2-not-printed@"),
    ] {
        let (code, stderr) = refused(&["--cluster", &url, "--replica-id", "cp-b"]);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(!stderr.contains("hunter2"), "{stderr}");
        assert!(stderr.contains("--cluster nats://"), "{stderr}");
    }
    // A seed file others may read is refused, naming the fix.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&seed_a, std::fs::Permissions::from_mode(0o644)).unwrap();
        let (code, stderr) = refused(&[
            "--cluster",
            &url,
            "--replica-id",
            "cp-c",
            "--cluster-nkey",
            seed,
        ]);
        assert_eq!(code, Some(2));
        assert!(stderr.contains("chmod 600"), "{stderr}");
    }
    let _ = std::fs::remove_file(&seed_a);
    let _ = std::fs::remove_file(&config);
}

#[test]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
fn a_replica_with_its_own_client_certificate_works_over_mutual_tls_and_one_without_does_not_start()
{
    let dir = temp_path("pki");
    let out = run(&["gen-test-certs", dir.to_str().unwrap(), "--edge-id", "cp-a"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = |name: &str| dir.join(name).display().to_string();
    let config = temp_path("mtls.conf");
    std::fs::write(
        &config,
        format!(
            "jetstream {{\n  store_dir: \"unused\"\n  sync_interval: always\n}}\n\
             tls {{\n  cert_file: {:?}\n  key_file: {:?}\n  ca_file: {:?}\n  verify: true\n}}\n",
            file("server.pem"),
            file("server.key"),
            file("ca.pem")
        ),
    )
    .unwrap();
    let nats = NatsServer::start_with_config(&config);
    let url = format!("tls://{}", nats.addr);
    let (ca, cert, key) = (file("ca.pem"), file("cp-a.pem"), file("cp-a.key"));
    let a = control_plane(&[
        "--cluster",
        &url,
        "--replica-id",
        "cp-a",
        "--cluster-ca",
        &ca,
        "--cluster-cert",
        &cert,
        "--cluster-key",
        &key,
    ]);
    assert_eq!(get(a.admin, "/healthz").json()["cluster"], "ok");

    // The server's CA but no certificate of its own: refused.
    let (code, stderr) = refused(&[
        "--cluster",
        &url,
        "--replica-id",
        "cp-b",
        "--cluster-ca",
        &ca,
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    // A certificate without its key is a usage error.
    let (code, _) = refused(&[
        "--cluster",
        &url,
        "--replica-id",
        "cp-b",
        "--cluster-ca",
        &ca,
        "--cluster-cert",
        &cert,
    ]);
    assert_eq!(code, Some(2));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&config);
}

#[test]
fn a_credentials_file_that_is_not_one_is_a_usage_error_naming_it_without_its_contents() {
    let creds =
        cli_support::secret_file("replica.creds", "SUAsecretsecretsecret not a creds file\n");
    let (code, stderr) = refused(&[
        "--cluster",
        "nats://127.0.0.1:1",
        "--replica-id",
        "cp-a",
        "--cluster-creds",
        creds.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("not a NATS credentials file"), "{stderr}");
    assert!(!stderr.contains("secretsecret"), "{stderr}");
    let _ = std::fs::remove_file(&creds);
}
