//! Long-lived shared mappings of buffer objects' memfds, for the copy engines' bulk copies
//! and fills: an SDMA COPY_LINEAR or CONSTANT_FILL moves a VRAM or GTT BO's bytes with loads
//! and stores through a mapping of its memfd ([`copy`], [`BoMap::fill`]) instead of a `pread`
//! of one memfd into a bounce buffer and a `pwrite` of it into the other (the host's memcpy
//! between mappings is 4–5 times the `pread` + `pwrite` rate: `docs/conformance.md`,
//! "mi210x8's SVM overcommit failures and the P2P benchmark"), and between such a mapping and
//! a process's own memory (USERPTR BOs, SVM ranges) with one `process_vm_writev` straight out
//! of the mapping ([`BoMap::to_process`]) or a store of what `process_vm_readv` read
//! ([`BoMap::write`]).
//!
//! **Holes stay holes.** A memfd's pages that were never written (or were punched) are a
//! hole, which reads as zeros (tmpfs: `shmem_file_llseek`'s `SEEK_DATA` finds the next data,
//! `mapping_seek_hole_data`; `mincore` of a mapping says which pages the page cache holds). A load through a shared mapping of a hole would allocate the
//! page (`shmem_fault`), so the bytes of a hole are never loaded: where the source of a copy is
//! a hole ([`BoMap::runs`]), a memfd destination gets the hole punched
//! (`FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`: whole pages are freed, the partial pages at
//! its ends zeroed, `shmem_fallocate`) and a process's memory is written zeros from a static
//! page of zeros; a fill with zeros ([`BoMap::zero`]) punches its range the same way, over the
//! data it has (a hole is left alone). What is read afterwards is the same bytes (zeros), the
//! punch unmaps the pages from every mapping of the file (the program's CPU mappings, a
//! dispatch's windows: `unmap_mapping_range`), so each sees the zeros at its next access, as it
//! would see a write; and the memory is not spent. `docs/conformance.md` ("SDMA copies and
//! fills for every kind of memory, holes kept") has the numbers.
//!
//! A [`BoMap`] maps a whole memfd once, the first time an engine copies from or to it, and
//! is kept in the model's state by backing ([`State::bo_maps`](super::process::State)) until
//! the BO's last reference goes (`put_backing` drops it there): an engine copying holds its
//! own `Arc` of the map, so a BO freed in the middle of a copy is unmapped when that copy
//! ends, never before. A map holds its memfd, so no mapping outlives the file it maps; the
//! memfds are sealed against shrinking ([`files::memfd`](super::files)), so no access through
//! a map can turn into a `SIGBUS`.
//!
//! The bytes are shared with the program (its CPU mappings of the BO) and with every other
//! engine thread, which may write them meanwhile (a racy access, as on the hardware): every
//! access is an atomic load or store (relaxed), so the emulator has no data race. Aligned
//! 8-byte words move as one load and one store, as `model/kernel.rs`'s dispatch windows do
//! for a lane's access. The host kernel reads and writes a map's bytes too (the
//! `process_vm_writev` of [`BoMap::to_process`], a punch): as for another process's access,
//! no Rust reference to the bytes exists meanwhile, only raw pointers handed to the syscall.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed};

use rustix::io::Errno;

/// A BO's memfd mapped shared, read-write, whole, into the emulator.
#[derive(Debug)]
pub(super) struct BoMap {
    ptr: *mut u8,
    len: usize,
    fd: Arc<OwnedFd>,
}

// SAFETY: the mapping is process-wide memory, unmapped only by `drop`; every access to its
// bytes is an atomic operation (`copy`), so any thread may use it.
unsafe impl Send for BoMap {}
// SAFETY: as for Send.
unsafe impl Sync for BoMap {}

impl BoMap {
    /// Maps the first `len` bytes of `fd` (a BO's memfd); `None` when `len` is 0, larger than
    /// the file, or the host refuses the mapping (the caller then copies as before).
    pub(super) fn map(fd: Arc<OwnedFd>, len: u64) -> Option<BoMap> {
        let len = usize::try_from(len).ok().filter(|&l| l > 0)?;
        let size = rustix::fs::fstat(&*fd).ok()?.st_size;
        if u64::try_from(size).ok()? < len as u64 {
            return None;
        }
        // SAFETY: a new shared mapping, at an address the kernel picks, of bytes the file has
        // (checked above; the memfd is sealed against shrinking): it aliases no Rust object,
        // and it is unmapped only by `drop`.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::SHARED,
                &*fd,
                0,
            )
        }
        .ok()?;
        super::host_calls::mapped();
        Some(BoMap {
            ptr: ptr.cast(),
            len,
            fd,
        })
    }

    /// The mapping's first byte (the `len` bytes `map` was given stay mapped while it lives):
    /// the dispatch windows of `model/kernel.rs` keep one per memfd and reach lanes' pages
    /// through it with atomic operations.
    pub(super) fn base(&self) -> *mut u8 {
        self.ptr
    }

    /// The bytes mapped.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Reads `buf` at `off` with relaxed atomic loads (a small GPU-view access: `gpu_view`'s
    /// accesses that lie in one BO); refuses a range outside the map.
    pub(super) fn read_at(&self, off: usize, buf: &mut [u8]) -> Result<(), Refused> {
        if off.checked_add(buf.len()).is_none_or(|end| end > self.len) {
            return Err(Refused::OutOfBounds);
        }
        // SAFETY: within the live map (checked above).
        unsafe { load(self.ptr.add(off), buf) };
        Ok(())
    }

    /// Whether `len` bytes at `off` are within the map.
    fn within(&self, off: usize, len: usize) -> bool {
        off.checked_add(len).is_some_and(|end| end <= self.len)
    }

    /// The runs of data and of holes of `len` bytes at `off`, in order, covering them
    /// ([`Runs`]).
    pub(super) fn runs(&self, off: usize, len: usize) -> Runs<'_> {
        Runs {
            map: self,
            at: off,
            end: off.saturating_add(len).min(self.len),
        }
    }

    /// The offset of the first page at or after `from` (page-aligned) and before `end` that the
    /// page cache does not hold (`mincore` of the map: a hole, or a page swapped out), else
    /// `end`; `end` too where the host cannot tell.
    fn first_absent(&self, from: usize, end: usize) -> usize {
        /// Pages asked about per `mincore`.
        const BATCH: usize = 1024;
        let page = page_size();
        let mut at = from;
        while at < end {
            let pages = (end - at).div_ceil(page).min(BATCH);
            let mut resident = [0u8; BATCH];
            // SAFETY: `at` is page-aligned and `at + pages * page` is within the map (its
            // length is the memfd's size, whole pages); `resident` has room for `pages`.
            let r = unsafe {
                libc::mincore(
                    self.ptr.add(at).cast(),
                    (pages * page).min(self.len - at),
                    resident.as_mut_ptr(),
                )
            };
            if r != 0 {
                return end;
            }
            if let Some(i) = resident[..pages].iter().position(|&b| b & 1 == 0) {
                return (at + i * page).min(end);
            }
            at += pages * page;
        }
        end
    }

    /// Makes `len` bytes at `off` zeros: the data runs among them are punched
    /// (`FALLOC_FL_PUNCH_HOLE`: whole pages freed, partial ones zeroed by the host), holes are
    /// left as they are. Where the host refuses the punch the zeros are stored.
    pub(super) fn zero(&self, off: usize, len: usize) -> Result<(), Refused> {
        if !self.within(off, len) {
            return Err(Refused::OutOfBounds);
        }
        for run in self.runs(off, len).filter(|r| r.data) {
            let punched = rustix::fs::fallocate(
                &*self.fd,
                rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE,
                run.start as u64,
                (run.end - run.start) as u64,
            );
            if punched.is_err() {
                self.fill(run.start, run.end - run.start, &ZEROS)?;
            }
        }
        Ok(())
    }

    /// Stores `data` at `off`.
    pub(super) fn write(&self, off: usize, data: &[u8]) -> Result<(), Refused> {
        if !self.within(off, data.len()) {
            return Err(Refused::OutOfBounds);
        }
        // SAFETY: within the live map (checked above).
        unsafe { store(self.ptr.add(off), data) };
        Ok(())
    }

    /// Stores `len` bytes at `off`, `pattern` over and over from `off` on (the last time cut
    /// short); an empty pattern stores nothing.
    pub(super) fn fill(&self, off: usize, len: usize, pattern: &[u8]) -> Result<(), Refused> {
        if !self.within(off, len) {
            return Err(Refused::OutOfBounds);
        }
        if pattern.is_empty() {
            return Ok(());
        }
        let mut done = 0;
        while done < len {
            let n = (len - done).min(pattern.len());
            // SAFETY: `off + done + n <= off + len`: within the live map (checked above).
            unsafe { store(self.ptr.add(off + done), &pattern[..n]) };
            done += n;
        }
        Ok(())
    }

    /// Writes `len` bytes at `off` of the map into process `tgid`'s memory at `addr`: the data
    /// runs straight out of the map, the holes as zeros (a load of a hole would allocate its
    /// pages), each run with one `process_vm_writev` ([`process_write`]).
    pub(super) fn to_process(
        &self,
        off: usize,
        len: usize,
        tgid: i32,
        addr: u64,
    ) -> Result<(), Errno> {
        if !self.within(off, len) {
            return Err(Errno::FAULT);
        }
        for run in self.runs(off, len) {
            let at = addr
                .checked_add((run.start - off) as u64)
                .ok_or(Errno::FAULT)?;
            let n = run.end - run.start;
            if run.data {
                let iov = [libc::iovec {
                    // SAFETY: within the live map (checked above; `runs` stays in the range).
                    iov_base: unsafe { self.ptr.add(run.start) }.cast(),
                    iov_len: n,
                }];
                // SAFETY: the vector is `n` bytes of the map, which `self` keeps mapped for
                // the call; the host only reads them.
                unsafe { process_write(tgid, at, &iov) }?;
            } else {
                zeros_to_process(tgid, at, n)?;
            }
        }
        Ok(())
    }
}

/// A run of a map's bytes: data (pages the memfd has) or a hole (pages it does not have,
/// which read as zeros), `start..end` as offsets in the map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Run {
    pub start: usize,
    pub end: usize,
    pub data: bool,
}

/// The runs of [`BoMap::runs`], found with `lseek(SEEK_DATA)` on the memfd (page-granular
/// on tmpfs; a page in the file is data even when it holds zeros, and so is a page swapped
/// out) and, for how far data goes, `mincore` of the map. Where the host cannot tell (an
/// `lseek` error other than `ENXIO`, "no data after the offset", or a `mincore` error), the
/// rest is data: its bytes are moved as they are.
pub(super) struct Runs<'a> {
    map: &'a BoMap,
    at: usize,
    end: usize,
}

impl Iterator for Runs<'_> {
    type Item = Run;

    fn next(&mut self) -> Option<Run> {
        use rustix::fs::{SeekFrom, seek};
        if self.at >= self.end {
            return None;
        }
        let start = self.at;
        let data = match seek(&*self.map.fd, SeekFrom::Data(start as u64)) {
            Ok(d) => usize::try_from(d).unwrap_or(usize::MAX).max(start),
            Err(Errno::NXIO) => usize::MAX,
            Err(_) => start,
        };
        if data > start {
            // A hole up to the next data (or to the end).
            self.at = data.min(self.end);
            return Some(Run {
                start,
                end: self.at,
                data: false,
            });
        }
        // Data at `start`: it runs on while the page cache holds the pages (`mincore` over the
        // map, bounded by the range asked for; a `SEEK_HOLE` would walk every page up to the
        // next hole, to the file's end for a BO all data). A page it does not hold is a hole
        // or swapped out: the next run's `SEEK_DATA` tells which. The page at `start` is data
        // whatever `mincore` says of it (`SEEK_DATA` said so).
        let page = page_size();
        let next_page = (start / page + 1) * page;
        self.at = self
            .map
            .first_absent(next_page, self.end)
            .clamp(start + 1, self.end);
        Some(Run {
            start,
            end: self.at,
            data: true,
        })
    }
}

/// The host's page size (the memfd's page size; `mincore` counts in it).
fn page_size() -> usize {
    // SAFETY: `sysconf` only reads.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|&s| s > 0)
        .unwrap_or(4096)
}

/// A page of zeros, for holes written into a process's memory and zero fills.
static ZEROS: [u8; 1 << 16] = [0; 1 << 16];

/// Writes `len` zeros at `addr` of process `tgid` ([`process_write`] from [`ZEROS`]).
pub(super) fn zeros_to_process(tgid: i32, addr: u64, len: usize) -> Result<(), Errno> {
    pattern_to_process(tgid, addr, len, &ZEROS)
}

/// Writes `len` bytes at `addr` of process `tgid`: `pattern` over and over (the last time cut
/// short), each `process_vm_writev` gathering up to `IOV_MAX` vectors of it.
pub(super) fn pattern_to_process(
    tgid: i32,
    addr: u64,
    len: usize,
    pattern: &[u8],
) -> Result<(), Errno> {
    /// `UIO_MAXIOV`: the most vectors one `process_vm_writev` takes.
    const IOV_MAX: usize = 1024;
    if pattern.is_empty() {
        return Ok(());
    }
    let mut done = 0;
    while done < len {
        let mut iov = Vec::new();
        let mut n = 0;
        while done + n < len && iov.len() < IOV_MAX {
            let k = (len - done - n).min(pattern.len());
            iov.push(libc::iovec {
                iov_base: pattern.as_ptr().cast_mut().cast(),
                iov_len: k,
            });
            n += k;
        }
        let at = addr.checked_add(done as u64).ok_or(Errno::FAULT)?;
        // SAFETY: each vector is a prefix of `pattern`, borrowed for the call; the host only
        // reads it.
        unsafe { process_write(tgid, at, &iov) }?;
        done += n;
    }
    Ok(())
}

/// Writes the bytes of `local` (in order) at `addr` of process `tgid` with one
/// `process_vm_writev`; where it falls short (memory the supervisor hid from the CPU, which
/// the GPU still reaches: `objects::remote_write`), through the process's `/proc/<pid>/mem`,
/// which reaches pages its protection forbids (`FOLL_FORCE`).
///
/// # Safety
///
/// Each vector is memory of this process that stays mapped and readable for the call.
unsafe fn process_write(tgid: i32, addr: u64, local: &[libc::iovec]) -> Result<(), Errno> {
    let total: usize = local.iter().map(|v| v.iov_len).sum();
    let remote = [libc::iovec {
        iov_base: usize::try_from(addr).map_err(|_| Errno::FAULT)? as *mut libc::c_void,
        iov_len: total,
    }];
    let count = libc::c_ulong::try_from(local.len()).map_err(|_| Errno::INVAL)?;
    // SAFETY: the local vectors are readable memory of ours (the caller), the remote one is
    // the other process's, which the host checks; nothing of ours is written.
    let n = unsafe { libc::process_vm_writev(tgid, local.as_ptr(), count, remote.as_ptr(), 1, 0) };
    if n >= 0 && n as usize == total {
        return Ok(());
    }
    if n < 0 {
        let e =
            Errno::from_raw_os_error(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        if e != Errno::FAULT {
            return Err(e);
        }
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/{tgid}/mem"))
        .map_err(|_| Errno::FAULT)?;
    let mut at = addr;
    for v in local {
        let mut done = 0;
        while done < v.iov_len {
            let offset = libc::off_t::try_from(at).map_err(|_| Errno::FAULT)?;
            // SAFETY: `v.iov_base + done .. + v.iov_len - done` is readable memory of ours
            // (the caller).
            let w = unsafe {
                libc::pwrite(
                    std::os::fd::AsRawFd::as_raw_fd(&file),
                    v.iov_base.cast::<u8>().add(done).cast(),
                    v.iov_len - done,
                    offset,
                )
            };
            if w <= 0 {
                return Err(Errno::FAULT);
            }
            done += w as usize;
            at += w as u64;
        }
    }
    Ok(())
}

impl Drop for BoMap {
    fn drop(&mut self) {
        super::host_calls::unmapped();
        // SAFETY: the mapping `map` made; no pointer into it outlives a `copy`, which borrows
        // the map.
        let _ = unsafe { rustix::mm::munmap(self.ptr.cast(), self.len) };
    }
}

/// Why [`copy`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// A range is not within its map.
    OutOfBounds,
    /// Source and destination overlap in one map (the caller's bounce-buffer copy gives
    /// such a copy its meaning).
    Overlap,
}

/// Whether `len` bytes at `a_off` of `a` and at `b_off` of `b` share a byte.
pub(super) fn overlaps(a: &BoMap, a_off: usize, b: &BoMap, b_off: usize, len: usize) -> bool {
    std::ptr::eq(a, b)
        && len > 0
        && a_off < b_off.saturating_add(len)
        && b_off < a_off.saturating_add(len)
}

/// Bytes moved through the stack when source and destination are not equally aligned.
const BOUNCE: usize = 4096;

/// Copies `len` bytes from `src_off` of `src` to `dst_off` of `dst`, with relaxed atomic
/// loads and stores (aligned 8-byte words where the two addresses agree modulo 8, else
/// through a small buffer on the stack, loaded at the source's alignment and stored at the
/// destination's). Refuses ranges outside their maps and overlapping ranges of one map.
pub(super) fn copy(
    src: &BoMap,
    src_off: usize,
    dst: &BoMap,
    dst_off: usize,
    len: usize,
) -> Result<(), Refused> {
    if !src.within(src_off, len) || !dst.within(dst_off, len) {
        return Err(Refused::OutOfBounds);
    }
    if overlaps(src, src_off, dst, dst_off, len) {
        return Err(Refused::Overlap);
    }
    // SAFETY: both ranges are within their live maps (checked above; the borrows keep the
    // maps mapped).
    let (s, d) = unsafe { (src.ptr.add(src_off), dst.ptr.add(dst_off)) };
    if (s as usize) % 8 == (d as usize) % 8 {
        // SAFETY: the ranges are within their maps (above).
        unsafe { copy_aligned(s, d, len) };
    } else {
        let mut buf = [0u8; BOUNCE];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(BOUNCE);
            // SAFETY: `done + n <= len`: within the maps (above).
            unsafe {
                load(s.add(done), &mut buf[..n]);
                store(d.add(done), &buf[..n]);
            }
            done += n;
        }
    }
    Ok(())
}

/// [`copy`] keeping holes: where `src` has a hole (its runs, [`BoMap::runs`]) `dst` gets zeros
/// by a punch ([`BoMap::zero`]) instead of stores, and the hole is never loaded.
pub(super) fn copy_sparse(
    src: &BoMap,
    src_off: usize,
    dst: &BoMap,
    dst_off: usize,
    len: usize,
) -> Result<(), Refused> {
    if !src.within(src_off, len) || !dst.within(dst_off, len) {
        return Err(Refused::OutOfBounds);
    }
    if overlaps(src, src_off, dst, dst_off, len) {
        return Err(Refused::Overlap);
    }
    for run in src.runs(src_off, len) {
        let (at, n) = (dst_off + (run.start - src_off), run.end - run.start);
        if run.data {
            copy(src, run.start, dst, at, n)?;
        } else {
            dst.zero(at, n)?;
        }
    }
    Ok(())
}

/// `len` bytes from `s` to `d`, which agree modulo 8: bytes up to the first 8-byte boundary,
/// words, then the bytes left.
///
/// # Safety
///
/// `s..s + len` and `d..d + len` are within live maps.
unsafe fn copy_aligned(s: *const u8, d: *mut u8, len: usize) {
    let head = s.align_offset(8).min(len);
    let words = (len - head) / 8;
    for i in 0..head {
        // SAFETY: within the maps (the caller).
        unsafe { byte(d.add(i)).store(byte(s.add(i).cast_mut()).load(Relaxed), Relaxed) };
    }
    // SAFETY: within the maps (the caller); both 8-byte aligned after `head` bytes.
    let (ws, wd) = unsafe {
        (
            s.add(head).cast::<AtomicU64>(),
            d.add(head).cast::<AtomicU64>(),
        )
    };
    for i in 0..words {
        // SAFETY: word `i` is within the maps, aligned (above).
        unsafe { (*wd.add(i)).store((*ws.add(i)).load(Relaxed), Relaxed) };
    }
    for i in head + 8 * words..len {
        // SAFETY: within the maps (the caller).
        unsafe { byte(d.add(i)).store(byte(s.add(i).cast_mut()).load(Relaxed), Relaxed) };
    }
}

/// The byte at `p` as an atomic.
///
/// # Safety
///
/// `p` is within a live map.
unsafe fn byte<'a>(p: *mut u8) -> &'a AtomicU8 {
    // SAFETY: the caller; `AtomicU8` has `u8`'s size and alignment.
    unsafe { &*p.cast::<AtomicU8>() }
}

/// Fills `buf` from `s` (bytes to an 8-byte boundary of `s`, words, bytes).
///
/// # Safety
///
/// `s..s + buf.len()` is within a live map.
unsafe fn load(s: *const u8, buf: &mut [u8]) {
    let len = buf.len();
    let head = s.align_offset(8).min(len);
    let words = (len - head) / 8;
    for (i, b) in buf[..head].iter_mut().enumerate() {
        // SAFETY: within the map (the caller).
        *b = unsafe { byte(s.add(i).cast_mut()) }.load(Relaxed);
    }
    for (i, chunk) in buf[head..head + 8 * words].chunks_exact_mut(8).enumerate() {
        // SAFETY: word `i` after `head` bytes is within the map and 8-byte aligned.
        let v = unsafe { &*s.add(head + 8 * i).cast::<AtomicU64>() }.load(Relaxed);
        chunk.copy_from_slice(&v.to_ne_bytes());
    }
    for (i, b) in buf.iter_mut().enumerate().skip(head + 8 * words) {
        // SAFETY: within the map (the caller).
        *b = unsafe { byte(s.add(i).cast_mut()) }.load(Relaxed);
    }
}

/// Stores `data` at `d` (bytes to an 8-byte boundary of `d`, words, bytes).
///
/// # Safety
///
/// `d..d + data.len()` is within a live map.
unsafe fn store(d: *mut u8, data: &[u8]) {
    let len = data.len();
    let head = d.align_offset(8).min(len);
    let words = (len - head) / 8;
    for (i, &b) in data[..head].iter().enumerate() {
        // SAFETY: within the map (the caller).
        unsafe { byte(d.add(i)) }.store(b, Relaxed);
    }
    for (i, chunk) in data[head..head + 8 * words].chunks_exact(8).enumerate() {
        let v = u64::from_ne_bytes(chunk.try_into().unwrap_or_default());
        // SAFETY: word `i` after `head` bytes is within the map and 8-byte aligned.
        unsafe { &*d.add(head + 8 * i).cast::<AtomicU64>() }.store(v, Relaxed);
    }
    for (i, &b) in data.iter().enumerate().skip(head + 8 * words) {
        // SAFETY: within the map (the caller).
        unsafe { byte(d.add(i)) }.store(b, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map_of(bytes: &[u8]) -> BoMap {
        let fd = super::super::files::memfd("bo-maps-test", bytes.len() as u64).expect("memfd");
        rustix::io::pwrite(&fd, bytes, 0).expect("pwrite");
        BoMap::map(Arc::new(fd), bytes.len() as u64).expect("map")
    }

    fn read(m: &BoMap) -> Vec<u8> {
        let mut out = vec![0u8; m.len];
        // SAFETY: the whole map.
        unsafe { load(m.ptr, &mut out) };
        out
    }

    /// Every relative alignment and length near the word size copies exactly the bytes asked
    /// for, and nothing around them.
    #[test]
    fn copies_exactly_the_range_at_any_alignment() {
        let src: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + 3) as u8).collect();
        let a = map_of(&src);
        for (s_off, d_off, len) in [
            (0, 0, 64),
            (3, 3, 9000),
            (1, 6, 9000),
            (5, 0, 7),
            (0, 7, 8193),
            (9, 2, 1),
        ] {
            let b = map_of(&vec![0xEE; 20_000]);
            copy(&a, s_off, &b, d_off, len).expect("copy");
            let got = read(&b);
            assert_eq!(
                &got[d_off..d_off + len],
                &src[s_off..s_off + len],
                "{s_off} {d_off} {len}"
            );
            assert!(got[..d_off].iter().all(|&x| x == 0xEE));
            assert!(got[d_off + len..].iter().all(|&x| x == 0xEE));
        }
    }

    /// Ranges outside a map and overlapping ranges of one map are refused, untouched.
    #[test]
    fn refuses_out_of_bounds_and_overlap() {
        let a = map_of(&[1u8; 4096]);
        let b = map_of(&[2u8; 4096]);
        assert_eq!(copy(&a, 4000, &b, 0, 97), Err(Refused::OutOfBounds));
        assert_eq!(copy(&a, 0, &b, usize::MAX, 2), Err(Refused::OutOfBounds));
        assert_eq!(copy(&a, 0, &a, 100, 200), Err(Refused::Overlap));
        assert_eq!(copy(&a, 0, &a, 200, 200), Ok(()));
        assert!(read(&b).iter().all(|&x| x == 2));
    }

    /// A map is refused for a length past the file's end (its pages would `SIGBUS`).
    #[test]
    fn no_map_past_the_file() {
        let fd = super::super::files::memfd("bo-maps-test", 4096).expect("memfd");
        assert!(BoMap::map(Arc::new(fd), 8192).is_none());
    }

    const PAGE: usize = 4096;

    /// The map's bytes as its memfd holds them (`pread`, which reads a hole as zeros without
    /// giving it a page, as a load through the map would).
    fn bytes(m: &BoMap) -> Vec<u8> {
        let mut out = vec![0u8; m.len];
        assert_eq!(rustix::io::pread(&*m.fd, &mut out, 0), Ok(m.len));
        out
    }

    /// A map of `pages` pages whose pages `data` hold `fill` (the rest holes).
    fn sparse(pages: usize, data: &[usize], fill: u8) -> BoMap {
        let fd = super::super::files::memfd("bo-maps-test", (pages * PAGE) as u64).expect("memfd");
        for &p in data {
            rustix::io::pwrite(&fd, &[fill; PAGE], (p * PAGE) as u64).expect("pwrite");
        }
        BoMap::map(Arc::new(fd), (pages * PAGE) as u64).expect("map")
    }

    /// The map's pages that are data in its memfd (asked of the file, not through the map).
    fn data_pages(m: &BoMap) -> Vec<usize> {
        m.runs(0, m.len)
            .filter(|r| r.data)
            .flat_map(|r| r.start / PAGE..r.end.div_ceil(PAGE))
            .collect()
    }

    /// The runs cover exactly the range asked for, data where the memfd has pages.
    #[test]
    fn runs_tell_data_from_holes() {
        let m = sparse(16, &[2, 5, 6], 1);
        let runs: Vec<(usize, usize, bool)> = m
            .runs(0, 16 * PAGE)
            .map(|r| (r.start, r.end, r.data))
            .collect();
        let p = PAGE;
        assert_eq!(
            runs,
            [
                (0, 2 * p, false),
                (2 * p, 3 * p, true),
                (3 * p, 5 * p, false),
                (5 * p, 7 * p, true),
                (7 * p, 16 * p, false)
            ]
        );
        let inner: Vec<_> = m
            .runs(2 * p + 9, 3 * p)
            .map(|r| (r.start, r.end, r.data))
            .collect();
        assert_eq!(
            inner,
            [
                (2 * p + 9, 3 * p, true),
                (3 * p, 5 * p, false),
                (5 * p, 5 * p + 9, true)
            ]
        );
        assert_eq!(m.runs(100, 0).count(), 0);
    }

    /// A copy whose source is partly a hole gives the bytes a plain copy gives (zeros where the
    /// hole was) at any relative alignment, leaves every whole page of the destination under
    /// the hole a hole, and never loads the source's hole (it stays a hole).
    #[test]
    fn a_hole_copied_is_a_hole_with_the_same_bytes() {
        for (s_off, d_off) in [(0, 0), (100, 100), (3, 4096 + 6), (4095, 1)] {
            let src = sparse(8, &[1, 4], 0x5A);
            rustix::io::pwrite(&*src.fd, &[7, 8, 9], (4 * PAGE + 17) as u64).expect("pwrite");
            let dst = sparse(10, &(0..10).collect::<Vec<_>>(), 0xEE);
            let len = 7 * PAGE;
            let mut want = bytes(&dst);
            want[d_off..d_off + len].copy_from_slice(&bytes(&src)[s_off..s_off + len]);
            copy_sparse(&src, s_off, &dst, d_off, len).expect("copy");
            assert_eq!(bytes(&dst), want, "{s_off} {d_off}");
            assert_eq!(data_pages(&src), [1, 4], "the source's holes were loaded");
            // Destination pages wholly under a source hole are holes.
            let holes: Vec<usize> = (0..10)
                .filter(|&p| {
                    let (a, b) = (p * PAGE, (p + 1) * PAGE);
                    a >= d_off
                        && b <= d_off + len
                        && src.runs(a - d_off + s_off, PAGE).all(|r| !r.data)
                })
                .collect();
            assert!(!holes.is_empty());
            let data = data_pages(&dst);
            assert!(
                holes.iter().all(|p| !data.contains(p)),
                "{s_off} {d_off}: {holes:?} {data:?}"
            );
        }
    }

    /// A zero fill punches the data it covers (whole pages become holes, partial pages zeros),
    /// leaves the bytes around it, and a pattern fill stores the pattern from its start.
    #[test]
    fn zero_punches_and_fill_stores_the_pattern() {
        let m = sparse(6, &[0, 1, 2, 3, 4, 5], 0xEE);
        m.zero(100, 3 * PAGE).expect("zero");
        let got = bytes(&m);
        assert!(got[..100].iter().all(|&b| b == 0xEE));
        assert!(got[100..100 + 3 * PAGE].iter().all(|&b| b == 0));
        assert!(got[100 + 3 * PAGE..].iter().all(|&b| b == 0xEE));
        assert_eq!(data_pages(&m), [0, 3, 4, 5]);
        m.fill(1, 10, &[1, 2, 3, 4]).expect("fill");
        assert_eq!(
            &bytes(&m)[..12],
            &[0xEE, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 0xEE]
        );
        assert_eq!(m.zero(5 * PAGE, PAGE + 1), Err(Refused::OutOfBounds));
        assert_eq!(m.fill(5 * PAGE + 1, PAGE, &[1]), Err(Refused::OutOfBounds));
    }

    /// A map's bytes written into a process's memory (here this one's) are its data and zeros
    /// for its holes, whose pages stay holes in the memfd.
    #[test]
    fn to_process_writes_data_and_zeros_for_holes() {
        let m = sparse(4, &[1, 3], 0x33);
        let mut out = vec![0xEEu8; 4 * PAGE + 10];
        let addr = out.as_mut_ptr() as u64 + 5;
        let me = rustix::process::getpid().as_raw_nonzero().get();
        m.to_process(7, 4 * PAGE - 7, me, addr).expect("to_process");
        let mut want = vec![0xEEu8; 4 * PAGE + 10];
        want[5..5 + 4 * PAGE - 7].copy_from_slice(&bytes(&m)[7..]);
        assert_eq!(out, want);
        assert_eq!(data_pages(&m), [1, 3]);
        pattern_to_process(me, addr, 9, &[1, 2]).expect("pattern");
        assert_eq!(&out[4..16], &[0xEE, 1, 2, 1, 2, 1, 2, 1, 2, 1, 0, 0]);
        assert_eq!(
            m.to_process(PAGE, 3 * PAGE + 1, me, addr),
            Err(Errno::FAULT)
        );
    }
}
