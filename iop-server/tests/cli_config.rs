//! The Edge config file and the enrolment file: good files load, bad ones are refused
//! with an error naming the file, the line and the field.

use std::path::Path;

use iop_core::cp::{CredentialHash, EnrolmentPolicy};
use iop_core::registry::ProviderCategory;
use iop_server::{EdgeFile, EnrolFile, credential_bytes, credential_hash_hex};

fn edge_err(text: &str) -> String {
    EdgeFile::parse(Path::new("edge.toml"), text)
        .expect_err("should be refused")
        .to_string()
}

fn enrol_err(text: &str) -> String {
    EnrolFile::parse(Path::new("enroll.toml"), text)
        .expect_err("should be refused")
        .to_string()
}

#[test]
fn the_shipped_examples_load() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let edge = EdgeFile::load(&root.join("examples/edge.toml")).unwrap();
    assert!(edge.nodes.len() >= 2);
    let enrol = EnrolFile::load(&root.join("examples/enroll.toml")).unwrap();
    assert!(!enrol.edge_ids.is_empty());
}

#[test]
fn a_full_node_is_read_with_its_providers_and_private_fields() {
    let text = r#"
[[nodes]]
id = "gpu-1"
revision = "r7"
models = ["llama-3-8b"]
labels = { zone = "a" }
address = "10.0.0.5:7000"
token = "tok-0123456789abcdef"

[[nodes.providers]]
id = "llama"
category = "local_inference"
models = ["llama-3-8b"]
capacity = 4
long_context_capacity = 1

[[nodes.providers]]
id = "claude"
category = "api"
capacity = 8
"#;
    let file = EdgeFile::parse(Path::new("edge.toml"), text).unwrap();
    let node = &file.nodes[0];
    assert_eq!(node.node_id, "gpu-1");
    assert_eq!(node.revision, "r7");
    assert_eq!(node.labels.get("zone").map(String::as_str), Some("a"));
    assert_eq!(node.endpoint.address(), "10.0.0.5:7000");
    assert_eq!(node.endpoint.token(), "tok-0123456789abcdef");
    assert_eq!(node.providers.len(), 2);
    let llama = node
        .providers
        .iter()
        .find(|p| p.provider_id == "llama")
        .unwrap();
    assert_eq!(llama.category, ProviderCategory::LocalInference);
    assert_eq!((llama.capacity, llama.long_context_capacity), (4, 1));
    // Debug output never shows the private fields.
    let debug = format!("{file:?}");
    assert!(
        !debug.contains("tok-0123456789abcdef") && !debug.contains("10.0.0.5"),
        "{debug}"
    );
}

#[test]
fn bad_edge_files_name_file_line_and_field() {
    // A typo in a key.
    let e = edge_err("[[nodes]]\nid = \"n1\"\ncapacty = 3\n");
    assert!(e.starts_with("edge.toml:3:"), "{e}");
    assert!(e.contains("capacty"), "{e}");

    // A bad category.
    let e = edge_err(
        "[[nodes]]\nid = \"n1\"\n[[nodes.providers]]\nid = \"p\"\ncategory = \"gpu\"\ncapacity = 1\n",
    );
    assert!(e.starts_with("edge.toml:5:"), "{e}");
    assert!(e.contains("cli") && e.contains("local_inference"), "{e}");

    // A missing required field.
    let e =
        edge_err("[[nodes]]\nid = \"n1\"\n[[nodes.providers]]\nid = \"p\"\ncategory = \"cli\"\n");
    assert!(e.contains("capacity"), "{e}");

    // A registry rule: long-context capacity above capacity, reported at the node.
    let e = edge_err(
        "\n[[nodes]]\nid = \"n1\"\n[[nodes.providers]]\nid = \"p\"\ncategory = \"cli\"\ncapacity = 1\nlong_context_capacity = 2\n",
    );
    assert!(e.starts_with("edge.toml:3: nodes[0] (id \"n1\")"), "{e}");
    assert!(
        e.contains("long_context_capacity 2 exceeds capacity 1"),
        "{e}"
    );

    // Id grammar.
    let e = edge_err("[[nodes]]\nid = \"bad id!\"\n");
    assert!(
        e.starts_with("edge.toml:2:") && e.contains("invalid node id"),
        "{e}"
    );

    // Duplicate node ids.
    let e = edge_err("[[nodes]]\nid = \"n1\"\n[[nodes]]\nid = \"n1\"\n");
    assert!(
        e.starts_with("edge.toml:4:") && e.contains("configured twice"),
        "{e}"
    );

    // Not TOML at all.
    let e = edge_err("nodes = [\n");
    assert!(e.starts_with("edge.toml:"), "{e}");

    // A file that does not exist.
    let e = EdgeFile::load(Path::new("/nonexistent/edge.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("/nonexistent/edge.toml: cannot read"), "{e}");
}

#[test]
fn enrol_file_keeps_hashes_only_and_checks_them() {
    let hash = credential_hash_hex(b"s3cret");
    let text = format!("[[edges]]\nid = \"edge-1\"\ncredential_sha256 = \"{hash}\"\n");
    let file = EnrolFile::parse(Path::new("enroll.toml"), &text).unwrap();
    assert_eq!(file.edge_ids, ["edge-1"]);
    let policy = EnrolmentPolicy::AllowList(file.allow_list);
    assert!(
        policy
            .check("edge-1", &CredentialHash::of(b"s3cret"))
            .is_ok()
    );
    assert!(
        policy
            .check("edge-1", &CredentialHash::of(b"wrong"))
            .is_err()
    );
    assert!(
        policy
            .check("edge-2", &CredentialHash::of(b"s3cret"))
            .is_err()
    );
}

#[test]
fn bad_enrol_files_name_file_line_and_field() {
    let e = enrol_err("[[edges]]\nid = \"edge-1\"\ncredential_sha256 = \"abc\"\n");
    assert!(
        e.starts_with("enroll.toml:3: edges[0].credential_sha256"),
        "{e}"
    );
    assert!(e.contains("64 hex digits"), "{e}");

    let e = enrol_err("[[edges]]\nid = \"edge-1\"\ncredential = \"s3cret\"\n");
    assert!(e.contains("credential"), "{e}");

    let e = enrol_err("[[edges]]\nid = \"\"\ncredential_sha256 = \"00\"\n");
    assert!(e.starts_with("enroll.toml:2: edges[0].id"), "{e}");

    let h = credential_hash_hex(b"x");
    let e = enrol_err(&format!(
        "[[edges]]\nid = \"a\"\ncredential_sha256 = \"{h}\"\n[[edges]]\nid = \"a\"\ncredential_sha256 = \"{h}\"\n"
    ));
    assert!(
        e.starts_with("enroll.toml:5:") && e.contains("listed twice"),
        "{e}"
    );
}

#[test]
fn credential_files_lose_one_trailing_newline_only() {
    assert_eq!(credential_bytes(b"secret\n"), b"secret");
    assert_eq!(credential_bytes(b"secret\r\n"), b"secret");
    assert_eq!(credential_bytes(b"secret\n\n"), b"secret\n");
    assert_eq!(credential_bytes(b"secret"), b"secret");
    assert_eq!(
        credential_hash_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn a_node_token_is_a_secret_of_16_bytes_or_more_in_a_file_only_its_owner_reads() {
    let with_token = |token: &str| {
        format!("[[nodes]]\nid = \"gpu-1\"\naddress = \"10.0.0.5:7000\"\ntoken = \"{token}\"\n")
    };
    let err = EdgeFile::parse(Path::new("edge.toml"), &with_token("short"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("nodes[0] (id \"gpu-1\")") && err.contains("at least 16"),
        "{err}"
    );
    assert!(!err.contains("short\""), "{err}");

    let dir = std::env::temp_dir().join(format!("iop-edge-perm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("edge.toml");
    std::fs::write(&path, with_token("node-token-0123456789")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = EdgeFile::load(&path).unwrap_err().to_string();
        assert!(err.contains("chmod 600"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    assert_eq!(EdgeFile::load(&path).unwrap().nodes.len(), 1);
    // Without a token, the file holds no secret: any mode.
    std::fs::write(&path, "[[nodes]]\nid = \"gpu-1\"\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    assert!(EdgeFile::load(&path).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}
