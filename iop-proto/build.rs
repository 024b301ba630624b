//! Generates the wire types from `proto/iop/control.proto` at build time, and the
//! messages replicas exchange from `proto/iop/cluster.proto`.
//!
//! `protox` compiles the schema in pure Rust, so no `protoc` binary is needed.
//! The compiled descriptor set is also written to `OUT_DIR` so tests can check the
//! schema's contract (tombstones, numbering) against what was actually compiled.
//! With the `serde` feature, pbjson-build writes the proto3 JSON mapping
//! (`iop.serde.rs`) from the same descriptors.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    // The workspace copy is the source of truth; a packaged crate carries its own copy.
    let workspace_proto = manifest.join("../proto");
    let proto_root = if workspace_proto.join("iop/control.proto").exists() {
        workspace_proto
    } else {
        manifest.join("proto")
    };
    let file = proto_root.join("iop/control.proto");
    let cluster = proto_root.join("iop/cluster.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    println!("cargo:rerun-if-changed={}", cluster.display());

    // The CP ⇄ Edge wire alone: its descriptor set and JSON mapping.
    let descriptors = protox::compile([&file], [&proto_root])?;
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("iop_descriptor.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;

    #[cfg(feature = "serde")]
    pbjson_build::Builder::new()
        .register_descriptors(&prost::Message::encode_to_vec(&descriptors))?
        .btree_map(["."])
        .build(&[".iop"])?;

    // Rust types of both schemas (the cluster's imports the wire's).
    let both = protox::compile([&file, &cluster], [&proto_root])?;
    prost_build::Config::new()
        // Ordered maps: the same message always encodes to the same bytes.
        .btree_map(["."])
        // The hello carries a credential: its Debug is written by hand to redact it.
        .skip_debug(["iop.EdgeHelloRequest"])
        .compile_fds(both)?;
    Ok(())
}
