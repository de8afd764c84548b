//! Long-lived shared mappings of buffer objects' memfds, for the copy engines' bulk copies:
//! an SDMA COPY_LINEAR between two VRAM or GTT BOs moves their bytes with loads and stores
//! between two mappings of their memfds ([`copy`]) instead of a `pread` of one memfd into a
//! bounce buffer and a `pwrite` of it into the other (the host's memcpy between mappings is
//! 4–5 times the `pread` + `pwrite` rate: `docs/conformance.md`, "mi210x8's SVM overcommit
//! failures and the P2P benchmark").
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
//! for a lane's access.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed};

/// A BO's memfd mapped shared, read-write, whole, into the emulator.
#[derive(Debug)]
pub(super) struct BoMap {
    ptr: *mut u8,
    len: usize,
    _fd: Arc<OwnedFd>,
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
            _fd: fd,
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

    /// Writes `data` at `off` with relaxed atomic stores (see [`read_at`](Self::read_at)).
    pub(super) fn write_at(&self, off: usize, data: &[u8]) -> Result<(), Refused> {
        if off.checked_add(data.len()).is_none_or(|end| end > self.len) {
            return Err(Refused::OutOfBounds);
        }
        // SAFETY: within the live map (checked above).
        unsafe { store(self.ptr.add(off), data) };
        Ok(())
    }
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
    let within = |m: &BoMap, off: usize| off.checked_add(len).is_some_and(|end| end <= m.len);
    if !within(src, src_off) || !within(dst, dst_off) {
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
}
