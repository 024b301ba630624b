//! Files that hold secrets — private keys, credentials, admin tokens — are refused
//! when anyone but their owner may read them, as ssh refuses a private key.

use std::path::Path;

use super::FileError;

/// Checks that `path` is readable by its owner only (Unix: no group or other
/// permission bits); elsewhere every file passes. The error names the file and the fix.
pub fn check_private(path: &Path) -> Result<(), FileError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path).map_err(|e| FileError::read(path, &e))?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(FileError::new(
                path,
                None,
                format!(
                    "holds a secret but is readable by others (mode {mode:04o}): \
                     run `chmod 600 {}`",
                    path.display()
                ),
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Reads a secret file after [`check_private`]; the bytes are zeroed when dropped.
pub fn read_private(path: &Path) -> Result<zeroize::Zeroizing<Vec<u8>>, FileError> {
    check_private(path)?;
    std::fs::read(path)
        .map(zeroize::Zeroizing::new)
        .map_err(|e| FileError::read(path, &e))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_secret_readable_by_others_is_refused_naming_the_fix() {
        let dir = std::env::temp_dir().join(format!("iop-private-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("key.pem");
        std::fs::write(&path, "secret").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = read_private(&path).unwrap_err().to_string();
        assert!(
            err.contains("mode 0644") && err.contains("chmod 600"),
            "{err}"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(&read_private(&path).unwrap()[..], b"secret");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
