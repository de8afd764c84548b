//! `PROCMAP_QUERY` (Linux 6.11): one ioctl on an open `/proc/<pid>/maps` describes the VMA
//! covering an address (or the next one) — its bounds, protections, file and name — under the
//! process's mmap lock, without reading the maps text. The supervisor checks caller memory
//! with it, the model asks it for a process's VMAs.
//!
//! This module is one of the crate's fenced `unsafe` modules: it issues the ioctl, whose
//! argument is a pointer to the struct defined here.

/// `struct procmap_query` (`linux/fs.h`, Linux 6.11): one `PROCMAP_QUERY` ioctl on an open
/// `/proc/<pid>/maps` answers `vma_lookup` (or `find_vma` with
/// [`PROCMAP_QUERY_COVERING_OR_NEXT_VMA`]) for one address, under the process's mmap lock.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ProcmapQuery {
    pub size: u64,
    pub query_flags: u64,
    pub query_addr: u64,
    pub vma_start: u64,
    pub vma_end: u64,
    /// `PROCMAP_QUERY_VMA_*`.
    pub vma_flags: u64,
    pub vma_page_size: u64,
    pub vma_offset: u64,
    pub inode: u64,
    pub dev_major: u32,
    pub dev_minor: u32,
    /// In: the size of the name buffer; out: the name's length with its NUL (0: no name).
    pub vma_name_size: u32,
    pub build_id_size: u32,
    pub vma_name_addr: u64,
    pub build_id_addr: u64,
}
const _: () = assert!(size_of::<ProcmapQuery>() == 104);
const _: () = assert!(std::mem::offset_of!(ProcmapQuery, dev_major) == 72);
const _: () = assert!(std::mem::offset_of!(ProcmapQuery, vma_name_addr) == 88);

/// `PROCMAP_QUERY`: `_IOWR('f', 17, struct procmap_query)`.
const PROCMAP_QUERY: u32 = 0xC000_0000 | (size_of::<ProcmapQuery>() as u32) << 16 | 0x66 << 8 | 17;
/// The VMA is readable.
pub(crate) const PROCMAP_QUERY_VMA_READABLE: u64 = 0x01;
/// The VMA is writable.
pub(crate) const PROCMAP_QUERY_VMA_WRITABLE: u64 = 0x02;
/// The VMA is executable.
pub(crate) const PROCMAP_QUERY_VMA_EXECUTABLE: u64 = 0x04;
/// The VMA is `MAP_SHARED`.
pub(crate) const PROCMAP_QUERY_VMA_SHARED: u64 = 0x08;
/// The VMA covering the address or, when none does, the next one above it.
pub(crate) const PROCMAP_QUERY_COVERING_OR_NEXT_VMA: u64 = 0x10;

/// Asks `maps` (an open `/proc/<pid>/maps`) for the VMA at `addr` with `flags`
/// (`PROCMAP_QUERY_*`), its name written into `name` (NUL-terminated; an empty `name` asks for
/// none). `ENOENT` when there is no such VMA, `ENAMETOOLONG` when the name does not fit,
/// `ENOTTY` on kernels before 6.11, `ESRCH` once the process is gone.
pub(crate) fn procmap_query(
    maps: std::os::fd::BorrowedFd<'_>,
    addr: u64,
    flags: u64,
    name: &mut [u8],
) -> Result<ProcmapQuery, rustix::io::Errno> {
    use std::os::fd::AsRawFd;
    let mut q = ProcmapQuery {
        size: size_of::<ProcmapQuery>() as u64,
        query_flags: flags,
        query_addr: addr,
        vma_name_size: u32::try_from(name.len()).unwrap_or(u32::MAX),
        // Both the name's size and address, or neither (EINVAL otherwise).
        vma_name_addr: if name.is_empty() {
            0
        } else {
            name.as_mut_ptr() as u64
        },
        ..ProcmapQuery::default()
    };
    // SAFETY: PROCMAP_QUERY reads and writes one `struct procmap_query` at the pointer (a
    // local of that layout, whose `size` says so) and writes at most `vma_name_size` bytes at
    // `vma_name_addr`, which is `name`, borrowed mutably for the call; no build id is asked.
    let r = unsafe { libc::ioctl(maps.as_raw_fd(), PROCMAP_QUERY as libc::Ioctl, &raw mut q) };
    if r < 0 {
        return Err(rustix::io::Errno::from_raw_os_error(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        ));
    }
    Ok(q)
}
