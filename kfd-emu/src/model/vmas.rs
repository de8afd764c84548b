//! The caller's VMAs, from `/proc/<pid>/maps`: what `vma_lookup` would find, with the flags
//! SVM cares about.
//!
//! Device memory is what the kernel marks `VM_IO | VM_PFNMAP | VM_MIXEDMAP`: doorbell and
//! MMIO mmaps of `/dev/kfd`, TTM CPU mappings of BOs through a render node, dma-buf mmaps. In
//! the emulator those are mappings of the model's stand-in files, which the maps show by
//! device and inode, or of a BO's memfd, which they show by name; the `[vvar]` pages (`VM_PFNMAP`) are device memory too, and the
//! `[vsyscall]` page is no VMA at all.

use rustix::io::Errno;

use super::memory::PAGE_SIZE;

/// One VMA, `[start, end)` in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::model) struct Vma {
    pub start: u64,
    pub end: u64,
    pub read: bool,
    pub write: bool,
    /// `MAP_SHARED` (`s` in the permissions).
    pub shared: bool,
    /// `VM_IO | VM_PFNMAP | VM_MIXEDMAP`.
    pub device: bool,
    /// No file behind it (inode 0): anonymous private memory is what HMM migrates.
    pub anonymous: bool,
    /// `[heap]` or `[stack]` (`vma_is_initial_heap/stack`).
    pub heap_stack: bool,
}

impl Vma {
    /// Whether `migrate_vma_setup` collects its pages: private anonymous memory only (shared
    /// and file-backed pages are skipped, and stay in system memory).
    pub(super) fn migratable(&self) -> bool {
        self.anonymous && !self.shared && !self.device
    }
}

/// The VMAs of a process, sorted by start.
#[derive(Debug, Default, Clone)]
pub(in crate::model) struct Vmas {
    list: Vec<Vma>,
}

impl Vmas {
    /// Parses maps text; `stand_in(st_dev, inode)` says which files are device stand-ins.
    pub(in crate::model) fn parse(text: &str, stand_in: impl Fn(u64, u64) -> bool) -> Vmas {
        let mut list: Vec<Vma> = text
            .lines()
            .filter_map(|l| parse_line(l, &stand_in))
            .collect();
        list.sort_unstable_by_key(|v| v.start);
        Vmas { list }
    }

    /// The VMA holding byte `addr` (`vma_lookup`).
    pub(super) fn lookup(&self, addr: u64) -> Option<&Vma> {
        let i = self.list.partition_point(|v| v.start <= addr);
        let v = self.list.get(i.checked_sub(1)?)?;
        (addr < v.end).then_some(v)
    }

    /// Whether every byte of `[start, end)` is inside some VMA.
    pub(in crate::model) fn covers(&self, start: u64, end: u64) -> bool {
        let mut at = start;
        while at < end {
            match self.lookup(at) {
                Some(v) => at = v.end,
                None => return false,
            }
        }
        true
    }

    /// `svm_range_is_valid`'s VMA walk over `[start, end)`: a hole or device memory is
    /// `EFAULT`.
    pub(super) fn check(&self, start: u64, end: u64) -> Result<(), Errno> {
        let mut at = start;
        while at < end {
            match self.lookup(at) {
                Some(v) if !v.device => at = v.end,
                _ => return Err(Errno::FAULT),
            }
        }
        Ok(())
    }

    /// The page ranges `[first, last]` within pages `[first, last]` that no ordinary VMA
    /// covers: memory unmapped (or replaced by device memory) since it was registered.
    pub(super) fn holes(&self, first: u64, last: u64) -> Vec<(u64, u64)> {
        let (start, end) = (first * PAGE_SIZE, (last + 1) * PAGE_SIZE);
        let mut holes = Vec::new();
        let mut at = start;
        let i = self.list.partition_point(|v| v.end <= start);
        for v in &self.list[i..] {
            if at >= end {
                break;
            }
            if v.device {
                continue;
            }
            if v.start > at {
                holes.push((at, v.start.min(end)));
            }
            at = at.max(v.end);
        }
        if at < end {
            holes.push((at, end));
        }
        holes
            .into_iter()
            .map(|(s, e)| (s / PAGE_SIZE, e.div_ceil(PAGE_SIZE) - 1))
            .collect()
    }

    /// The pieces of pages `[first, last]` VMA by VMA, as the migration and mapping loops walk
    /// them: `(vma, first, last)`, stopping at the first page without a VMA.
    pub(super) fn pieces(&self, first: u64, last: u64) -> Vec<(Vma, u64, u64)> {
        let mut out = Vec::new();
        let mut page = first;
        while page <= last {
            let Some(v) = self.lookup(page * PAGE_SIZE) else {
                break;
            };
            let next = (v.end / PAGE_SIZE).min(last + 1);
            out.push((*v, page, next - 1));
            page = next;
        }
        out
    }
}

/// The prefix of the names of the model's memfds (`/proc/<pid>/fd/<n>` shows
/// `/memfd:kfd-emu:<what> (deleted)`), by which a stand-in whose registration was released is
/// still recognised.
pub(super) const NAME_PREFIX: &str = "kfd-emu:";

/// The name of the memfd of a buffer object's memory.
pub(super) const BO_MEMFD_NAME: &str = "bo";

/// Whether `path`, the path field of a `/proc/<pid>/maps` line, is a BO's memfd.
pub(super) fn is_bo_memfd_path(path: &str) -> bool {
    path.strip_prefix("/memfd:")
        .and_then(|p| p.strip_prefix(NAME_PREFIX))
        .is_some_and(|name| name == BO_MEMFD_NAME)
}

/// One line: `start-end perms offset major:minor inode [path]`.
fn parse_line(line: &str, stand_in: &impl Fn(u64, u64) -> bool) -> Option<Vma> {
    let mut fields = line.split_whitespace();
    let (lo, hi) = fields.next()?.split_once('-')?;
    let perms = fields.next()?.as_bytes();
    let _offset = fields.next()?;
    let (major, minor) = fields.next()?.split_once(':')?;
    let inode: u64 = fields.next()?.parse().ok()?;
    let path = fields.next().unwrap_or("");
    let start = u64::from_str_radix(lo, 16).ok()?;
    let end = u64::from_str_radix(hi, 16).ok()?;
    let dev = rustix::fs::makedev(
        u32::from_str_radix(major, 16).ok()?,
        u32::from_str_radix(minor, 16).ok()?,
    );
    // A BO's memory, mapped where the program mapped a render node or a dma-buf.
    let special =
        matches!(path, "[vvar]" | "[vvar_vclock]" | "[vsyscall]") || is_bo_memfd_path(path);
    Some(Vma {
        start,
        end,
        read: perms.first() == Some(&b'r'),
        write: perms.get(1) == Some(&b'w'),
        shared: perms.get(3) == Some(&b's'),
        device: special || (inode != 0 && stand_in(dev, inode)),
        anonymous: inode == 0,
        heap_stack: matches!(path, "[heap]" | "[stack]"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/app
01000000-01021000 rw-p 00000000 00:00 0           [heap]
7f0000000000-7f0000004000 rw-p 00000000 00:00 0
7f0000004000-7f0000008000 r--p 00000000 00:00 0
7f0000010000-7f0000012000 rw-s 00000000 00:01 4242        /memfd:kfd (deleted)
7f0000012000-7f0000014000 rw-s 00000000 00:01 4243        /dev/zero (deleted)
7f0000020000-7f0000022000 rw-s 00000000 00:01 4244        /memfd:kfd-emu:bo (deleted)
7f0000022000-7f0000024000 rw-s 00000000 00:01 4245        /memfd:kfd-emu:box (deleted)
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0           [stack]
7ffd00100000-7ffd00102000 r--p 00000000 00:00 0           [vvar]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0   [vsyscall]
";

    fn vmas() -> Vmas {
        let dev = rustix::fs::makedev(0, 1);
        Vmas::parse(MAPS, |d, ino| d == dev && ino == 4242)
    }

    #[test]
    fn flags_of_each_kind_of_mapping() {
        let v = vmas();
        let heap = v.lookup(0x0100_0000).expect("heap");
        assert!(heap.heap_stack && heap.migratable() && heap.write);
        let ro = v.lookup(0x7f00_0000_5000).expect("read-only anon");
        assert!(ro.read && !ro.write && ro.migratable());
        let stand_in = v.lookup(0x7f00_0001_0000).expect("kfd stand-in");
        assert!(stand_in.device && stand_in.shared);
        let shmem = v.lookup(0x7f00_0001_2000).expect("shared anon");
        assert!(!shmem.device && !shmem.migratable());
        assert!(v.lookup(0x7ffd_0010_0000).expect("vvar").device);
        assert!(v.lookup(0x7f00_0002_0000).expect("a BO's memfd").device);
        assert!(!v.lookup(0x7f00_0002_2000).expect("another memfd").device);
        assert!(v.lookup(0x7f00_0000_8000).is_none());
    }

    #[test]
    fn validity_holes_and_pieces() {
        let v = vmas();
        let base = 0x7f00_0000_0000u64;
        assert_eq!(v.check(base, base + 0x8000), Ok(()), "two adjacent VMAs");
        assert_eq!(v.check(base, base + 0x9000), Err(Errno::FAULT), "a hole");
        assert_eq!(
            v.check(base + 0x1_0000, base + 0x1_1000),
            Err(Errno::FAULT),
            "device"
        );
        let page = base / PAGE_SIZE;
        assert_eq!(v.holes(page, page + 0x13), vec![(page + 8, page + 0x11)]);
        let pieces = v.pieces(page + 2, page + 9);
        assert_eq!(pieces.len(), 2);
        assert_eq!((pieces[0].1, pieces[0].2), (page + 2, page + 3));
        assert_eq!((pieces[1].1, pieces[1].2), (page + 4, page + 7));
        assert!(v.covers(base, base + 0x8000) && !v.covers(base, base + 0x9000));
    }
}
