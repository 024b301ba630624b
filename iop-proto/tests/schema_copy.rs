//! The crate's own copy of the schema (`iop-proto/proto/iop/control.proto`, what a
//! packaged `iop-proto` builds from) must be the workspace's `proto/iop/control.proto`
//! byte for byte: after editing the workspace file, copy it over.

use std::path::Path;

#[test]
fn packaged_schema_copy_matches_the_workspace_schema() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let copy = std::fs::read(crate_dir.join("proto/iop/control.proto"))
        .expect("iop-proto/proto/iop/control.proto is checked in");
    let workspace = crate_dir.join("../proto/iop/control.proto");
    // A packaged crate (no workspace around it) only has its copy: nothing to compare.
    if let Ok(source) = std::fs::read(&workspace) {
        assert!(
            copy == source,
            "iop-proto/proto/iop/control.proto differs from proto/iop/control.proto: \
             run `cp proto/iop/control.proto iop-proto/proto/iop/control.proto`"
        );
    }
}
