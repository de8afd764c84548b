//! A deterministic fuzz test of the model: thousands of random ioctl command words and
//! argument bytes (and some random opens) through the Backend. The model must not panic, must
//! not hang, and must answer every call with success or an errno the kernel can return.
//!
//! `KFD_EMU_FUZZ_SEED` and `KFD_FUZZ_ITERS` (or `KFD_EMU_FUZZ_ITERATIONS`) change the run; the
//! defaults are quick enough for CI.

mod model_support;

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::mpsc;
use std::time::Duration;

use kfd_emu::backend::{Backend, OpenAction};
use kfd_emu::model::ModelConfig;
use kfd_ioctl::abi::*;
use kfd_skip::Rng;
use model_support::*;
use rustix::io::Errno;

/// Every errno the kernel's KFD and DRM paths can answer with (plus EMFILE from installing a
/// dma-buf fd into a full table).
fn kernel_errno(e: Errno) -> bool {
    [
        Errno::PERM,
        Errno::SRCH,
        Errno::INTR,
        Errno::IO,
        Errno::BADF,
        Errno::NOMEM,
        Errno::ACCESS,
        Errno::FAULT,
        Errno::BUSY,
        Errno::EXIST,
        Errno::NODEV,
        Errno::INVAL,
        Errno::MFILE,
        Errno::NOSPC,
        Errno::NOTTY,
        Errno::ADDRINUSE,
        // GEM lookups (`drm_gem_object_lookup`), BO lists.
        Errno::NOENT,
        Errno::OPNOTSUPP,
        Errno::from_raw_os_error(524), // ENOTSUPP
        // A USERPTR whose range wraps (`mmu_interval_notifier_insert`).
        Errno::OVERFLOW,
    ]
    .contains(&e)
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The iteration count: `KFD_FUZZ_ITERS`, else `KFD_EMU_FUZZ_ITERATIONS`, else `default`.
fn iterations(default: u64) -> u64 {
    env_u64(
        "KFD_FUZZ_ITERS",
        env_u64("KFD_EMU_FUZZ_ITERATIONS", default),
    )
}

const PAGE: usize = 4096;
/// The byte the read-only hostile page is filled with.
const READ_ONLY_FILL: u8 = 0xA5;

/// Four pages the fuzzed pointers aim at: read-write, read-only (filled with
/// [`READ_ONLY_FILL`], which must never change), `PROT_NONE`, and unmapped.
struct HostilePages {
    base: *mut u8,
}

impl HostilePages {
    fn new() -> HostilePages {
        // SAFETY: a fresh anonymous mapping of four pages that this struct owns; the pages
        // are re-protected or unmapped here and only reached through raw pointers the model
        // is given (never as Rust references).
        unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                4 * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(base, libc::MAP_FAILED, "mmap");
            let base = base.cast::<u8>();
            std::ptr::write_bytes(base.add(PAGE), READ_ONLY_FILL, PAGE);
            assert_eq!(
                libc::mprotect(base.add(PAGE).cast(), PAGE, libc::PROT_READ),
                0
            );
            assert_eq!(
                libc::mprotect(base.add(2 * PAGE).cast(), PAGE, libc::PROT_NONE),
                0
            );
            assert_eq!(libc::munmap(base.add(3 * PAGE).cast(), PAGE), 0);
            HostilePages { base }
        }
    }

    /// Addresses in and around the pages: the middle and the end of each (a struct that
    /// runs from one into the next), and the unmapped page.
    fn pointers(&self) -> Vec<u64> {
        let base = self.base as u64;
        let page = PAGE as u64;
        vec![
            base,
            base + page - 8,
            base + page,
            base + 2 * page - 8,
            base + 2 * page,
            base + 3 * page - 4,
            base + 3 * page,
        ]
    }

    /// Whether the read-only page still holds only [`READ_ONLY_FILL`].
    fn read_only_intact(&self) -> bool {
        // SAFETY: the page is mapped readable for the life of `self`; nothing writes it (the
        // point of the check), and it is read as bytes through a raw pointer.
        (0..PAGE).all(|i| unsafe { self.base.add(PAGE + i).read_volatile() } == READ_ONLY_FILL)
    }
}

impl Drop for HostilePages {
    fn drop(&mut self) {
        // SAFETY: the first three pages of the mapping made in `new` (the fourth is gone).
        unsafe { libc::munmap(self.base.cast(), 3 * PAGE) };
    }
}

/// Fills `buf` with random bytes, then, field by field, sometimes with a value that gets
/// further into a handler: a real gpu_id or handle, a pointer into `scratch`, a small number.
fn fill(rng: &mut Rng, buf: &mut [u8], interesting: &[u64]) {
    for b in buf.iter_mut() {
        *b = rng.next() as u8;
    }
    if rng.chance(30) {
        buf.fill(0);
    }
    for at in (0..buf.len().saturating_sub(8)).step_by(4) {
        if rng.chance(35) {
            let v = rng.pick(interesting);
            if rng.chance(50) {
                buf[at..at + 4].copy_from_slice(&(v as u32).to_ne_bytes());
            } else {
                buf[at..at + 8].copy_from_slice(&v.to_ne_bytes());
            }
        }
    }
}

/// The model on an 8-GPU machine with the first `acquired` GPUs acquired and a 2 MiB VRAM BO
/// on each of the first `with_bo`: the emulator, the gpu_ids, the BO handles.
fn fuzz_target(acquired: usize, with_bo: usize) -> (Emu, Vec<u32>, Vec<u64>) {
    let mut emu = Emu::new(ModelConfig {
        machine: kfd_emu::machine::Machine::preset("mi210x8").expect("preset"),
        ..ModelConfig::default()
    });
    for i in 0..acquired {
        emu.acquire(i).expect("acquire");
    }
    let gpus = emu.gpu_ids();
    let handles = gpus
        .iter()
        .enumerate()
        .take(with_bo)
        .map(|(i, &gpu)| {
            emu.alloc(gpu, va(i as u64), 2 << 20, VRAM_RW)
                .expect("alloc")
                .0
        })
        .collect();
    (emu, gpus, handles)
}

/// Issues `cmd` at `addr` on stand-in `fd` as `caller` and checks the answer is success or a
/// kernel errno; closes the dma-buf a successful EXPORT_DMABUF into `buf` installed, so the fd
/// table does not fill up.
fn call_and_check(
    emu: &Emu,
    caller: &TestCaller,
    fd: std::os::fd::BorrowedFd<'_>,
    cmd: u32,
    addr: u64,
    buf: &[u8],
    on_render: bool,
) {
    let Some(result) = emu.model.ioctl(caller, fd, cmd, addr) else {
        panic!("cmd {cmd:#010x}: a stand-in was not recognised");
    };
    match result {
        Ok(_) => {
            if !on_render && cmd & 0xFF == 0x24 && addr == buf.as_ptr() as u64 {
                let fd = u32::from_ne_bytes(buf[12..16].try_into().expect("4"));
                drop(own_fd(fd));
            }
        }
        Err(e) => assert!(
            kernel_errno(e),
            "cmd {cmd:#010x} at {addr:#x} answered {e:?}"
        ),
    }
}

fn run(seed: u64, iterations: u64) -> u64 {
    let mut rng = Rng(seed | 1);
    let (mut emu, gpus, handles) = fuzz_target(6, 3);
    // Memory the fuzzed pointers may point into (the model may write there).
    let mut scratch = vec![0u8; 1 << 16];
    let scratch_ptr = scratch.as_mut_ptr() as u64;
    let mut interesting: Vec<u64> = vec![
        0,
        1,
        2,
        0xFFFF_FFFF,
        u64::MAX,
        4096,
        8192,
        1 << 21,
        1 << 47,
        va(7),
        emu.kfd.as_raw_fd() as u64,
        emu.renders[0].as_raw_fd() as u64,
        scratch_ptr,
        scratch_ptr + 4096,
        u64::from(KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE),
        u64::from(KFD_IOC_ALLOC_MEM_FLAGS_GTT),
        u64::from(KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL),
        u64::from(KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP),
        u64::from(KFD_IOC_ALLOC_MEM_FLAGS_USERPTR),
        0x263E,
    ];
    interesting.extend(gpus.iter().map(|&g| u64::from(g)));
    interesting.extend(&handles);
    let hostile = HostilePages::new();
    interesting.extend(hostile.pointers());

    let paths = [
        "/dev/kfd",
        "/dev/dri/renderD128",
        "/dev/dri/renderD135",
        "/dev/dri/renderD255",
        "/proc/modules",
        "/sys/devices/virtual/kfd/kfd/topology",
        "/sys/devices/virtual/kfd/kfd/topology/nodes/3/properties",
        "/sys/class/kfd/kfd/topology/nodes/0/caches/1/properties",
        "/sys/class/kfd/kfd/topology/nodes/../../../../etc/passwd",
        "/sys/class/kfd/kfd/topology/system_properties",
    ];
    let callers = [emu.caller, emu.caller, emu.caller, TestCaller::other()];
    let mut answered = 0;
    for iteration in 0..iterations {
        if rng.chance(3) {
            let path = rng.pick(&paths);
            let random_flags = rng.next() as i32 & !libc::O_CREAT & !libc::O_TMPFILE;
            let flags = rng.pick(&[
                libc::O_RDONLY,
                libc::O_RDWR,
                libc::O_WRONLY | libc::O_CREAT,
                libc::O_RDONLY | libc::O_DIRECTORY,
                random_flags,
            ]);
            match emu.model.open(&emu.caller, path, flags, 0o600) {
                OpenAction::Inject(fd) => drop(fd),
                OpenAction::Fail(e) => assert!(e.raw_os_error() > 0),
                OpenAction::Continue => {}
            }
            continue;
        }
        let nr: u8 = match rng.below(10) {
            0..=6 => rng.below(0x2A) as u8,
            7 => 0x80 + rng.below(8) as u8,
            _ => rng.next() as u8,
        };
        let random_kind = rng.next() as u8;
        let kind = rng.pick(&[b'K', b'K', b'K', b'd', random_kind]);
        let table = ioctl_info(nr).map_or(0, |i| i.size);
        let size = match rng.below(10) {
            0..=5 => table,
            6..=8 => rng.below(257) as usize,
            _ => rng.below(1 << 14) as usize,
        };
        let dir = rng.below(4) as u32;
        let cmd = (dir << 30) | ((size as u32) << 16) | (u32::from(kind) << 8) | u32::from(nr);
        let mut buf = vec![0u8; size.max(64) + 64];
        fill(&mut rng, &mut buf, &interesting);
        if nr == 0x0C && buf.len() >= 24 {
            // WAIT_EVENTS may legitimately block forever; keep the timeouts short.
            let timeout = rng.below(3) as u32;
            buf[16..20].copy_from_slice(&timeout.to_ne_bytes());
        }
        let addr = match rng.below(20) {
            0 => 0,
            1 => rng.below(4096),
            2 => 0xFFFF_8000_0000_0000 | rng.next(),
            3 => rng.pick(&hostile.pointers()),
            _ => buf.as_mut_ptr() as u64,
        };
        let on_render = rng.chance(10);
        let fd = if on_render {
            emu.renders[rng.below(emu.renders.len() as u64) as usize].as_fd()
        } else {
            emu.kfd.as_fd()
        };
        let caller = rng.pick(&callers);
        call_and_check(&emu, &caller, fd, cmd, addr, &buf, on_render);
        answered += 1;
        if iteration == iterations * 3 / 4 {
            // The rest runs against a process that went away.
            emu.model.process_exited(emu.caller.tgid);
        }
    }
    assert!(
        hostile.read_only_intact(),
        "the model wrote a read-only page"
    );
    drop(scratch);
    let _: Vec<OwnedFd> = std::mem::take(&mut emu.renders);
    answered
}

#[test]
fn random_ioctls_get_kernel_errnos_without_panics_or_hangs() {
    let seed = env_u64("KFD_EMU_FUZZ_SEED", 0x5EED_CAFE_F00D_0001);
    let iterations = iterations(20_000);
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let answered = run(seed, iterations);
        let _ = tx.send(answered);
    });
    match rx.recv_timeout(Duration::from_secs(300)) {
        Ok(answered) => assert!(answered > iterations / 2, "most iterations were ioctls"),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the model hung (seed {seed:#x})"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The worker panicked: report its panic.
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
            unreachable!("the worker ended without an answer or a panic");
        }
    }
}

/// How the argument of one call of [`every_ioctl_under_hostile_arguments`] is shaped.
#[derive(Debug, Clone, Copy)]
enum Size {
    /// The size of the kernel's table entry.
    Table,
    Zero,
    /// Half the table's size: the kernel zero-extends.
    Short,
    /// Larger than the table's: the kernel copies the caller's size.
    Long,
    /// Anything up to 16 KiB.
    Random,
}

/// Every `/dev/kfd` ioctl number of the table (and a few past its end), and every DRM number
/// the render node answers, each called under every combination of size word and argument
/// pointer (null, low, kernel, read-only, `PROT_NONE`, unmapped, straddling into a fault,
/// valid) with random contents salted with real gpu_ids, handles and hostile pointers. The
/// model must answer each with success or a kernel errno, and never write a read-only page.
#[test]
fn every_ioctl_under_hostile_arguments() {
    let seed = env_u64("KFD_EMU_FUZZ_SEED", 0x5EED_CAFE_F00D_0002);
    let mut rng = Rng(seed | 1);
    let (mut emu, gpus, handles) = fuzz_target(4, 2);
    let hostile = HostilePages::new();
    let mut interesting: Vec<u64> = vec![0, 1, 0xFFFF_FFFF, u64::MAX, 4096, 1 << 21, va(5)];
    interesting.extend(gpus.iter().map(|&g| u64::from(g)));
    interesting.extend(&handles);
    interesting.extend(hostile.pointers());
    let kfd_numbers: Vec<u8> = (0..command_end(KFD_IOCTL_MINOR_VERSION) as u8 + 3).collect();
    // DRM_IOCTL_VERSION, GET_CLIENT, AMDGPU_INFO, GEM_CLOSE, the PRIME pair, amdgpu's GEM,
    // CTX, BO_LIST, CS and WAIT_CS, and two the model refuses.
    let drm_numbers: [u8; 18] = [
        0x00, 0x05, 0x45, 0x09, 0x2D, 0x2E, 0x40, 0x41, 0x42, 0x43, 0x44, 0x46, 0x47, 0x48, 0x49,
        0x50, 0x01, 0x51,
    ];
    let sizes = [
        Size::Table,
        Size::Zero,
        Size::Short,
        Size::Long,
        Size::Random,
    ];
    let pointer_kinds = 4 + hostile.pointers().len();
    let calls_per_round = (kfd_numbers.len() + drm_numbers.len()) * sizes.len() * pointer_kinds;
    let rounds = (iterations(30_000) as usize)
        .div_ceil(calls_per_round)
        .max(1);
    let mut calls = 0u64;
    for _ in 0..rounds {
        for (number, on_render) in kfd_numbers
            .iter()
            .map(|&n| (n, false))
            .chain(drm_numbers.iter().map(|&n| (n, true)))
        {
            for &size in &sizes {
                for pointer in 0..pointer_kinds {
                    let table = if on_render {
                        64
                    } else {
                        ioctl_info(number).map_or(0, |i| i.size)
                    };
                    let size = match size {
                        Size::Table => table,
                        Size::Zero => 0,
                        Size::Short => table / 2,
                        Size::Long => table + 8 * (1 + rng.below(8) as usize),
                        Size::Random => rng.below(1 << 14) as usize,
                    };
                    let dir = rng.below(4) as u32;
                    let kind = if on_render { b'd' } else { b'K' };
                    let cmd = (dir << 30)
                        | (((size & 0x3FFF) as u32) << 16)
                        | (u32::from(kind) << 8)
                        | u32::from(number);
                    let mut buf = vec![0u8; size.max(64) + 64];
                    fill(&mut rng, &mut buf, &interesting);
                    if number == 0x0C && !on_render && buf.len() >= 24 {
                        // WAIT_EVENTS: never wait long.
                        buf[16..20].copy_from_slice(&0u32.to_ne_bytes());
                    }
                    let addr = match pointer {
                        0 => 0,
                        1 => 1 + rng.below(4095),
                        2 => 0xFFFF_8000_0000_0000 | rng.next(),
                        3 => buf.as_mut_ptr() as u64,
                        n => hostile.pointers()[n - 4],
                    };
                    let fd = if on_render {
                        emu.renders[0].as_fd()
                    } else {
                        emu.kfd.as_fd()
                    };
                    call_and_check(&emu, &emu.caller, fd, cmd, addr, &buf, on_render);
                    calls += 1;
                }
            }
        }
    }
    assert!(
        hostile.read_only_intact(),
        "the model wrote a read-only page"
    );
    eprintln!("every_ioctl_under_hostile_arguments: {calls} calls (seed {seed:#x})");
    let _: Vec<OwnedFd> = std::mem::take(&mut emu.renders);
}
