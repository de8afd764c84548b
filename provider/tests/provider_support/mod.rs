//! What the provider tests share: making providers, CPU access to their memory, and the GPU
//! view of it (emulated targets only).

#![allow(dead_code)]

use kfd_ioctl::Kfd;
use kfd_provider::{Error, KfdProvider, MemoryKind, ProviderParams, UmfResult};
use kfd_tests::Target;

/// The machines every provider test runs on.
pub const MACHINES: &[&str] = &["mi300x", "mi210x8"];

/// The system page size.
pub fn page() -> usize {
    rustix::param::page_size()
}

/// A provider of `kind` on the first GPU, on a fresh `/dev/kfd` handle (the first of the
/// process: later providers of the process share it through [`sibling`]).
pub fn provider(target: &Target, kind: MemoryKind) -> KfdProvider {
    let kfd = Kfd::open().unwrap_or_else(|e| panic!("{}: {e}", target.name()));
    KfdProvider::new(kfd, ProviderParams::new(kind))
        .unwrap_or_else(|e| panic!("{}: creating a {kind:?} provider: {e}", target.name()))
}

/// Another provider on the same `/dev/kfd` handle as `p` (KFD binds a GPU's VM to one
/// handle per process).
pub fn sibling(p: &KfdProvider, params: ProviderParams) -> KfdProvider {
    KfdProvider::new(p.kfd().clone(), params)
        .unwrap_or_else(|e| panic!("creating a {:?} provider: {e}", p.kind()))
}

/// Asserts that `result` failed with `umf` as its UMF result.
#[track_caller]
pub fn assert_umf<T: std::fmt::Debug>(result: Result<T, Error>, umf: UmfResult) -> Error {
    match result {
        Ok(v) => panic!("expected {umf:?}, got Ok({v:?})"),
        Err(e) => {
            assert_eq!(e.umf_result(), umf, "{e}");
            e
        }
    }
}

/// Fills `len` bytes at `ptr` with `byte` from the CPU.
pub fn fill(ptr: *mut u8, len: usize, byte: u8) {
    // SAFETY: the tests only pass provider memory they allocated (or opened) with at least
    // `len` bytes, mapped for the CPU, and hold no reference into it.
    unsafe { std::ptr::write_bytes(ptr, byte, len) }
}

/// Writes `data` at `ptr` from the CPU.
pub fn write(ptr: *mut u8, data: &[u8]) {
    // SAFETY: as for `fill`: live, CPU-mapped provider memory of at least `data.len()` bytes.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, data.len()) }
}

/// Reads `len` bytes at `ptr` from the CPU.
pub fn read(ptr: *const u8, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    // SAFETY: as for `fill`: live, CPU-mapped provider memory of at least `len` bytes.
    unsafe { std::ptr::copy_nonoverlapping(ptr, out.as_mut_ptr(), len) };
    out
}

/// What GPU `gpu_id` reads at `ptr` in this process's VM, on an emulated target.
pub fn gpu_read(
    target: &Target,
    gpu_id: kfd_ioctl::GpuId,
    ptr: *const u8,
    len: usize,
) -> Option<Vec<u8>> {
    match target {
        Target::Emulated { model, .. } => {
            let mut out = vec![0u8; len];
            model
                .gpu_read(
                    std::process::id() as i32,
                    gpu_id.get(),
                    ptr as u64,
                    &mut out,
                )
                .unwrap_or_else(|e| panic!("{}: {e}", target.name()));
            Some(out)
        }
        Target::Hardware => None,
    }
}

/// Writes `data` at `ptr` as GPU `gpu_id` would, on an emulated target; false on hardware.
pub fn gpu_write(target: &Target, gpu_id: kfd_ioctl::GpuId, ptr: *const u8, data: &[u8]) -> bool {
    match target {
        Target::Emulated { model, .. } => {
            model
                .gpu_write(std::process::id() as i32, gpu_id.get(), ptr as u64, data)
                .unwrap_or_else(|e| panic!("{}: {e}", target.name()));
            true
        }
        Target::Hardware => false,
    }
}

/// A byte pattern that differs at every offset of a page.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

/// Checks the provider has nothing left.
#[track_caller]
pub fn assert_empty(target: &Target, provider: &KfdProvider) {
    let stats = provider.stats();
    assert_eq!(
        (
            stats.allocations,
            stats.chunks,
            stats.allocated,
            stats.opened_ipc,
            stats.pending_release
        ),
        (0, 0, 0, 0, 0),
        "{}: {stats:?}",
        target.name()
    );
}

/// Forks; the child runs `child` and exits with 0 when it returns `Ok`, printing the error
/// and exiting with 1 otherwise. Returns whether the child succeeded.
pub fn in_forked_child(child: impl FnOnce() -> Result<(), String>) -> bool {
    // SAFETY: the child only runs `child`, which takes no lock another thread of the test
    // process could hold (the providers' locks are this thread's; glibc's malloc is fork
    // safe), and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = match child() {
            Ok(()) => 0,
            Err(message) => {
                let line = format!("forked child: {message}\n");
                // SAFETY: writes a buffer we own to stderr.
                unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
                1
            }
        };
        // SAFETY: ends the child without running the parent's destructors again.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}
