//! The crate's own copies of the schemas (`iop-proto/proto/iop/*.proto`, what a
//! packaged `iop-proto` builds from) must be the workspace's `proto/iop/*.proto` byte
//! for byte: after editing a workspace file, copy it over.

use std::path::Path;

#[test]
fn packaged_schema_copies_match_the_workspace_schemas() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    for name in ["control.proto", "cluster.proto"] {
        let copy = std::fs::read(crate_dir.join("proto/iop").join(name))
            .unwrap_or_else(|_| panic!("iop-proto/proto/iop/{name} is checked in"));
        let workspace = crate_dir.join("../proto/iop").join(name);
        // A packaged crate (no workspace around it) only has its copy: nothing to compare.
        if let Ok(source) = std::fs::read(&workspace) {
            assert!(
                copy == source,
                "iop-proto/proto/iop/{name} differs from proto/iop/{name}: \
                 run `cp proto/iop/{name} iop-proto/proto/iop/{name}`"
            );
        }
    }
}
