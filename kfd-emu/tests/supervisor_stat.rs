//! The path-based `stat` family (`stat`, `lstat`, `newfstatat`, `statx`, `access`,
//! `faccessat`, `faccessat2`) under the supervisor with the real model: the emulated device
//! nodes and sysfs files exist, everything else is the kernel's.

use std::ffi::CStr;
use std::io::{ErrorKind, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kfd_emu::model::{Model, ModelConfig};
use kfd_emu::supervisor::run_attached;

const PROPERTIES: &str = "/sys/devices/virtual/kfd/kfd/topology/nodes/1/properties";

fn model() -> Arc<Model> {
    Model::new(ModelConfig::default()).expect("model")
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// `stat(2)` through glibc (`newfstatat` on x86_64): the struct, or the errno.
fn libc_stat(path: &CStr) -> Result<libc::stat, i32> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: `path` is NUL-terminated and `st` is a writable `struct stat`.
    let ret = unsafe { libc::stat(path.as_ptr(), st.as_mut_ptr()) };
    if ret == 0 {
        // SAFETY: a successful stat filled the struct, which was zeroed before anyway.
        Ok(unsafe { st.assume_init() })
    } else {
        Err(errno())
    }
}

/// The raw `statx` system call with `STATX_BASIC_STATS`.
fn libc_statx(path: &CStr) -> Result<libc::statx, i32> {
    let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: as above, for `struct statx`.
    let ret = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            path.as_ptr(),
            0,
            libc::STATX_BASIC_STATS,
            stx.as_mut_ptr(),
        )
    };
    if ret == 0 {
        // SAFETY: filled by the call, zeroed before.
        Ok(unsafe { stx.assume_init() })
    } else {
        Err(errno())
    }
}

fn access(path: &CStr, how: i32) -> Result<(), i32> {
    // SAFETY: `path` is NUL-terminated.
    if unsafe { libc::access(path.as_ptr(), how) } == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

#[test]
fn dev_kfd_is_a_character_device() {
    let (meta, st, stx, r, w, x) = run_attached(model(), || {
        (
            std::fs::metadata("/dev/kfd").map_err(|e| e.kind()),
            libc_stat(c"/dev/kfd"),
            libc_statx(c"/dev/kfd"),
            access(c"/dev/kfd", libc::R_OK),
            access(c"/dev/kfd", libc::R_OK | libc::W_OK),
            access(c"/dev/kfd", libc::X_OK),
        )
    })
    .unwrap();
    let meta = meta.expect("metadata of /dev/kfd");
    assert!(meta.file_type().is_char_device());
    assert_eq!(meta.mode() & 0o7777, 0o666);
    assert_eq!(libc::major(meta.rdev()), kfd_emu::model::KFD_MAJOR);
    let st = st.expect("stat of /dev/kfd");
    assert_eq!(st.st_mode, libc::S_IFCHR | 0o666);
    assert_eq!(libc::major(st.st_rdev), kfd_emu::model::KFD_MAJOR);
    assert_eq!(libc::minor(st.st_rdev), 0);
    let stx = stx.expect("statx of /dev/kfd");
    assert_eq!(
        stx.stx_mask & libc::STATX_BASIC_STATS,
        libc::STATX_BASIC_STATS
    );
    assert_eq!(u32::from(stx.stx_mode), libc::S_IFCHR | 0o666);
    assert_eq!(stx.stx_rdev_major, kfd_emu::model::KFD_MAJOR);
    assert_eq!((r, w, x), (Ok(()), Ok(()), Err(libc::EACCES)));
}

#[test]
fn render_nodes_of_the_machine_exist_and_others_do_not() {
    let (meta, st, stx, other, other_x) = run_attached(model(), || {
        (
            std::fs::metadata("/dev/dri/renderD128").map_err(|e| e.kind()),
            libc_stat(c"/dev/dri/renderD128"),
            libc_statx(c"/dev/dri/renderD128"),
            libc_stat(c"/dev/dri/renderD200"),
            libc_statx(c"/dev/dri/renderD200"),
        )
    })
    .unwrap();
    let meta = meta.expect("metadata of renderD128");
    assert!(meta.file_type().is_char_device());
    assert_eq!(
        (libc::major(meta.rdev()), libc::minor(meta.rdev())),
        (226, 128)
    );
    let st = st.expect("stat of renderD128");
    assert_eq!(
        (libc::major(st.st_rdev), libc::minor(st.st_rdev)),
        (226, 128)
    );
    let stx = stx.expect("statx of renderD128");
    assert_eq!((stx.stx_rdev_major, stx.stx_rdev_minor), (226, 128));
    // Not a GPU of the machine: the kernel's answer (this host has no /dev/dri).
    assert_eq!(other.map(|_| ()), Err(libc::ENOENT));
    assert_eq!(other_x.map(|_| ()), Err(libc::ENOENT));
}

#[test]
fn topology_files_exist_with_the_size_they_read_as() {
    let (exists, meta, content, st, dir, missing, missing_access, ro, class, module) =
        run_attached(model(), || {
            let mut content = String::new();
            std::fs::File::open(PROPERTIES)
                .and_then(|mut f| f.read_to_string(&mut content))
                .expect("read properties");
            (
                Path::new(PROPERTIES).exists(),
                std::fs::metadata(PROPERTIES).map_err(|e| e.kind()),
                content,
                libc_stat(c"/sys/devices/virtual/kfd/kfd/topology/nodes/1/properties"),
                std::fs::metadata("/sys/devices/virtual/kfd/kfd/topology/nodes")
                    .map(|m| m.is_dir())
                    .map_err(|e| e.kind()),
                std::fs::metadata("/sys/devices/virtual/kfd/kfd/topology/nodes/999/properties")
                    .map_err(|e| e.kind()),
                access(c"/sys/class/kfd/kfd/topology/nodes/999", libc::F_OK),
                (
                    access(c"/sys/class/kfd/kfd/topology/nodes/1/gpu_id", libc::R_OK),
                    access(c"/sys/class/kfd/kfd/topology/nodes/1/gpu_id", libc::W_OK),
                ),
                Path::new("/sys/class/kfd/kfd/topology/system_properties").is_file(),
                Path::new("/sys/module/amdgpu/parameters/noretry").is_file(),
            )
        })
        .unwrap();
    assert!(exists);
    let meta = meta.expect("metadata of properties");
    assert!(meta.is_file());
    assert_eq!(meta.mode() & 0o7777, 0o444);
    assert_eq!((meta.uid(), meta.gid()), (0, 0));
    assert_eq!(meta.len(), content.len() as u64);
    let st = st.expect("stat of properties");
    assert_eq!(st.st_mode, libc::S_IFREG | 0o444);
    assert_eq!(st.st_size, content.len() as i64);
    assert_eq!(dir, Ok(true));
    assert_eq!(missing.map(|_| ()), Err(ErrorKind::NotFound));
    assert_eq!(missing_access, Err(libc::ENOENT));
    assert_eq!(ro, (Ok(()), Err(libc::EACCES)));
    assert!(class);
    assert!(module);
}

#[test]
fn faccessat_lstat_and_relative_paths_are_answered_too() {
    let (eaccess, at_dirfd, lstat) = run_attached(model(), || {
        let dev = std::fs::File::open("/dev").expect("open /dev");
        let dirfd = std::os::fd::AsRawFd::as_raw_fd(&dev);
        let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
        // SAFETY: NUL-terminated paths; `st` is a writable `struct stat`.
        unsafe {
            (
                // With flags glibc issues faccessat2, without faccessat.
                libc::faccessat(
                    libc::AT_FDCWD,
                    c"/dev/kfd".as_ptr(),
                    libc::W_OK,
                    libc::AT_EACCESS,
                ),
                libc::faccessat(dirfd, c"kfd".as_ptr(), libc::R_OK, 0),
                libc::lstat(c"/dev/dri/renderD128".as_ptr(), st.as_mut_ptr()),
            )
        }
    })
    .unwrap();
    assert_eq!((eaccess, at_dirfd, lstat), (0, 0, 0));
}

#[test]
fn unrelated_paths_get_the_kernels_answer() {
    let native = (
        libc_stat(c"/tmp").map(|st| (st.st_ino, st.st_mode)),
        libc_statx(c"/proc/self/status").map(|stx| stx.stx_mode),
        std::fs::metadata("/no/such/path")
            .map_err(|e| e.kind())
            .err(),
        access(c"/etc/passwd", libc::R_OK),
    );
    let emulated = run_attached(model(), || {
        (
            libc_stat(c"/tmp").map(|st| (st.st_ino, st.st_mode)),
            libc_statx(c"/proc/self/status").map(|stx| stx.stx_mode),
            std::fs::metadata("/no/such/path")
                .map_err(|e| e.kind())
                .err(),
            access(c"/etc/passwd", libc::R_OK),
        )
    })
    .unwrap();
    assert_eq!(emulated, native);
}

/// The cost of a `stat` of an unrelated path under the filter (a round trip through the
/// supervisor, answered with CONTINUE) against the native call. Run with
/// `cargo test -p kfd-emu --release --test supervisor_stat -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
fn stat_cost() {
    const N: u32 = 20_000;
    fn per_call() -> Duration {
        let start = Instant::now();
        for _ in 0..N {
            libc_stat(c"/tmp").expect("stat /tmp");
        }
        start.elapsed() / N
    }
    let native = per_call();
    let filtered = run_attached(model(), per_call).unwrap();
    let emulated = run_attached(model(), || {
        let start = Instant::now();
        for _ in 0..N {
            libc_stat(c"/dev/kfd").expect("stat /dev/kfd");
        }
        start.elapsed() / N
    })
    .unwrap();
    eprintln!(
        "stat /tmp: native {native:?}, under the filter {filtered:?}; stat /dev/kfd (emulated) \
         {emulated:?}"
    );
}

/// The raw `fstat` system call (`SYS_fstat`, which glibc no longer uses): the struct, or the
/// errno.
fn raw_fstat(fd: std::os::fd::BorrowedFd<'_>) -> Result<libc::stat, i32> {
    use std::os::fd::AsRawFd;
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: SYS_fstat writes one `struct stat` into the writable buffer.
    let ret = unsafe { libc::syscall(libc::SYS_fstat, fd.as_raw_fd(), st.as_mut_ptr()) };
    if ret == 0 {
        // SAFETY: a successful fstat filled the struct, which was zeroed before anyway.
        Ok(unsafe { st.assume_init() })
    } else {
        Err(errno())
    }
}

/// An open `/dev/kfd` or render node describes itself as the device file, through every way
/// of asking an fd (`fstat`, `newfstatat`/`statx` with `AT_EMPTY_PATH` as std and glibc do):
/// a character device with the kernel's `st_rdev`; an ordinary file's fstat is untouched.
#[test]
fn fstat_of_a_stand_in_is_the_device_file() {
    use std::os::fd::AsFd;
    let model = model();
    let minor = model.machine().gpus()[0].render_minor;
    run_attached(model, move || {
        let kfd = std::fs::File::options()
            .read(true)
            .write(true)
            .open("/dev/kfd")
            .expect("open /dev/kfd");
        let render = std::fs::File::options()
            .read(true)
            .write(true)
            .open(format!("/dev/dri/renderD{minor}"))
            .expect("open the render node");
        for (file, major, minor) in [
            (&kfd, kfd_emu::model::KFD_MAJOR, 0),
            (&render, kfd_emu::model::DRM_MAJOR, minor),
        ] {
            let rdev = rustix::fs::makedev(major, minor);
            // std: statx(fd, "", AT_EMPTY_PATH).
            let meta = file.metadata().expect("metadata");
            assert!(
                meta.file_type().is_char_device(),
                "{major}:{minor}: {meta:?}"
            );
            assert_eq!(meta.rdev(), rdev, "{major}:{minor}");
            // glibc's fstat: newfstatat(fd, "", AT_EMPTY_PATH).
            let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
            // SAFETY: `st` is a writable `struct stat`.
            let ret =
                unsafe { libc::fstat(std::os::fd::AsRawFd::as_raw_fd(file), st.as_mut_ptr()) };
            assert_eq!(ret, 0, "fstat: {}", errno());
            // SAFETY: filled by the successful fstat (and zeroed before).
            let st = unsafe { st.assume_init() };
            assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFCHR);
            assert_eq!(st.st_rdev, rdev);
            // The old system call.
            let st = raw_fstat(file.as_fd()).expect("SYS_fstat");
            assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFCHR);
            assert_eq!(st.st_rdev, rdev);
        }
        let own = std::fs::File::open("/proc/self/exe").expect("open the test binary");
        let meta = own.metadata().expect("metadata of an ordinary file");
        assert!(meta.file_type().is_file());
        let st = raw_fstat(own.as_fd()).expect("SYS_fstat of an ordinary file");
        assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFREG);
        // SAFETY: fd 9999 is not open in this test; fstat only reports EBADF for it.
        let closed = unsafe { std::os::fd::BorrowedFd::borrow_raw(9999) };
        assert_eq!(raw_fstat(closed), Err(libc::EBADF));
    })
    .expect("attach");
}

/// `fstat` of a stand-in into a buffer the caller cannot write (NULL) is EFAULT, as from the
/// kernel, and the next `fstat` is served.
#[test]
fn fstat_of_a_stand_in_into_a_bad_buffer_is_efault() {
    use std::os::fd::AsRawFd;
    let (bad, good) = run_attached(model(), || {
        let kfd = std::fs::File::open("/dev/kfd").expect("open /dev/kfd");
        // SAFETY: SYS_fstat with a NULL buffer only fails with EFAULT.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_fstat,
                kfd.as_raw_fd(),
                std::ptr::null_mut::<libc::stat>(),
            )
        };
        let bad = if ret == 0 { Ok(()) } else { Err(errno()) };
        (
            bad,
            raw_fstat(std::os::fd::AsFd::as_fd(&kfd)).map(|st| st.st_mode & libc::S_IFMT),
        )
    })
    .expect("attach");
    assert_eq!(bad, Err(libc::EFAULT));
    assert_eq!(good, Ok(libc::S_IFCHR));
}

#[test]
fn the_amdgpu_parameters_kfdtest_reads_are_the_kernels_defaults() {
    // amdgpu_drv.c: `int cwsr_enable = 1`, `amdgpu_emu_mode` 0; kfdtest's KFDCWSRTest skips
    // when cwsr_enable cannot be read as 1.
    let read = run_attached(model(), || {
        ["cwsr_enable", "emu_mode", "noretry"]
            .map(|p| std::fs::read_to_string(format!("/sys/module/amdgpu/parameters/{p}")).ok())
    })
    .unwrap();
    assert_eq!(
        read,
        [
            Some("1\n".to_owned()),
            Some("0\n".to_owned()),
            Some("1\n".to_owned())
        ]
    );
}
