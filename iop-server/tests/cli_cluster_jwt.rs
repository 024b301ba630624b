//! `iop-control-plane --cluster-creds`: a replica authenticating with a user JWT and
//! its seed (a NATS credentials file) on a nats-server in operator mode, whose
//! accounts are JWTs signed by its operator; a user of an account the operator did
//! not sign is refused.

mod cli_support;

use std::process::Command;

use cli_support::{CP_BIN, control_plane, get, secret_file, temp_path};
use iop_cluster::testing::NatsServer;
use nkeys::KeyPair;
use serde_json::json;

/// Base64url without padding, as JWTs are written.
fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// A NATS JWT of `kind` for `subject`, signed by `issuer`, with `nats` as its
/// type-specific claims.
fn jwt(issuer: &KeyPair, subject: &str, name: &str, mut nats: serde_json::Value) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    nats["version"] = json!(2);
    let claims = json!({
        "jti": base64url(subject.as_bytes()),
        "iat": now,
        "iss": issuer.public_key(),
        "name": name,
        "sub": subject,
        "nats": nats,
    });
    let header = base64url(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let body = base64url(claims.to_string().as_bytes());
    let signed = format!("{header}.{body}");
    let signature = issuer.sign(signed.as_bytes()).unwrap();
    format!("{signed}.{}", base64url(&signature))
}

fn account(operator: &KeyPair, account: &KeyPair, name: &str, jetstream: bool) -> String {
    let mut limits = json!({ "subs": -1, "data": -1, "payload": -1, "imports": -1,
        "exports": -1, "wildcards": true, "conn": -1, "leaf": -1 });
    if jetstream {
        limits["mem_storage"] = json!(-1);
        limits["disk_storage"] = json!(-1);
        limits["streams"] = json!(-1);
        limits["consumer"] = json!(-1);
    }
    jwt(
        operator,
        &account.public_key(),
        name,
        json!({ "type": "account", "limits": limits }),
    )
}

/// A credentials file for `user`, issued by `account`.
fn creds(account: &KeyPair, user: &KeyPair) -> std::path::PathBuf {
    let token = jwt(
        account,
        &user.public_key(),
        "replica",
        json!({
            "type": "user", "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
        }),
    );
    let text = format!(
        "-----BEGIN NATS USER JWT-----\n{token}\n------END NATS USER JWT------\n\n\
         -----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
        user.seed().unwrap()
    );
    secret_file("replica.creds", &text)
}

#[test]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
fn a_replica_with_jwt_credentials_works_in_operator_mode_and_a_foreign_one_does_not_start() {
    let operator = KeyPair::new_operator();
    let (iop, system) = (KeyPair::new_account(), KeyPair::new_account());
    let operator_jwt = jwt(
        &operator,
        &operator.public_key(),
        "iop-operator",
        json!({ "type": "operator" }),
    );
    let config = temp_path("operator.conf");
    std::fs::write(
        &config,
        format!(
            "jetstream {{\n  store_dir: \"unused\"\n}}\noperator: {operator_jwt}\nsystem_account: {}\n\
             resolver: MEMORY\nresolver_preload: {{\n  {}: {}\n  {}: {}\n}}\n",
            system.public_key(),
            iop.public_key(),
            account(&operator, &iop, "IOP", true),
            system.public_key(),
            account(&operator, &system, "SYS", false),
        ),
    )
    .unwrap();
    let nats = NatsServer::start_with_config(&config);
    let url = nats.url();
    let good = creds(&iop, &KeyPair::new_user());
    let a = control_plane(&[
        "--cluster",
        &url,
        "--replica-id",
        "cp-a",
        "--cluster-creds",
        good.to_str().unwrap(),
    ]);
    assert_eq!(get(a.admin, "/healthz").json()["cluster"], "ok");

    // A user of an account the operator never signed.
    let foreign = creds(&KeyPair::new_account(), &KeyPair::new_user());
    let out = Command::new(CP_BIN)
        .args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
        .args([
            "--cluster",
            &url,
            "--replica-id",
            "cp-b",
            "--cluster-creds",
            foreign.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for file in [good, foreign, config] {
        let _ = std::fs::remove_file(file);
    }
}
