//! The caller's VMAs: what `vma_lookup` would find, with the flags SVM cares about.
//!
//! The VMAs are asked of the kernel when they are needed, one `PROCMAP_QUERY` ioctl
//! (Linux 6.11) per VMA on the process's open `/proc/<pid>/maps` ([`Vmas::query`]): exact and
//! current, in `O(log n)` of the process's VMAs, with no text to parse. On an older kernel
//! (`ENOTTY`) the model reads and parses the whole maps text instead ([`Vmas::parse`]), once
//! per operation. The rest of the model sees one type, [`Vmas`], either way.
//!
//! Device memory is what the kernel marks `VM_IO | VM_PFNMAP | VM_MIXEDMAP`: doorbell and
//! MMIO mmaps of `/dev/kfd`, TTM CPU mappings of BOs through a render node, dma-buf mmaps. In
//! the emulator those are mappings of the model's stand-in files, which a VMA shows by device
//! and inode ([`StandIns`]), or of a BO's memfd, which it shows by name; the `[vvar]` pages
//! (`VM_PFNMAP`) are device memory too, and the `[vsyscall]` page is no VMA at all.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};

use rustix::io::Errno;

use super::memory::PAGE_SIZE;
use crate::procmap;

/// One VMA, `[start, end)` in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::model) struct Vma {
    pub start: u64,
    pub end: u64,
    pub read: bool,
    pub write: bool,
    pub exec: bool,
    /// `MAP_SHARED` (`s` in the permissions).
    pub shared: bool,
    /// `VM_IO | VM_PFNMAP | VM_MIXEDMAP`.
    pub device: bool,
    /// No file behind it (inode 0): anonymous private memory is what HMM migrates.
    pub anonymous: bool,
    /// `[heap]` or `[stack]` (`vma_is_initial_heap/stack`).
    pub heap_stack: bool,
    /// `[heap]` (`vma_is_initial_heap`), the VMA `brk` grows and shrinks.
    pub heap: bool,
}

impl Vma {
    /// Whether `migrate_vma_setup` collects its pages: private anonymous memory only (shared
    /// and file-backed pages are skipped, and stay in system memory).
    pub(super) fn migratable(&self) -> bool {
        self.anonymous && !self.shared && !self.device
    }

    /// A VMA from its fields as maps or `PROCMAP_QUERY` report them.
    #[allow(clippy::too_many_arguments)]
    fn new(
        start: u64,
        end: u64,
        (read, write, exec, shared): (bool, bool, bool, bool),
        dev: u64,
        inode: u64,
        path: &str,
        stand_ins: &dyn StandIns,
    ) -> Vma {
        // maps shows the first word of a name; PROCMAP_QUERY adds " (deleted)".
        let path = path.split(' ').next().unwrap_or("");
        // A BO's memory, mapped where the program mapped a render node or a dma-buf.
        let special =
            matches!(path, "[vvar]" | "[vvar_vclock]" | "[vsyscall]") || is_bo_memfd_path(path);
        Vma {
            start,
            end,
            read,
            write,
            exec,
            shared,
            device: special || (inode != 0 && stand_ins.is_stand_in(dev, inode)),
            anonymous: inode == 0,
            heap_stack: matches!(path, "[heap]" | "[stack]"),
            heap: path == "[heap]",
        }
    }
}

/// Which files are the model's device stand-ins, by `(st_dev, st_ino)`.
pub(in crate::model) trait StandIns {
    /// Whether the file `(dev, inode)` is a stand-in (its mappings are device memory).
    fn is_stand_in(&self, dev: u64, inode: u64) -> bool;
}

impl<F: Fn(u64, u64) -> bool> StandIns for F {
    fn is_stand_in(&self, dev: u64, inode: u64) -> bool {
        self(dev, inode)
    }
}

/// Where the VMAs come from.
enum Source<'a> {
    /// `PROCMAP_QUERY` on the process's maps file, asked at each lookup.
    Query {
        maps: Arc<OwnedFd>,
        stand_ins: &'a dyn StandIns,
    },
    /// The maps text, parsed: sorted by start.
    List(Vec<Vma>),
}

/// The VMAs of a process (see the [module docs](self)).
pub(in crate::model) struct Vmas<'a> {
    source: Source<'a>,
    /// What the supervisor hid from the process's CPU, seen through (see [`Hidden`]).
    hidden: Option<Arc<Hidden>>,
}

/// One span of memory the supervisor made `PROT_NONE` (see [`Hidden`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::model) struct HiddenSpan {
    /// End byte (exclusive); the map's key is the start.
    pub end: u64,
    /// The `PROT_*` bits the program gave the memory, restored when it is shown again.
    pub prot: u32,
    /// Its `mprotect` back to `prot` is under way (or done, not yet confirmed).
    pub lifting: bool,
    /// The program changed the protection itself: hide it again (with the new `prot`).
    pub reapply: bool,
}

/// The spans of a process's memory that the supervisor of `kfd-emu run` made inaccessible
/// to the process's CPU (`PROT_NONE`) because the model holds those SVM pages in VRAM
/// (`svm::cpu`). The model sees through them: a VMA piece inside spans has the protection
/// the program gave it, and pieces the `mprotect` split off are joined again, so that
/// validation, mapping and the SMI records are those of the untouched VMA.
#[derive(Debug, Default)]
pub(in crate::model) struct Hidden {
    spans: Mutex<BTreeMap<u64, HiddenSpan>>,
}

impl Hidden {
    /// The spans, by start byte.
    pub(in crate::model) fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, HiddenSpan>> {
        self.spans.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The one protection every byte of `[start, end)` was given under the spans, if they cover
/// it.
fn hidden_prot(spans: &BTreeMap<u64, HiddenSpan>, start: u64, end: u64) -> Option<u32> {
    let mut at = start;
    let mut prot = None;
    let first = spans.range(..=start).next_back().map_or(start, |(&s, _)| s);
    for (&s, span) in spans.range(first..end) {
        if span.end <= at {
            continue;
        }
        if s > at || prot.is_some_and(|p| p != span.prot) {
            // A gap, or two protections.
            return None;
        }
        prot = Some(span.prot);
        at = span.end;
        if at >= end {
            return prot;
        }
    }
    None
}

/// Whether `addr` is where a span starts or ends.
fn hidden_edge(spans: &BTreeMap<u64, HiddenSpan>, addr: u64) -> bool {
    spans.contains_key(&addr) || spans.values().any(|s| s.end == addr)
}

impl std::fmt::Debug for Vmas<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.source {
            Source::Query { .. } => f.write_str("Vmas(PROCMAP_QUERY)"),
            Source::List(list) => f.debug_tuple("Vmas").field(list).finish(),
        }
    }
}

/// The longest VMA name `PROCMAP_QUERY` is given room for (`PATH_MAX`): a longer one is
/// `ENAMETOOLONG`, and the VMA is then taken for an ordinary file mapping.
const NAME_MAX: usize = 4096;

impl<'a> Vmas<'a> {
    /// Parses maps text; `stand_ins` says which files are device stand-ins.
    pub(in crate::model) fn parse(text: &str, stand_ins: &dyn StandIns) -> Vmas<'a> {
        let mut list: Vec<Vma> = text
            .lines()
            .filter_map(|l| parse_line(l, stand_ins))
            .collect();
        list.sort_unstable_by_key(|v| v.start);
        Vmas {
            source: Source::List(list),
            hidden: None,
        }
    }

    /// The VMAs of the process whose `/proc/<pid>/maps` is open as `maps`, asked of the
    /// kernel at each lookup (`PROCMAP_QUERY`).
    pub(in crate::model) fn query(maps: Arc<OwnedFd>, stand_ins: &'a dyn StandIns) -> Vmas<'a> {
        Vmas {
            source: Source::Query { maps, stand_ins },
            hidden: None,
        }
    }

    /// These VMAs, seen through what the supervisor hid ([`Hidden`]).
    pub(in crate::model) fn through(mut self, hidden: Option<Arc<Hidden>>) -> Vmas<'a> {
        self.hidden = hidden;
        self
    }

    /// Whether the kernel answers `PROCMAP_QUERY` on `maps` (not `ENOTTY` or `EINVAL`).
    pub(in crate::model) fn query_supported(maps: &OwnedFd) -> bool {
        !matches!(
            procmap::procmap_query(
                maps.as_fd(),
                0,
                procmap::PROCMAP_QUERY_COVERING_OR_NEXT_VMA,
                &mut []
            ),
            Err(Errno::NOTTY | Errno::INVAL)
        )
    }

    /// The VMA holding byte `addr` (`vma_lookup`), or with `or_next` the first one above it
    /// (`find_vma`).
    fn find(&self, addr: u64, or_next: bool) -> Option<Vma> {
        let v = self.find_raw(addr, or_next)?;
        let Some(hidden) = &self.hidden else {
            return Some(v);
        };
        let spans = hidden.lock();
        if spans.is_empty() {
            return Some(v);
        }
        let show = |mut v: Vma| {
            if !v.read
                && !v.write
                && !v.exec
                && let Some(prot) = hidden_prot(&spans, v.start, v.end)
            {
                v.read = prot & libc::PROT_READ as u32 != 0;
                v.write = prot & libc::PROT_WRITE as u32 != 0;
                v.exec = prot & libc::PROT_EXEC as u32 != 0;
            }
            v
        };
        let mut v = show(v);
        // The kernel merges neighbours that only our mprotect told apart.
        let same = |a: &Vma, b: &Vma| {
            Vma {
                start: 0,
                end: 0,
                ..*a
            } == Vma {
                start: 0,
                end: 0,
                ..*b
            }
        };
        while hidden_edge(&spans, v.end) {
            match self.find_raw(v.end, false).map(show) {
                Some(n) if same(&v, &n) => v.end = n.end,
                _ => break,
            }
        }
        while v.start > 0 && hidden_edge(&spans, v.start) {
            match self.find_raw(v.start - 1, false).map(show) {
                Some(n) if same(&v, &n) => v.start = n.start,
                _ => break,
            }
        }
        Some(v)
    }

    /// [`Vmas::find`] as the kernel reports the VMAs.
    fn find_raw(&self, addr: u64, or_next: bool) -> Option<Vma> {
        match &self.source {
            Source::List(list) => {
                if or_next {
                    let i = list.partition_point(|v| v.end <= addr);
                    return list.get(i).copied();
                }
                let i = list.partition_point(|v| v.start <= addr);
                let v = list.get(i.checked_sub(1)?)?;
                (addr < v.end).then_some(*v)
            }
            Source::Query { maps, stand_ins } => {
                let flags = if or_next {
                    procmap::PROCMAP_QUERY_COVERING_OR_NEXT_VMA
                } else {
                    0
                };
                let mut name = [0u8; NAME_MAX];
                let q = procmap::procmap_query(maps.as_fd(), addr, flags, &mut name).ok()?;
                let len = (q.vma_name_size as usize).saturating_sub(1).min(NAME_MAX);
                let path = std::str::from_utf8(&name[..len]).unwrap_or("");
                let perm = |bit| q.vma_flags & bit != 0;
                Some(Vma::new(
                    q.vma_start,
                    q.vma_end,
                    (
                        perm(procmap::PROCMAP_QUERY_VMA_READABLE),
                        perm(procmap::PROCMAP_QUERY_VMA_WRITABLE),
                        perm(procmap::PROCMAP_QUERY_VMA_EXECUTABLE),
                        perm(procmap::PROCMAP_QUERY_VMA_SHARED),
                    ),
                    rustix::fs::makedev(q.dev_major, q.dev_minor),
                    q.inode,
                    path,
                    *stand_ins,
                ))
            }
        }
    }

    /// The VMA holding byte `addr` (`vma_lookup`).
    pub(super) fn lookup(&self, addr: u64) -> Option<Vma> {
        self.find(addr, false)
    }

    /// The first VMA that ends above `addr` (`find_vma`): the one holding it, or the next.
    pub(super) fn covering_or_next(&self, addr: u64) -> Option<Vma> {
        self.find(addr, true)
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

    /// `hmm_range_fault` over `[start, end)` with `HMM_PFN_REQ_FAULT` on every page (and
    /// `HMM_PFN_REQ_WRITE` with `write`), as `walk_page_range` visits it VMA by VMA, the first
    /// failing one deciding (mm/hmm.c):
    /// * a hole, no VMA under some page (`hmm_vma_walk_hole` without `walk->vma`): `EFAULT`;
    /// * device memory, `VM_IO | VM_PFNMAP` (a BO's CPU mapping through a render node or a
    ///   dma-buf, the doorbell, MMIO and event pages of `/dev/kfd`, `[vvar]`), or a VMA
    ///   without `VM_READ` (`hmm_vma_walk_test`: "vma ranges that don't have struct page
    ///   backing them or map I/O devices directly cannot be handled"): `EFAULT`;
    /// * a write asked of a VMA without `VM_WRITE` (`hmm_vma_fault`): `EPERM`.
    ///
    /// A fault the memory itself refuses (`handle_mm_fault`'s `VM_FAULT_ERROR`, e.g. a file
    /// mapping past its end: `EFAULT`) is not modelled.
    pub(super) fn fault_in(&self, start: u64, end: u64, write: bool) -> Result<(), Errno> {
        let mut at = start;
        while at < end {
            let Some(v) = self.lookup(at) else {
                return Err(Errno::FAULT);
            };
            if v.device || !v.read {
                return Err(Errno::FAULT);
            }
            if write && !v.write {
                return Err(Errno::PERM);
            }
            at = v.end;
        }
        Ok(())
    }

    /// The VMAs that overlap `[start, end)`, clipped to it: `(vma, start, end)` in bytes,
    /// holes skipped.
    pub(super) fn overlapping(&self, start: u64, end: u64) -> Vec<(Vma, u64, u64)> {
        let mut out = Vec::new();
        let mut at = start;
        while at < end {
            let Some(v) = self.covering_or_next(at) else {
                break;
            };
            if v.start >= end {
                break;
            }
            out.push((v, v.start.max(at), v.end.min(end)));
            at = v.end;
        }
        out
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
            out.push((v, page, next - 1));
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
fn parse_line(line: &str, stand_ins: &dyn StandIns) -> Option<Vma> {
    let mut fields = line.split_whitespace();
    let (lo, hi) = fields.next()?.split_once('-')?;
    let perms = fields.next()?.as_bytes();
    let _offset = fields.next()?;
    let (major, minor) = fields.next()?.split_once(':')?;
    let inode: u64 = fields.next()?.parse().ok()?;
    let path = fields.next().unwrap_or("");
    let dev = rustix::fs::makedev(
        u32::from_str_radix(major, 16).ok()?,
        u32::from_str_radix(minor, 16).ok()?,
    );
    let perm = |i: usize, c: u8| perms.get(i) == Some(&c);
    Some(Vma::new(
        u64::from_str_radix(lo, 16).ok()?,
        u64::from_str_radix(hi, 16).ok()?,
        (perm(0, b'r'), perm(1, b'w'), perm(2, b'x'), perm(3, b's')),
        dev,
        inode,
        path,
        stand_ins,
    ))
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

    fn vmas() -> Vmas<'static> {
        Vmas::parse(MAPS, &|d: u64, ino: u64| {
            d == rustix::fs::makedev(0, 1) && ino == 4242
        })
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
    fn validity_neighbours_and_pieces() {
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
        let pieces = v.pieces(page + 2, page + 9);
        assert_eq!(pieces.len(), 2);
        assert_eq!((pieces[0].1, pieces[0].2), (page + 2, page + 3));
        assert_eq!((pieces[1].1, pieces[1].2), (page + 4, page + 7));
        assert_eq!(
            v.fault_in(base, base + 0x8000, false),
            Ok(()),
            "read-only is readable"
        );
        assert_eq!(
            v.fault_in(base, base + 0x8000, true),
            Err(Errno::PERM),
            "not writable"
        );
        assert_eq!(
            v.fault_in(base, base + 0x9000, false),
            Err(Errno::FAULT),
            "a hole"
        );
        assert_eq!(
            v.fault_in(base + 0x1_0000, base + 0x1_1000, false),
            Err(Errno::FAULT),
            "device memory"
        );
        let next = v
            .covering_or_next(base + 0x9000)
            .expect("the memfd above the hole");
        assert_eq!(next.start, base + 0x1_0000);
        let over: Vec<(u64, u64)> = v
            .overlapping(base + 0x6000, base + 0x1_1000)
            .iter()
            .map(|&(_, s, e)| (s, e))
            .collect();
        assert_eq!(
            over,
            vec![
                (base + 0x6000, base + 0x8000),
                (base + 0x1_0000, base + 0x1_1000)
            ]
        );
        assert!(v.lookup(0x0100_0000).expect("heap").heap);
    }

    /// PROCMAP_QUERY and the maps text say the same of this process's own mappings: a
    /// read-only private page next to a PROT_NONE one, and a shared one.
    #[test]
    fn query_agrees_with_the_maps_text() {
        use rustix::mm::{MapFlags, ProtFlags, mmap_anonymous, munmap};
        let maps = Arc::new(OwnedFd::from(
            std::fs::File::open("/proc/self/maps").expect("maps"),
        ));
        if !Vmas::query_supported(&maps) {
            // Nothing to compare on a kernel before 6.11: the model parses the text there.
            let release = rustix::system::uname()
                .release()
                .to_string_lossy()
                .into_owned();
            let mut v = release
                .split(['.', '-'])
                .map(|n| n.parse::<u32>().unwrap_or(0));
            let version = (v.next().unwrap_or(0), v.next().unwrap_or(0));
            assert!(version < (6, 11), "Linux {release} has PROCMAP_QUERY");
            return;
        }
        // SAFETY: fresh anonymous mappings of this test, unmapped below; nothing else uses them.
        let (private, shared) = unsafe {
            let private = mmap_anonymous(
                std::ptr::null_mut(),
                3 * 4096,
                ProtFlags::READ,
                MapFlags::PRIVATE,
            )
            .expect("mmap");
            rustix::mm::mprotect(
                private.cast::<u8>().add(4096).cast(),
                4096,
                rustix::mm::MprotectFlags::empty(),
            )
            .expect("a PROT_NONE page in the middle");
            let shared = mmap_anonymous(
                std::ptr::null_mut(),
                4096,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
            )
            .expect("mmap");
            (private as u64, shared as u64)
        };
        let none = |_: u64, _: u64| false;
        let query = Vmas::query(maps, &none);
        let text = std::fs::read_to_string("/proc/self/maps").expect("maps");
        let parsed = Vmas::parse(&text, &none);
        for addr in [private, private + 4096, private + 8192, shared, 0x1000] {
            assert_eq!(query.lookup(addr), parsed.lookup(addr), "at {addr:#x}");
            assert_eq!(
                query.covering_or_next(addr),
                parsed.covering_or_next(addr),
                "at or after {addr:#x}"
            );
        }
        let first = query.lookup(private).expect("the first page");
        assert!(first.read && !first.write && first.anonymous && !first.shared);
        assert!(query.lookup(shared).expect("the shared page").shared);
        let none = query.lookup(private + 4096).expect("the PROT_NONE page");
        assert!(!none.read && !none.write && none.start == private + 4096);
        assert!(query.lookup(0x1000).is_none(), "below mmap_min_addr");
        // SAFETY: the pages mapped above, not used after this.
        unsafe {
            munmap(private as *mut _, 3 * 4096).expect("munmap");
            munmap(shared as *mut _, 4096).expect("munmap");
        }
    }
}
