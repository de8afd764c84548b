//! Turning the path an `open`/`openat` caller passed into the absolute, lexically normalised
//! path the backend decides on.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// Resolves `raw` (as the caller passed it, without its NUL) for thread `tid`: an absolute
/// path as is, a relative one against `dirfd` (`/proc/<tid>/fd/<dirfd>`) or, for `AT_FDCWD`,
/// the thread's working directory (`/proc/<tid>/cwd`).
///
/// `None` when the path cannot be ours: it is empty, not UTF-8, or relative to something that
/// is not a directory path (a bad `dirfd`, an anonymous inode). The kernel then runs the call
/// and produces its own errno.
pub(crate) fn resolve(tid: i32, dirfd: i32, raw: &[u8]) -> Option<String> {
    let path = std::str::from_utf8(raw).ok()?;
    if path.is_empty() {
        return None;
    }
    if path.starts_with('/') {
        return Some(normalise(path));
    }
    let base = if dirfd == libc::AT_FDCWD {
        format!("/proc/{tid}/cwd")
    } else if dirfd >= 0 {
        format!("/proc/{tid}/fd/{dirfd}")
    } else {
        return None;
    };
    let base = std::fs::read_link(base).ok()?;
    let base = std::str::from_utf8(OsStr::as_bytes(base.as_os_str())).ok()?;
    if !base.starts_with('/') {
        return None;
    }
    Some(normalise(&format!("{base}/{path}")))
}

/// Lexical normalisation of an absolute path: drops empty and `.` components, lets `..` remove
/// the previous one (never above `/`), and drops a trailing slash.
///
/// Lexical, unlike the kernel's walk: `a/link/..` becomes `a` even when `link` is a symlink.
/// The stand-in trees have no symlinks, so this only matters for paths that are not ours.
pub(crate) fn normalise(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    let mut out = String::with_capacity(path.len());
    for part in &parts {
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_is_lexical() {
        assert_eq!(normalise("/"), "/");
        assert_eq!(normalise("//dev//kfd"), "/dev/kfd");
        assert_eq!(normalise("/dev/./dri/../kfd/"), "/dev/kfd");
        assert_eq!(normalise("/../../sys/./class"), "/sys/class");
        assert_eq!(normalise("/a/b/../.."), "/");
    }

    #[test]
    fn resolve_uses_cwd_and_dirfd() {
        let tid = rustix::thread::gettid().as_raw_nonzero().get();
        let cwd = std::env::current_dir().unwrap();
        let cwd = cwd.to_str().unwrap();
        assert_eq!(
            resolve(tid, libc::AT_FDCWD, b"x/../y"),
            Some(normalise(&format!("{cwd}/y")))
        );
        assert_eq!(
            resolve(tid, libc::AT_FDCWD, b"/dev//kfd"),
            Some("/dev/kfd".into())
        );
        let dir = std::fs::File::open("/proc").unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&dir);
        assert_eq!(
            resolve(tid, fd, b"self/../modules"),
            Some("/proc/modules".into())
        );
        assert_eq!(resolve(tid, 1_000_000, b"rel"), None);
        assert_eq!(resolve(tid, libc::AT_FDCWD, b""), None);
        assert_eq!(resolve(tid, libc::AT_FDCWD, b"\xff"), None);
    }
}
