//! Stand-in files: memfds, their identities, the generated sysfs tree, and finding the file
//! behind a number in a caller's fd table.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use rustix::fs::{FlockOperation, MemfdFlags, Mode, OFlags};
use rustix::io::Errno;

use crate::backend::{StatAnswer, StatKind, StatTime};
use crate::machine::Machine;

/// The current time, as `stat` reports it.
pub(super) fn now() -> StatTime {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    StatTime {
        sec: i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
        nsec: since.subsec_nanos(),
    }
}

/// A file's identity: `(st_dev, st_ino)`.
pub(super) type FileKey = (u64, u64);

/// The identity of an open file.
pub(super) fn key_of(fd: BorrowedFd<'_>) -> Result<FileKey, Errno> {
    let st = rustix::fs::fstat(fd)?;
    Ok((st.st_dev, st.st_ino))
}

pub(super) use super::vmas::{BO_MEMFD_NAME, NAME_PREFIX};

/// A new memfd of `size` bytes (sparse), sealed against resizing (`F_SEAL_SHRINK |
/// F_SEAL_GROW | F_SEAL_SEAL`): a program holding it cannot `ftruncate` it (`EPERM`) or
/// `fallocate` past its end, so no mapping of it (the program's or the model's) can turn into
/// a `SIGBUS`.
pub(super) fn memfd(name: &str, size: u64) -> io::Result<OwnedFd> {
    let fd = rustix::fs::memfd_create(
        format!("{NAME_PREFIX}{name}"),
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )?;
    rustix::fs::ftruncate(&fd, size)?;
    rustix::fs::fcntl_add_seals(
        &fd,
        rustix::fs::SealFlags::SHRINK | rustix::fs::SealFlags::GROW | rustix::fs::SealFlags::SEAL,
    )?;
    Ok(fd)
}

/// The name `memfd` gave to the model's memfd `fd` (without the prefix), or `None` for any
/// other file.
pub(super) fn standin_name(fd: BorrowedFd<'_>) -> Option<String> {
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    let link = link.to_str()?;
    let name = link.strip_prefix("/memfd:")?.strip_suffix(" (deleted)")?;
    name.strip_prefix(NAME_PREFIX).map(str::to_owned)
}

/// The name of the render-node memfds of `minor`.
pub(super) fn render_name(minor: u32) -> String {
    format!("renderD{minor}")
}

/// Raises this process's soft limit of open files to the hard limit (the model keeps a memfd
/// per buffer object). Failure leaves the limit as it was: allocations then fail with
/// `ENOMEM` once it is reached.
pub(super) fn raise_fd_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        limit.current = limit.maximum;
        let _ = setrlimit(Resource::Nofile, limit);
    }
}

/// A new open file description of the same file as `fd` (what a second `open` of a device
/// node gives): `/proc/self/fd/<n>` opened read-write.
pub(super) fn reopen(fd: BorrowedFd<'_>) -> Result<OwnedFd, Errno> {
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rustix::fs::open(path.as_str(), OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())
}

/// Where an exported dma-buf file holds its liveness lock: one byte near the largest offset a
/// lock may cover, far past any BO's end, so a program's own byte-range locks on its data do
/// not meet it.
const ALIVE_LOCK_AT: i64 = i64::MAX - 1;

/// The `struct flock` of the liveness lock, of type `kind` (`F_RDLCK` to hold, `F_WRLCK` to
/// probe).
fn alive_lock(kind: i32) -> libc::flock {
    // SAFETY: `flock` is plain integers; all-zero is a valid value, then set field by field.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = kind as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = ALIVE_LOCK_AT;
    lock.l_len = 1;
    lock
}

/// A new open file of the same file as `base` for a program to hold as a dma-buf fd, carrying
/// an open-file-description lock (`F_OFD_SETLK`, read). The kernel drops such a lock only
/// when the last reference to that open file goes (`__fput` → `locks_remove_file`): the last
/// fd in any process, an fd in flight in an `SCM_RIGHTS` message, a mapping. So the model,
/// which keeps no reference itself, learns that every reference is gone by asking
/// ([`exported_file_alive`]) — exactly, with no scan of anyone's fd table.
pub(super) fn exported_file(base: BorrowedFd<'_>) -> Result<OwnedFd, Errno> {
    let file = reopen(base)?;
    nix::fcntl::fcntl(
        file.as_raw_fd(),
        nix::fcntl::FcntlArg::F_OFD_SETLK(&alive_lock(libc::F_RDLCK)),
    )
    .map_err(|e| Errno::from_raw_os_error(e as i32))?;
    Ok(file)
}

/// Whether any open file [`exported_file`] made of `probe`'s file is still referenced
/// anywhere: `F_OFD_GETLK` through `probe` (an open file of the same file that holds no lock)
/// finds one of their locks. A probe that fails says alive (the registration stays; the next
/// probe asks again).
pub(super) fn exported_file_alive(probe: BorrowedFd<'_>) -> bool {
    let mut lock = alive_lock(libc::F_WRLCK);
    match nix::fcntl::fcntl(
        probe.as_raw_fd(),
        nix::fcntl::FcntlArg::F_OFD_GETLK(&mut lock),
    ) {
        Ok(_) => lock.l_type != libc::F_UNLCK as libc::c_short,
        Err(_) => true,
    }
}

/// The stand-in of an open answered with the access mode the caller asked for (`O_RDONLY`,
/// `O_WRONLY` or `O_RDWR` in `flags`): stand-ins are made read-write, and a reopen of the
/// same file (same inode, so the same registration) gives a narrower mode.
pub(crate) fn with_access_mode(
    action: crate::backend::OpenAction,
    flags: i32,
) -> crate::backend::OpenAction {
    use crate::backend::OpenAction;
    let mode = match flags & libc::O_ACCMODE {
        libc::O_RDONLY => OFlags::RDONLY,
        libc::O_WRONLY => OFlags::WRONLY,
        _ => return action,
    };
    match action {
        OpenAction::Inject(fd) => {
            let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
            match rustix::fs::open(path.as_str(), mode | OFlags::CLOEXEC, Mode::empty()) {
                Ok(narrow) => OpenAction::Inject(narrow),
                Err(errno) => OpenAction::Fail(errno),
            }
        }
        other => other,
    }
}

/// What `do_mmap` says, before the driver's `mmap` runs, about mapping `file` with `prot`
/// and `flags`: `EACCES` for a file not open for reading, and for a shared writable mapping
/// of a file not open for writing; `None` when the access mode allows it.
pub(crate) fn mmap_access_refused(file: BorrowedFd<'_>, prot: u32, flags: u32) -> Option<Errno> {
    let access = rustix::fs::fcntl_getfl(file).ok()? & OFlags::RWMODE;
    let readable = access == OFlags::RDONLY || access == OFlags::RDWR;
    let writable = access == OFlags::WRONLY || access == OFlags::RDWR;
    let shared = matches!(
        flags & 0x3,
        f if f == libc::MAP_SHARED as u32 || f == libc::MAP_SHARED_VALIDATE as u32
    );
    if !readable || (shared && prot & libc::PROT_WRITE as u32 != 0 && !writable) {
        Some(Errno::ACCESS)
    } else {
        None
    }
}

/// Reads `buf.len()` bytes at `offset` of a memfd (holes read as zeros).
pub(super) fn read_at(
    fd: BorrowedFd<'_>,
    mut offset: u64,
    mut buf: &mut [u8],
) -> Result<(), Errno> {
    while !buf.is_empty() {
        super::host_calls::memfd_io();
        let n = rustix::io::pread(fd, &mut *buf, offset)?;
        if n == 0 {
            // Past the end of the file: what a mapping past EOF would show as SIGBUS.
            return Err(Errno::FAULT);
        }
        buf = &mut buf[n..];
        offset += n as u64;
    }
    Ok(())
}

/// Writes `buf` at `offset` of a memfd.
pub(super) fn write_at(fd: BorrowedFd<'_>, mut offset: u64, mut buf: &[u8]) -> Result<(), Errno> {
    while !buf.is_empty() {
        super::host_calls::memfd_io();
        let n = rustix::io::pwrite(fd, buf, offset)?;
        if n == 0 {
            return Err(Errno::FAULT);
        }
        buf = &buf[n..];
        offset += n as u64;
    }
    Ok(())
}

/// The file behind fd number `fd` of process `tgid`: a duplicate of the same open file
/// (`pidfd_getfd`), or, when that is not permitted, a new open of `/proc/<tgid>/fd/<fd>`
/// (same inode, new open file description). `EBADF` when the process has no such fd.
pub(super) fn caller_file(tgid: i32, fd: u32) -> Result<OwnedFd, Errno> {
    let Ok(target) = i32::try_from(fd) else {
        return Err(Errno::BADF);
    };
    if let Some(pid) = rustix::process::Pid::from_raw(tgid)
        && let Ok(pidfd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
    {
        match rustix::process::pidfd_getfd(
            &pidfd,
            target,
            rustix::process::PidfdGetfdFlags::empty(),
        ) {
            Ok(file) => return Ok(file),
            Err(Errno::BADF) => return Err(Errno::BADF),
            Err(_) => {}
        }
    }
    let path = format!("/proc/{tgid}/fd/{fd}");
    rustix::fs::open(
        path.as_str(),
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        Errno::NOENT => Errno::BADF,
        other => other,
    })
}

/// Whether two fds of this process refer to the same open file description (`kcmp`). Falls
/// back to comparing inodes where `kcmp` is not available.
pub(super) fn same_file(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
    let pid = rustix::process::getpid().as_raw_nonzero().get();
    // SAFETY: kcmp(2) takes plain integers and only compares kernel objects; it reads no
    // memory of this process.
    let r = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            libc::c_long::from(pid),
            libc::c_long::from(pid),
            0 as libc::c_long, // KCMP_FILE
            libc::c_long::from(a.as_raw_fd()),
            libc::c_long::from(b.as_raw_fd()),
        )
    };
    match r {
        0 => true,
        1..=2 => false,
        _ => key_of(a).ok() == key_of(b).ok(),
    }
}

/// A read-only file of `text` (a generated file whose contents are decided at open).
pub(super) fn text_file(name: &str, text: &str) -> io::Result<OwnedFd> {
    let fd = memfd(name, text.len() as u64)?;
    write_at(fd.as_fd(), 0, text.as_bytes())?;
    Ok(fd)
}

/// `/proc/modules` as the emulator shows it: an `amdgpu` line, then the host's modules.
pub(super) fn proc_modules() -> io::Result<OwnedFd> {
    let mut text = String::from("amdgpu 20480000 0 - Live 0x0000000000000000\n");
    if let Ok(host) = std::fs::read_to_string("/proc/modules") {
        text.extend(
            host.lines()
                .filter(|line| !line.starts_with("amdgpu "))
                .flat_map(|line| [line, "\n"]),
        );
    }
    let fd = memfd("modules", text.len() as u64)?;
    write_at(fd.as_fd(), 0, text.as_bytes())?;
    Ok(fd)
}

/// `major` of the DRM nodes (`DRM_MAJOR`).
pub const DRM_MAJOR: u32 = 226;

/// `major` of `/dev/kfd`. The kernel allocates it dynamically; 235 is what many hosts show.
pub const KFD_MAJOR: u32 = 235;

/// The parts of sysfs the emulator generates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SysfsPart {
    /// The KFD topology (`/sys/devices/virtual/kfd/kfd/topology`).
    Topology,
    /// The amdgpu module (`/sys/module/amdgpu`).
    AmdgpuModule,
    /// The DRM char devices by number (`/sys/dev/char`, entries `226:<minor>`: links to the
    /// DRM minors under the PCI devices).
    DevChar,
    /// The DRM class (`/sys/class/drm`: `version` and links `card<N>`, `renderD<minor>`).
    ClassDrm,
    /// The KFD class (`/sys/class/kfd`, its device `kfd` with `dev`, `uevent`, `topology/`).
    ClassKfd,
    /// The GPUs' PCI devices (`/sys/devices/pci<domain>:00/<slot>`, with their `drm/`).
    PciDevices,
    /// The directory `/dev/dri`: an empty file per DRM node (`card<N>`, `renderD<minor>`),
    /// for a reader of its entries.
    DevDri,
    /// `/sys/bus/pci/devices`: a link per PCI device to its directory under `devices/`.
    BusPciDevices,
    /// `/sys/devices/system/cpu`: the machine's CPUs.
    SystemCpu,
    /// `/sys/devices/system/node`: the machine's NUMA nodes.
    SystemNode,
    /// `/proc/cpuinfo`.
    ProcCpuinfo,
}

impl SysfsPart {
    /// Its directory inside the generated tree, which is laid out as `/sys` is (so relative
    /// links resolve inside it as they do in sysfs).
    fn dir(self) -> &'static str {
        match self {
            SysfsPart::Topology => "topology",
            SysfsPart::AmdgpuModule => "module/amdgpu",
            SysfsPart::DevChar => "dev/char",
            SysfsPart::ClassDrm => "class/drm",
            SysfsPart::ClassKfd => "class/kfd",
            SysfsPart::PciDevices => "devices",
            SysfsPart::DevDri => "dev/dri",
            SysfsPart::BusPciDevices => "bus/pci/devices",
            SysfsPart::SystemCpu => "devices/system/cpu",
            SysfsPart::SystemNode => "devices/system/node",
            SysfsPart::ProcCpuinfo => "proc/cpuinfo",
        }
    }
}

/// The minor of GPU `gpu`'s primary node `/dev/dri/card<N>`: `drm_minor_alloc` gives a
/// device's primary and render minors the same index, render minors from 128.
pub(super) fn card_minor(gpu: &crate::machine::Gpu) -> u32 {
    gpu.render_minor.saturating_sub(128)
}

/// The name of a primary node (`card<N>`).
pub(super) fn card_name(minor: u32) -> String {
    format!("card{minor}")
}

/// The first DRM node of `machine` that `wanted(minor, primary)` accepts, as (GPU index,
/// primary): each GPU has its primary node (`card<N>`) and its render node.
pub(super) fn drm_node(
    machine: &Machine,
    wanted: impl Fn(u32, bool) -> bool,
) -> Option<(usize, bool)> {
    machine.gpus().iter().enumerate().find_map(|(gpu, g)| {
        [(g.render_minor, false), (card_minor(g), true)]
            .into_iter()
            .find(|&(minor, primary)| wanted(minor, primary))
            .map(|(_, primary)| (gpu, primary))
    })
}

/// The device-node name of DRM minor `minor` (`card<N>` or `renderD<minor>`).
pub(super) fn drm_node_name(minor: u32, primary: bool) -> String {
    if primary {
        card_name(minor)
    } else {
        render_name(minor)
    }
}

/// `/sys/devices/pci<domain>:00`: the root bus the emulated GPUs hang from.
pub(super) fn pci_root(gpu: &crate::machine::Gpu) -> String {
    format!("pci{:04x}:00", gpu.pci_domain)
}

/// `/sys/class/drm/version` (`drm_class_version`).
const DRM_CLASS_VERSION: &str = "drm 1.1.0 20060810\n";

/// Where the generated tree goes first: the tmpfs that glibc's `shm_open` uses (see
/// [`SysfsTree`]).
const SHM: &str = "/dev/shm";

/// The generated sysfs parts (topology, amdgpu module): a private directory, removed on drop.
///
/// The directory is made on a tmpfs ([`SHM`]) where there is one, as sysfs itself is a
/// filesystem in memory (kernfs: `fs/sysfs/mount.c`, `fs/kernfs/`); only if that fails, in
/// `temp_dir()`. On a disk filesystem a many-GPU machine's tree (mi210x8: about 3 000 files)
/// took seconds to write and, at exit, to remove on the loaded 2-core VM (8.5 s of `kfd-emu
/// run`'s life after the program had exited, almost all in `remove_dir_all`; `rm -rf` of a
/// copy: 6.7 s on ext4, 0.04 s on tmpfs), so a harness waiting for kfd-emu to end killed it,
/// which also left the tree behind.
///
/// A tree's directory is held with an exclusive `flock` for the life of its process (taken
/// under a hidden name, then renamed into place, so no tree is ever visible unlocked); the
/// kernel drops the lock when the process ends however it ends (`locks_remove_file` at the
/// last close), so a tree whose lock can be taken belongs to nobody: a kfd-emu that was killed
/// (a harness's time limit, `SIGKILL`) left it, and the next kfd-emu's [`SysfsTree::generate`]
/// removes it ([`sweep`]). The lock is on the directory's inode, not on a pid, so it holds
/// across pid namespaces sharing the tmpfs.
#[derive(Debug)]
pub(super) struct SysfsTree {
    root: PathBuf,
    /// The open directory holding the tree's lock (see above).
    _held: OwnedFd,
    /// Whether the per-CPU directories (`cpu/cpu<N>/`, `node/node<K>/cpu<N>`) are written:
    /// they are written on first use (see [`SysfsTree::needs_cpus`]), as a machine of many
    /// CPUs has thousands of them and most programs read only `cpu/online`.
    cpus_written: bool,
}

impl SysfsTree {
    /// Writes `machine`'s tree to `kfd-emu-<pid>-<n>` in [`SHM`] if it is a directory, else
    /// (or if writing there fails: a small or full tmpfs) in `temp_dir()`.
    pub(super) fn generate(machine: &Machine) -> io::Result<SysfsTree> {
        let shm = Path::new(SHM);
        let mut bases = Vec::with_capacity(2);
        if shm.is_dir() {
            bases.push(shm.to_path_buf());
        }
        bases.push(std::env::temp_dir());
        for base in &bases {
            sweep(base);
        }
        SysfsTree::generate_in(&bases, machine)
    }

    /// Writes `machine`'s tree in the first of `bases` where that succeeds (a failed attempt's
    /// partial tree is removed); the last base's error if none does.
    fn generate_in(bases: &[PathBuf], machine: &Machine) -> io::Result<SysfsTree> {
        let mut last = io::Error::from(io::ErrorKind::NotFound);
        for base in bases {
            match SysfsTree::generate_at(base, machine) {
                Ok(tree) => return Ok(tree),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Writes `machine`'s tree to `base/kfd-emu-<pid>-<n>`; on failure nothing is left there.
    fn generate_at(base: &Path, machine: &Machine) -> io::Result<SysfsTree> {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{TREE_PREFIX}{}-{n}", std::process::id());
        let root = base.join(&name);
        // Made and locked under a hidden name (which `sweep` passes over), then renamed.
        let hidden = base.join(format!(".{name}"));
        for stale in [&root, &hidden] {
            if stale.exists() {
                std::fs::remove_dir_all(stale)?;
            }
        }
        std::fs::create_dir_all(&hidden)?;
        let held = lock_dir(&hidden, FlockOperation::NonBlockingLockExclusive).and_then(|held| {
            std::fs::rename(&hidden, &root)?;
            Ok(held)
        });
        let held = match held {
            Ok(held) => held,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&hidden);
                return Err(e);
            }
        };
        let tree = SysfsTree {
            root,
            _held: held,
            cpus_written: false,
        };
        let topology = tree.root.join(SysfsPart::Topology.dir());
        std::fs::create_dir_all(&topology)?;
        machine.write_sysfs(&topology)?;
        // What libkmod (lsmod, which rocminfo runs) reads of a loaded module.
        let module = tree.root.join(SysfsPart::AmdgpuModule.dir());
        std::fs::create_dir_all(module.join("holders"))?;
        std::fs::create_dir_all(module.join("parameters"))?;
        std::fs::write(module.join("refcnt"), "0\n")?;
        std::fs::write(module.join("initstate"), "live\n")?;
        std::fs::write(module.join("coresize"), "20480000\n")?;
        // The XNACK default follows `noretry`, which the emulated driver leaves at 1.
        std::fs::write(module.join("parameters/noretry"), "1\n")?;
        // Read by kfdtest: `cwsr_enable` (amdgpu_drv.c, `int cwsr_enable = 1`, 0444: without
        // it KFDCWSRTest skips as if CWSR were off) and `emu_mode` (`amdgpu_emu_mode`, default
        // 0; `KFDTestUtil.cpp` reads it to lengthen timeouts on emulators of the hardware).
        std::fs::write(module.join("parameters/cwsr_enable"), "1\n")?;
        std::fs::write(module.join("parameters/emu_mode"), "0\n")?;
        tree.write_drm(machine)?;
        tree.write_system(machine)?;
        // What a listing of /sys/class/kfd shows; the topology below it is its own part.
        let kfd = tree.root.join(SysfsPart::ClassKfd.dir()).join("kfd");
        std::fs::create_dir_all(kfd.join("topology"))?;
        std::fs::write(kfd.join("dev"), format!("{}:0\n", KFD_MAJOR))?;
        std::fs::write(
            kfd.join("uevent"),
            format!("MAJOR={}\nMINOR=0\nDEVNAME=kfd\n", KFD_MAJOR),
        )?;
        Ok(tree)
    }

    /// Writes `/sys/module/amdgpu/version` (a module's `MODULE_VERSION`, which only the
    /// out-of-tree amdgpu declares: see `dkms`).
    pub(super) fn write_module_version(&self, version: &str) -> io::Result<()> {
        let module = self.root.join(SysfsPart::AmdgpuModule.dir());
        std::fs::write(module.join("version"), format!("{version}\n"))
    }

    /// The DRM side of every GPU, as sysfs lays it out: the PCI device
    /// `devices/pci<domain>:00/<slot>` with its files and a `drm/` holding the minors
    /// `card<N>` and `renderD<minor>` (`dev`, `uevent`, links `device` back to the PCI device
    /// and `subsystem`); `dev/char/226:<minor>` and `class/drm/<name>` are links to those
    /// minors, so `realpath` of `/sys/dev/char/226:<minor>/device` is the PCI device (libdrm's
    /// `get_pci_path`); and `/dev/dri` has an entry per node.
    fn write_drm(&self, machine: &Machine) -> io::Result<()> {
        let dri = self.root.join(SysfsPart::DevDri.dir());
        let dev_char = self.root.join(SysfsPart::DevChar.dir());
        let class_drm = self.root.join(SysfsPart::ClassDrm.dir());
        for dir in [&dri, &dev_char, &class_drm] {
            std::fs::create_dir_all(dir)?;
        }
        // Where the PCI devices' `subsystem` links point, and the bus's list of its devices.
        let bus_devices = self.root.join(SysfsPart::BusPciDevices.dir());
        std::fs::create_dir_all(&bus_devices)?;
        let numa = machine.numa_nodes();
        let cpu_total = numa.iter().map(|n| n.cpu_count).sum::<u32>();
        std::fs::write(class_drm.join("version"), DRM_CLASS_VERSION)?;
        for gpu in machine.gpus() {
            let slot = gpu.pci_slot_name();
            let device = format!("{}/{slot}", pci_root(gpu));
            let pci = self.root.join(SysfsPart::PciDevices.dir()).join(&device);
            write_pci_device(gpu, &pci)?;
            // The bus lists every device it has (`pci_bus_add_device` → `bus/pci/devices/<slot>`).
            std::os::unix::fs::symlink(
                format!("../../../devices/{device}"),
                bus_devices.join(&slot),
            )?;
            // Its NUMA node and the CPUs near it (`numa_node_show`, `local_cpus_show`,
            // `local_cpulist_show`, `pci-sysfs.c`): those of the CPU node it is linked to.
            let node = machine.numa_node_of(gpu);
            let (first, count) = numa
                .iter()
                .find(|n| n.id == node)
                .map_or((0, 0), |n| (n.first_cpu, n.cpu_count));
            std::fs::write(pci.join("numa_node"), format!("{node}\n"))?;
            std::fs::write(
                pci.join("local_cpus"),
                format!(
                    "{}\n",
                    crate::machine::cpus::cpu_mask(first, count, cpu_total)
                ),
            )?;
            std::fs::write(
                pci.join("local_cpulist"),
                format!("{}\n", crate::machine::cpus::cpu_range_list(first, count)),
            )?;
            write_amdgpu_files(machine, gpu, &pci)?;
            // The device's bus, by the last component of the link (libdrm's
            // drmParseSubsystemType).
            std::os::unix::fs::symlink("../../../bus/pci", pci.join("subsystem"))?;
            for (name, minor) in [
                (card_name(card_minor(gpu)), card_minor(gpu)),
                (render_name(gpu.render_minor), gpu.render_minor),
            ] {
                // What libdrm's drmNodeIsDRM stats (`device/drm`) lists the minor too.
                let node = pci.join("drm").join(&name);
                std::fs::create_dir_all(&node)?;
                std::fs::write(node.join("dev"), format!("{DRM_MAJOR}:{minor}\n"))?;
                std::fs::write(
                    node.join("uevent"),
                    format!(
                        "MAJOR={DRM_MAJOR}\nMINOR={minor}\nDEVNAME=dri/{name}\nDEVTYPE=drm_minor\n"
                    ),
                )?;
                std::os::unix::fs::symlink(format!("../../../{slot}"), node.join("device"))?;
                std::os::unix::fs::symlink("../../../../../class/drm", node.join("subsystem"))?;
                let target = format!("../../devices/{device}/drm/{name}");
                std::os::unix::fs::symlink(&target, dev_char.join(format!("{DRM_MAJOR}:{minor}")))?;
                std::os::unix::fs::symlink(&target, class_drm.join(&name))?;
                std::fs::write(dri.join(&name), "")?;
            }
        }
        Ok(())
    }

    /// The CPUs and NUMA nodes of `machine` (see [`crate::machine::cpus`]) as the kernel's
    /// `/sys/devices/system/{cpu,node}` and `/proc/cpuinfo` show them: `cpu/{online,possible,
    /// present}` (`0-<last>`, what glibc's `get_nprocs` reads), `cpu/cpu<N>/topology/*`
    /// (`topology_sysfs.c`) and the link `cpu<N>/node<K>`; `node/{online,possible,has_cpu,
    /// has_memory,has_normal_memory}` and `node/node<K>/{cpulist,cpumap,meminfo,distance}`
    /// (`drivers/base/node.c`) with a link `cpu<N>` per CPU. What a program runs on is the
    /// host's CPUs, and `sched_getaffinity` still says which of these it may use. The per-CPU
    /// directories and links are [`SysfsTree::write_cpus`]'s, on first use.
    fn write_system(&self, machine: &Machine) -> io::Result<()> {
        use crate::machine::cpus::{cpu_mask, cpu_range_list};
        let numa = machine.numa_nodes();
        let cpus = machine.cpus();
        let total = u32::try_from(cpus.len()).unwrap_or(u32::MAX);
        let cpu_dir = self.root.join(SysfsPart::SystemCpu.dir());
        let node_dir = self.root.join(SysfsPart::SystemNode.dir());
        std::fs::create_dir_all(&cpu_dir)?;
        std::fs::create_dir_all(&node_dir)?;
        let all = format!("{}\n", cpu_range_list(0, total));
        for name in ["online", "possible", "present"] {
            std::fs::write(cpu_dir.join(name), &all)?;
        }
        std::fs::write(cpu_dir.join("offline"), "\n")?;
        std::fs::write(
            cpu_dir.join("kernel_max"),
            format!("{}\n", crate::machine::cpus::MAX_CPUS - 1),
        )?;
        let ids = cpu_range_list(0, u32::try_from(numa.len()).unwrap_or(u32::MAX));
        for name in [
            "online",
            "possible",
            "has_cpu",
            "has_memory",
            "has_normal_memory",
        ] {
            std::fs::write(node_dir.join(name), format!("{ids}\n"))?;
        }
        for node in &numa {
            let dir = node_dir.join(format!("node{}", node.id));
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join("cpulist"), format!("{}\n", node.cpulist()))?;
            std::fs::write(
                dir.join("cpumap"),
                format!("{}\n", cpu_mask(node.first_cpu, node.cpu_count, total)),
            )?;
            let distances: Vec<String> = node.distances.iter().map(u32::to_string).collect();
            std::fs::write(dir.join("distance"), format!("{}\n", distances.join(" ")))?;
            // node_read_meminfo: "Node %d MemTotal:       %8lu kB"; nothing is in use.
            let kb = node.mem_bytes >> 10;
            let id = node.id;
            std::fs::write(
                dir.join("meminfo"),
                format!(
                    "Node {id} MemTotal:       {kb:8} kB\nNode {id} MemFree:        {kb:8} kB\n\
                     Node {id} MemUsed:        {:8} kB\n",
                    0
                ),
            )?;
        }
        let host = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let proc = self.root.join("proc");
        std::fs::create_dir_all(&proc)?;
        std::fs::write(
            self.root.join(SysfsPart::ProcCpuinfo.dir()),
            crate::machine::cpus::cpuinfo(machine, &host),
        )?;
        Ok(())
    }

    /// Whether a path (`rest` of `part`) needs the per-CPU directories: anything under
    /// `cpu/` but its top files, and under `node/` a listing or a node's `cpu<N>` links.
    pub(super) fn needs_cpus(part: SysfsPart, rest: &str) -> bool {
        const CPU_TOP: [&str; 5] = [
            "/online",
            "/possible",
            "/present",
            "/offline",
            "/kernel_max",
        ];
        const NODE_FILES: [&str; 4] = ["cpulist", "cpumap", "meminfo", "distance"];
        match part {
            SysfsPart::SystemCpu => !CPU_TOP.contains(&rest),
            SysfsPart::SystemNode => {
                let mut parts = rest.trim_start_matches('/').split('/');
                match (parts.next(), parts.next()) {
                    (Some(node), file) if node.starts_with("node") => {
                        !file.is_some_and(|f| NODE_FILES.contains(&f))
                    }
                    (Some(""), None) => true,
                    _ => false,
                }
            }
            _ => false,
        }
    }

    /// Writes the per-CPU directories once: `cpu/cpu<N>/` (`online`, `topology/*`, the link
    /// `node<K>`) and each NUMA node's links `cpu<N>` (see [`SysfsTree::write_system`]).
    pub(super) fn write_cpus(&mut self, machine: &Machine) -> io::Result<()> {
        use crate::machine::cpus::{cpu_mask, cpu_range_list};
        use std::os::unix::fs::symlink;
        if self.cpus_written {
            return Ok(());
        }
        let numa = machine.numa_nodes();
        let cpus = machine.cpus();
        let total = u32::try_from(cpus.len()).unwrap_or(u32::MAX);
        let cpu_dir = self.root.join(SysfsPart::SystemCpu.dir());
        let node_dir = self.root.join(SysfsPart::SystemNode.dir());
        for cpu in &cpus {
            let Some(node) = numa.iter().find(|n| n.id == cpu.numa_node) else {
                continue;
            };
            let dir = cpu_dir.join(format!("cpu{}", cpu.index));
            let topo = dir.join("topology");
            std::fs::create_dir_all(&topo)?;
            if cpu.index != 0 {
                std::fs::write(dir.join("online"), "1\n")?;
            }
            let own = (cpu_mask(cpu.index, 1, total), cpu_range_list(cpu.index, 1));
            let package = (
                cpu_mask(node.first_cpu, node.cpu_count, total),
                node.cpulist(),
            );
            let files = [
                ("physical_package_id", node.id.to_string()),
                ("die_id", "0".to_owned()),
                ("core_id", cpu.core_id.to_string()),
                ("thread_siblings", own.0.clone()),
                ("thread_siblings_list", own.1.clone()),
                ("core_cpus", own.0.clone()),
                ("core_cpus_list", own.1.clone()),
                ("core_siblings", package.0.clone()),
                ("core_siblings_list", package.1.clone()),
                ("die_cpus", package.0.clone()),
                ("die_cpus_list", package.1.clone()),
                ("package_cpus", package.0.clone()),
                ("package_cpus_list", package.1.clone()),
            ];
            for (name, value) in files {
                std::fs::write(topo.join(name), format!("{value}\n"))?;
            }
            symlink(
                format!("../../node/node{}", node.id),
                dir.join(format!("node{}", node.id)),
            )?;
        }
        for node in &numa {
            let dir = node_dir.join(format!("node{}", node.id));
            for cpu in node.first_cpu..node.first_cpu + node.cpu_count {
                symlink(format!("../../cpu/cpu{cpu}"), dir.join(format!("cpu{cpu}")))?;
            }
        }
        self.cpus_written = true;
        Ok(())
    }

    /// When `rest` of `part` is one of a GPU's [`USAGE_FILES`] (by whatever path: the PCI
    /// device, a DRM node's `device`, `/sys/bus/pci/devices`): the GPU's index in `machine`
    /// and the file's index in [`USAGE_FILES`].
    pub(super) fn usage_file(
        &self,
        machine: &Machine,
        part: SysfsPart,
        rest: &str,
    ) -> Option<(usize, usize)> {
        let name = Path::new(rest).file_name()?.to_str()?;
        let which = USAGE_FILES.iter().position(|f| *f == name)?;
        let real = std::fs::canonicalize(self.path(part, rest).ok()?).ok()?;
        let slot = real.parent()?.file_name()?.to_str()?;
        let gpu = machine
            .gpus()
            .iter()
            .position(|g| g.pci_slot_name() == slot)?;
        Some((gpu, which))
    }

    /// The generated file behind `rest` (`""` or `/nodes/0/properties`, relative to `part`'s
    /// root); `ENOENT` for a path that would leave the tree.
    fn path(&self, part: SysfsPart, rest: &str) -> Result<PathBuf, Errno> {
        let rel = Path::new(rest.trim_start_matches('/'));
        if rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(Errno::NOENT);
        }
        let base = self.root.join(part.dir());
        // Joining "" would append a '/', which a file (`/proc/cpuinfo`) refuses.
        Ok(if rel.as_os_str().is_empty() {
            base
        } else {
            base.join(rel)
        })
    }

    /// Opens `rest` the way sysfs would: read-only; a write, create or truncate is `EACCES`.
    pub(super) fn open(&self, part: SysfsPart, rest: &str, flags: i32) -> Result<OwnedFd, Errno> {
        let flags = OFlags::from_bits_retain(flags as u32);
        let access = flags & OFlags::RWMODE;
        if access != OFlags::RDONLY
            || flags.intersects(OFlags::CREATE | OFlags::TRUNC)
            || flags.contains(OFlags::TMPFILE)
        {
            return Err(Errno::ACCESS);
        }
        let path = self.path(part, rest)?;
        let path =
            CString::new(path.into_os_string().into_encoded_bytes()).map_err(|_| Errno::NOENT)?;
        rustix::fs::open(path.as_c_str(), flags | OFlags::CLOEXEC, Mode::empty())
    }

    /// The target of the link `rest`: `EINVAL` for a file or directory, `ENOENT` for a path
    /// not in the tree.
    pub(super) fn readlink(&self, part: SysfsPart, rest: &str) -> Result<String, Errno> {
        let target = std::fs::read_link(self.path(part, rest)?).map_err(|e| io_errno(&e))?;
        target
            .into_os_string()
            .into_string()
            .map_err(|_| Errno::INVAL)
    }

    /// Describes `rest` as sysfs would: directories `0755`, files `0444`, owned by root, with
    /// the generated file's size (so a reader that trusts `st_size` reads it whole; real sysfs
    /// says 4096), link count and times.
    pub(super) fn stat(&self, part: SysfsPart, rest: &str) -> Result<StatAnswer, Errno> {
        use std::os::unix::fs::MetadataExt;
        // A `stat` follows links (the tree's are sysfs's); the few `lstat`s of them see what
        // they point to.
        let meta = std::fs::metadata(self.path(part, rest)?).map_err(|e| {
            e.raw_os_error()
                .map_or(Errno::NOENT, Errno::from_raw_os_error)
        })?;
        let (kind, perm) = if meta.is_dir() {
            (StatKind::Directory, 0o755)
        } else {
            (StatKind::Regular, 0o444)
        };
        let time = |sec: i64, nsec: i64| StatTime {
            sec,
            nsec: u32::try_from(nsec).unwrap_or(0),
        };
        let dev = meta.dev();
        Ok(StatAnswer {
            kind,
            perm,
            dev: (libc::major(dev), libc::minor(dev)),
            ino: meta.ino(),
            nlink: u32::try_from(meta.nlink()).unwrap_or(u32::MAX),
            uid: 0,
            gid: 0,
            size: meta.size(),
            blksize: 4096,
            blocks: meta.blocks(),
            atime: time(meta.atime(), meta.atime_nsec()),
            mtime: time(meta.mtime(), meta.mtime_nsec()),
            ctime: time(meta.ctime(), meta.ctime_nsec()),
        })
    }
}

/// The PCI device files of `gpu` under `dir` (the render node's `device`), in the kernel's
/// formats: `uevent` as `pci_uevent` prints it, the ids as `0x%04x` (`revision` `0x%02x`).
///
/// The topology gives vendor, device, domain and location; it has no subsystem ids, class or
/// revision: the subsystem is the vendor with device 0, the class 0x038000 (display, other),
/// the revision [`Gpu::pci_revision`](crate::machine::Gpu::pci_revision) (what DRM's DEV_INFO
/// reports too).
fn write_pci_device(gpu: &crate::machine::Gpu, dir: &Path) -> io::Result<()> {
    const CLASS: u32 = 0x03_8000;
    let (vendor, device) = (gpu.vendor_id, gpu.device_id);
    let (sub_vendor, sub_device, revision) = (vendor, 0u32, gpu.pci_revision());
    std::fs::create_dir_all(dir)?;
    let uevent = format!(
        "DRIVER=amdgpu\nPCI_CLASS={CLASS:X}\nPCI_ID={vendor:04X}:{device:04X}\n\
         PCI_SUBSYS_ID={sub_vendor:04X}:{sub_device:04X}\nPCI_SLOT_NAME={}\n\
         MODALIAS=pci:v{vendor:08X}d{device:08X}sv{sub_vendor:08X}sd{sub_device:08X}\
         bc{:02X}sc{:02X}i{:02X}\n",
        gpu.pci_slot_name(),
        CLASS >> 16,
        (CLASS >> 8) & 0xff,
        CLASS & 0xff,
    );
    std::fs::write(dir.join("uevent"), uevent)?;
    std::fs::write(dir.join("vendor"), format!("{vendor:#06x}\n"))?;
    std::fs::write(dir.join("device"), format!("{device:#06x}\n"))?;
    std::fs::write(dir.join("subsystem_vendor"), format!("{sub_vendor:#06x}\n"))?;
    std::fs::write(dir.join("subsystem_device"), format!("{sub_device:#06x}\n"))?;
    std::fs::write(dir.join("revision"), format!("{revision:#04x}\n"))?;
    std::fs::write(dir.join("class"), format!("{CLASS:#08x}\n"))?;
    // The configuration space header (type 0) with the same ids; no capability list. A
    // reader without CAP_SYS_ADMIN sees the first 64 bytes of the 256 (`pci_read_config`).
    let mut config = [0u8; 256];
    config[0..2].copy_from_slice(&(vendor as u16).to_le_bytes());
    config[2..4].copy_from_slice(&(device as u16).to_le_bytes());
    // Command: memory space and bus master enabled, as a bound amdgpu leaves it.
    config[4..6].copy_from_slice(&0x0006u16.to_le_bytes());
    config[8] = revision as u8;
    config[9..12].copy_from_slice(&CLASS.to_le_bytes()[..3]);
    config[0x2c..0x2e].copy_from_slice(&(sub_vendor as u16).to_le_bytes());
    config[0x2e..0x30].copy_from_slice(&(sub_device as u16).to_le_bytes());
    std::fs::write(dir.join("config"), config)?;
    Ok(())
}

/// amdgpu's usage files (`amdgpu_mem_info_vram_used_show`, `..._vis_vram_used_show`,
/// `amdgpu_mem_info_gtt_used_show`: `%llu` bytes), answered when opened with what the model's
/// processes hold at that moment.
pub(super) const USAGE_FILES: [&str; 3] = [
    "mem_info_vram_used",
    "mem_info_vis_vram_used",
    "mem_info_gtt_used",
];

/// What amdgpu adds below its PCI device: `ip_discovery/` (see
/// [`crate::machine::ip_discovery`]) for a GPU brought up from its discovery table, and the
/// memory totals of `amdgpu_device_attrs` (`amdgpu_vram_mgr.c`, `amdgpu_gtt_mgr.c`: `%llu`
/// bytes): `mem_info_vram_total` (VRAM), `mem_info_vis_vram_total` (the CPU-visible part: all
/// of it with a large BAR, else the 256 MiB BAR), `mem_info_gtt_total` (the TTM page limit,
/// half of RAM), `unique_id` (`%016llx`) where the topology has one, and the [`USAGE_FILES`].
fn write_amdgpu_files(machine: &Machine, gpu: &crate::machine::Gpu, dir: &Path) -> io::Result<()> {
    let visible = if gpu.large_bar {
        gpu.vram_size
    } else {
        gpu.vram_size.min(256 << 20)
    };
    let gtt = super::memory::Limits::of_machine(machine).ttm;
    for (name, value) in [
        ("mem_info_vram_total", gpu.vram_size),
        ("mem_info_vis_vram_total", visible),
        ("mem_info_gtt_total", gtt),
    ] {
        std::fs::write(dir.join(name), format!("{value}\n"))?;
    }
    // Read through `SysfsTree::usage_file` with the model's current figures; these are
    // what `stat` and a listing see.
    for name in USAGE_FILES {
        std::fs::write(dir.join(name), "0\n")?;
    }
    if let Some(id) = machine
        .node_of(gpu)
        .and_then(|n| n.properties.unique_id)
        .filter(|&id| id != 0)
    {
        std::fs::write(dir.join("unique_id"), format!("{id:016x}\n"))?;
    }
    let Some(blocks) = gpu.ip_blocks() else {
        return Ok(());
    };
    let die = dir.join("ip_discovery/die/0");
    std::fs::create_dir_all(&die)?;
    std::fs::write(die.join("num_ips"), format!("{}\n", blocks.len()))?;
    for block in blocks {
        let hw = die.join(block.hw_id.to_string());
        let inst = hw.join("0");
        std::fs::create_dir_all(&inst)?;
        let (major, minor, revision) = block.version;
        for (name, value) in [
            ("hw_id", block.hw_id.to_string()),
            ("num_instance", "0".to_owned()),
            ("major", major.to_string()),
            ("minor", minor.to_string()),
            ("revision", revision.to_string()),
            ("harvest", "0x0".to_owned()),
            ("num_base_addresses", "0".to_owned()),
        ] {
            std::fs::write(inst.join(name), format!("{value}\n"))?;
        }
        std::fs::write(inst.join("base_addr"), "")?;
        std::os::unix::fs::symlink(block.hw_id.to_string(), die.join(block.name))?;
    }
    Ok(())
}

impl Drop for SysfsTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The name every generated tree's directory starts with (then `<pid>-<n>`).
const TREE_PREFIX: &str = "kfd-emu-";

/// Whether `name` is a generated tree's: [`TREE_PREFIX`]`<pid>-<n>`, digits only (the
/// scratch directories tests and tools make under the same prefix, `kfd-emu-asm-…`, never
/// match).
fn is_tree_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(TREE_PREFIX) else {
        return false;
    };
    let mut parts = rest.split('-');
    let digits =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    digits(parts.next()) && digits(parts.next()) && parts.next().is_none()
}

/// Opens the directory `dir` and takes `op` (an exclusive `flock`, non-blocking) on it.
fn lock_dir(dir: &Path, op: FlockOperation) -> io::Result<OwnedFd> {
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    )?;
    rustix::fs::flock(&fd, op)?;
    Ok(fd)
}

/// Removes the trees in `base` that nobody holds (see [`SysfsTree`]): a directory named as
/// one ([`is_tree_name`]) whose `flock` can be taken. A live kfd-emu's tree refuses the lock
/// (`EWOULDBLOCK`) and is passed over; so is anything that is not a directory. Listed with
/// `getdents64` (rustix's `Dir`, no glibc allocation: see `crate::own`). Best effort: a
/// failure leaves that entry.
fn sweep(base: &Path) {
    let Ok(dir) = rustix::fs::open(
        base,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return;
    };
    let Ok(entries) = rustix::fs::Dir::read_from(&dir) else {
        return;
    };
    let names: Vec<String> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().to_str().ok()?;
            is_tree_name(name).then(|| name.to_owned())
        })
        .collect();
    for name in names {
        let path = base.join(name);
        // Held while removing, so no other sweeper takes it meanwhile.
        if let Ok(_held) = lock_dir(&path, FlockOperation::NonBlockingLockExclusive) {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// The errno of an I/O error (EIO when it carries none).
pub(super) fn io_errno(e: &std::io::Error) -> Errno {
    e.raw_os_error().map_or(Errno::IO, Errno::from_raw_os_error)
}

#[cfg(test)]
mod tests {
    use super::{SysfsPart, SysfsTree};
    use crate::machine::Machine;
    use std::path::PathBuf;

    /// `statfs(2)`'s `f_type` of tmpfs (`TMPFS_MAGIC`, `include/uapi/linux/magic.h`).
    const TMPFS_MAGIC: i64 = 0x0102_1994;

    #[test]
    fn the_tree_is_written_on_a_tmpfs_where_there_is_one() {
        let shm = rustix::fs::statfs("/dev/shm");
        let Ok(shm) = shm else {
            return; // no /dev/shm here: the fallback test covers temp_dir()
        };
        if shm.f_type != TMPFS_MAGIC {
            return;
        }
        let tree = SysfsTree::generate(&Machine::preset("mi210x8").unwrap()).unwrap();
        assert!(tree.root.starts_with("/dev/shm"), "{}", tree.root.display());
        let at = rustix::fs::statfs(&tree.root).unwrap();
        assert_eq!(at.f_type, TMPFS_MAGIC);
        let root = tree.root.clone();
        assert!(root.join("topology/nodes/8/gpu_id").exists());
        drop(tree);
        assert!(!root.exists(), "removed on drop");
    }

    #[test]
    fn a_tree_nobody_holds_is_swept_and_a_held_one_is_not() {
        // Not named like a tree: other tests' kfd-emus sweep temp_dir().
        let base = std::env::temp_dir().join(format!("sweep-test-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let machine = Machine::preset("mi100").unwrap();
        let held = SysfsTree::generate_in(std::slice::from_ref(&base), &machine).unwrap();
        // A killed kfd-emu's tree: the same files, no lock (its process is gone).
        let left = base.join("kfd-emu-999999999-0");
        std::fs::create_dir_all(left.join("topology/nodes/1")).unwrap();
        std::fs::write(left.join("topology/nodes/1/gpu_id"), "1\n").unwrap();
        // Not trees: a file named as one, a test's scratch directory, a hidden name.
        std::fs::write(base.join("kfd-emu-1-1"), "").unwrap();
        std::fs::create_dir_all(base.join("kfd-emu-asm-1-0")).unwrap();
        std::fs::create_dir_all(base.join(".kfd-emu-1-0")).unwrap();
        // A link named as a tree, to a directory a sweep must not empty (the lock's open
        // refuses a link: O_NOFOLLOW).
        let victim = base.join("victim");
        std::fs::create_dir_all(&victim).unwrap();
        std::fs::write(victim.join("keep"), "").unwrap();
        std::os::unix::fs::symlink(&victim, base.join("kfd-emu-2-2")).unwrap();
        super::sweep(&base);
        assert!(
            victim.join("keep").exists(),
            "a link's target is left alone"
        );
        assert!(
            base.join("kfd-emu-2-2").symlink_metadata().is_ok(),
            "and so is the link"
        );
        assert!(!left.exists(), "an unheld tree is removed");
        assert!(
            held.root.join("topology/nodes/1/gpu_id").exists(),
            "a held one stays"
        );
        assert!(base.join("kfd-emu-1-1").exists());
        assert!(base.join("kfd-emu-asm-1-0").exists());
        assert!(base.join(".kfd-emu-1-0").exists());
        let root = held.root.clone();
        drop(held);
        assert!(!root.exists());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_base_that_fails_leaves_nothing_and_the_next_one_is_used() {
        let scratch = std::env::temp_dir().join(format!("files-test-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).unwrap();
        // A regular file where the first base should be: nothing can be made under it.
        let not_a_dir = scratch.join("file");
        std::fs::write(&not_a_dir, "").unwrap();
        let good = scratch.join("good");
        std::fs::create_dir_all(&good).unwrap();
        let machine = Machine::preset("mi100").unwrap();
        let tree = SysfsTree::generate_in(&[not_a_dir.clone(), good.clone()], &machine).unwrap();
        assert!(tree.root.starts_with(&good), "{}", tree.root.display());
        assert!(tree.root.join("topology/nodes/1/gpu_id").exists());
        drop(tree);
        let none: Vec<PathBuf> = vec![not_a_dir.clone()];
        assert!(SysfsTree::generate_in(&none, &machine).is_err());
        assert!(
            std::fs::read_dir(&good).unwrap().next().is_none(),
            "removed on drop"
        );
        std::fs::remove_dir_all(&scratch).unwrap();
    }

    #[test]
    fn only_paths_into_the_per_cpu_directories_need_them() {
        let cpu = SysfsPart::SystemCpu;
        let node = SysfsPart::SystemNode;
        // glibc's get_nprocs and the other top files.
        for top in [
            "/online",
            "/possible",
            "/present",
            "/offline",
            "/kernel_max",
        ] {
            assert!(!SysfsTree::needs_cpus(cpu, top), "{top}");
        }
        assert!(SysfsTree::needs_cpus(cpu, ""), "a listing of cpu/");
        assert!(SysfsTree::needs_cpus(cpu, "/cpu7/topology/core_id"));
        assert!(!SysfsTree::needs_cpus(node, "/online"));
        assert!(!SysfsTree::needs_cpus(node, "/node1/cpulist"));
        assert!(!SysfsTree::needs_cpus(node, "/node0/meminfo"));
        assert!(SysfsTree::needs_cpus(node, ""), "a listing of node/");
        assert!(SysfsTree::needs_cpus(node, "/node1"), "a listing of node1/");
        assert!(SysfsTree::needs_cpus(node, "/node1/cpu64"));
        assert!(!SysfsTree::needs_cpus(SysfsPart::Topology, "/nodes/0"));
    }
}
