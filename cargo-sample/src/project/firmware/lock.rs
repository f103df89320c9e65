//! The lock a build holds on its build directory until its executable is read.

use std::path::Path;

/// An exclusive lock on one of cargo-sample's build directories, held from the build until
/// its executable is read: cargo locks the directory only while it builds, and two runs that
/// build the same binary with other features (with and without the sampler, say) write the
/// same file.
pub(super) struct BuildLock {
    #[cfg(unix)]
    _file: Option<std::fs::File>,
}

impl BuildLock {
    /// Wait for and take the lock of `subdir` of cargo-sample's directory `dir`.
    pub(super) fn take(dir: &Path, subdir: &str) -> BuildLock {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let _ = std::fs::create_dir_all(dir);
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(dir.join(format!("{subdir}.lock")))
                .ok();
            if let Some(f) = &file {
                // SAFETY: flock on a descriptor this process opened; released when it closes.
                let _ = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
            }
            BuildLock { _file: file }
        }
        #[cfg(not(unix))]
        {
            let _ = (dir, subdir);
            BuildLock {}
        }
    }
}
