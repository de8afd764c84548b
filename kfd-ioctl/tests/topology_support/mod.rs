//! What the topology tests share: temporary trees built file by file, and a deadline for
//! calls that must not block.

#![allow(dead_code)] // Each test binary uses its own part.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// The repository's real captures.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../kfd-emu/fixtures/topology")
}

/// A directory under the system temp dir, removed on drop.
pub struct TempTree(pub PathBuf);

impl TempTree {
    /// A fresh, empty directory named after `name` and this process: in `/dev/shm` when there
    /// is one (the fuzz test writes thousands of trees), else in the system temp dir.
    pub fn new(name: &str) -> Self {
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("kfd-ioctl-topology-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    /// Writes `contents` at `relative`, creating the directories above it.
    pub fn write(&self, relative: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.parent_of(relative);
        fs::write(&path, contents).unwrap();
        path
    }

    /// Puts a FIFO (no writer ever opens it) at `relative`.
    pub fn fifo(&self, relative: &str) -> PathBuf {
        let path = self.parent_of(relative);
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
        path
    }

    /// Puts a symbolic link to `target` at `relative`.
    pub fn symlink(&self, relative: &str, target: impl AsRef<Path>) -> PathBuf {
        let path = self.parent_of(relative);
        std::os::unix::fs::symlink(target, &path).unwrap();
        path
    }

    /// `relative` below the tree, with its parent directories created and nothing at it.
    fn parent_of(&self, relative: &str) -> PathBuf {
        let path = self.0.join(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let _ = fs::remove_file(&path);
        path
    }
}

impl Drop for TempTree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Runs `work` on its own thread and returns its result, or panics naming `what` when it has
/// not returned within `limit` — a call that blocks fails the test instead of hanging it (the
/// stuck thread is left behind; the test process ends with the test).
pub fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(work());
    });
    match result.recv_timeout(limit) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: still blocked after {limit:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: the call panicked"),
    }
}
