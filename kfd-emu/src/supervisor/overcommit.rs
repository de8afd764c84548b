//! The overcommit check of a large anonymous `mmap`, made with the emulated machine's RAM.
//!
//! The kernel accounts a private writable anonymous mapping, and any shared anonymous one (its
//! shmem file: `shmem_zero_setup` → `shmem_acct_size`), unless it has `VM_NORESERVE`
//! (`accountable_mapping` and `mmap_region` in `mm/mmap.c`; `do_mmap` sets `VM_NORESERVE` for
//! `MAP_NORESERVE` unless `vm.overcommit_memory` is 2). Under the default heuristic
//! (`OVERCOMMIT_GUESS`, `__vm_enough_memory` in `mm/util.c`) an accounted mapping fails with
//! `ENOMEM` only when it alone is larger than RAM and swap together:
//! `pages > totalram_pages() + total_swap_pages`.
//!
//! A program under `kfd-emu run` runs on the host's kernel, whose RAM is the host's, while the
//! machine it is shown (the KFD topology, the NUMA nodes) may have more: kfdtest's
//! `VramOvercommitGiantRangeTest` maps VRAM + 1 GiB (65 GiB on mi210x8, whose CPU nodes have
//! 2 × 256 GiB) in one private mapping it never touches, which the machine's kernel makes and
//! a 24 GiB host refuses. [`noreserve`] says when such a call is one the host refuses for its
//! size alone and the machine would make: the tracer then adds `MAP_NORESERVE`, so the host
//! does not account it (what the program can see of that: `Committed_AS` in the host's
//! `/proc/meminfo`, which stays the host's anyway). A mapping larger than the machine's RAM
//! and swap is left to fail as it would there. The swap is the host's (`/proc/swaps` is).

/// The page size the accounting counts in (x86-64).
const PAGE: u64 = 4096;

/// The memory an overcommit decision is made against, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Commit {
    /// The host's RAM (`totalram_pages()`).
    pub host_ram: u64,
    /// The host's swap (`total_swap_pages`).
    pub swap: u64,
    /// The emulated machine's RAM.
    pub machine_ram: u64,
}

impl Commit {
    /// The host's figures from `sysinfo`, with `machine_ram`.
    pub(super) fn of_host(machine_ram: u64) -> Commit {
        let si = rustix::system::sysinfo();
        let unit = u64::from(si.mem_unit.max(1));
        Commit {
            host_ram: si.totalram.saturating_mul(unit),
            swap: si.totalswap.saturating_mul(unit),
            machine_ram,
        }
    }
}

/// Whether an anonymous `mmap` of `len` bytes with `prot` and `flags` gets `MAP_NORESERVE`:
/// the kernel would account it, the host's heuristic refuses it for its size and the
/// machine's would not.
pub(super) fn noreserve(len: u64, prot: u64, flags: u64, commit: Commit) -> bool {
    let flag = |f: i32| flags & f as u64 != 0;
    if !flag(libc::MAP_ANONYMOUS) || flag(libc::MAP_NORESERVE) || flag(libc::MAP_HUGETLB) {
        return false;
    }
    let shared = flags & libc::MAP_TYPE as u64 != libc::MAP_PRIVATE as u64;
    if !shared && prot & libc::PROT_WRITE as u64 == 0 {
        // accountable_mapping: a private mapping is accounted only when writable.
        return false;
    }
    // vm_enough_memory counts whole pages.
    let pages = len.div_ceil(PAGE);
    let host = (commit.host_ram / PAGE).saturating_add(commit.swap / PAGE);
    let machine = (commit.machine_ram / PAGE).saturating_add(commit.swap / PAGE);
    pages > host && pages <= machine
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;
    const RW: u64 = (libc::PROT_READ | libc::PROT_WRITE) as u64;
    const PRIVATE: u64 = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
    const SHARED: u64 = (libc::MAP_SHARED | libc::MAP_ANONYMOUS) as u64;

    /// A 24 GiB host with 2 GiB of swap shown as mi210x8 (512 GiB).
    fn commit() -> Commit {
        Commit {
            host_ram: 24 * GIB,
            swap: 2 * GIB,
            machine_ram: 512 * GIB,
        }
    }

    #[test]
    fn a_mapping_only_the_machine_has_the_memory_for_gets_noreserve() {
        assert!(
            noreserve(65 * GIB, RW, PRIVATE, commit()),
            "kfdtest's giant range"
        );
        assert!(
            noreserve(65 * GIB, 0, SHARED, commit()),
            "shmem is accounted unwritable"
        );
        assert!(noreserve(514 * GIB, RW, PRIVATE, commit()), "RAM and swap");
    }

    #[test]
    fn a_mapping_the_host_makes_or_the_machine_refuses_is_left_alone() {
        // The host's limit is RAM and swap, in whole pages.
        assert!(!noreserve(26 * GIB, RW, PRIVATE, commit()));
        assert!(noreserve(26 * GIB + 1, RW, PRIVATE, commit()));
        assert!(
            !noreserve(514 * GIB + 1, RW, PRIVATE, commit()),
            "too big there too"
        );
        let same = Commit {
            machine_ram: 24 * GIB,
            ..commit()
        };
        assert!(
            !noreserve(65 * GIB, RW, PRIVATE, same),
            "no more RAM than the host"
        );
    }

    #[test]
    fn a_mapping_the_kernel_does_not_account_is_left_alone() {
        let read_only = libc::PROT_READ as u64;
        assert!(!noreserve(65 * GIB, read_only, PRIVATE, commit()));
        let noreserve_already = PRIVATE | libc::MAP_NORESERVE as u64;
        assert!(!noreserve(65 * GIB, RW, noreserve_already, commit()));
        let file = libc::MAP_PRIVATE as u64;
        assert!(!noreserve(65 * GIB, RW, file, commit()), "not anonymous");
        let huge = PRIVATE | libc::MAP_HUGETLB as u64;
        assert!(
            !noreserve(65 * GIB, RW, huge, commit()),
            "hugetlb has its own pool"
        );
    }
}
