//! CPU faults on SVM pages in VRAM (`kfd_migrate.c`, `svm_migrate_to_ram`).
//!
//! On the kernel, a page the GPU holds in VRAM is a device-private page to the CPU: the
//! process's page table has a device-private swap entry, so its first CPU touch faults into
//! the page's `dev_pagemap_ops.migrate_to_ram`, `svm_migrate_to_ram`, which migrates back
//! the granularity-aligned block around the faulting page clamped to its range
//! (`start = max(ALIGN_DOWN(addr, 1 << granularity), prange->start)`,
//! `last = min(ALIGN(addr + 1, 1 << granularity) - 1, prange->last)`) with
//! `svm_migrate_vram_to_ram(..., KFD_MIGRATE_TRIGGER_PAGEFAULT_CPU, fault_page)`: one
//! `MIGRATE_START`/`MIGRATE_END` pair per VMA piece, the `MMU_NOTIFY_MIGRATE` invalidation
//! between them (`svm_range_evict`: `UNMAP_FROM_GPU` with XNACK on, so the GPU's next access
//! faults again; queue eviction and restore with it off), and the range's `actual_loc` back
//! to 0 once no page of it is in VRAM. A range with no VRAM page does nothing
//! (`!prange->actual_loc`), and neither does a fault in memory that is not a range
//! (`svm_range_from_addr` finds none: the kernel answers `VM_FAULT_SIGBUS`, which the model
//! cannot meet: such a page was never hidden).
//!
//! The model's pages stay in the process's memory, so the emulator makes the CPU fault
//! itself: under `kfd-emu run` (the supervisor gave a [`CpuWaker`](crate::backend::CpuWaker))
//! the pages the model holds in VRAM are made `PROT_NONE` in the traced program, by
//! `mprotect`s the supervisor makes one of its threads run ([`plan`]), each span remembered
//! with the protection the program gave it (the model's VMAs see through them: [`Hidden`]).
//! A `SIGSEGV` in a hidden span comes to [`cpu_fault`], which runs `svm_migrate_to_ram`
//! and leaves the new plan (showing the block again) for the supervisor, which then restarts
//! the instruction. A system call given hidden memory comes to [`cpu_touch`] at its entry
//! (the supervisor stops the calls of a process with hidden memory and knows, for the calls
//! in its table, which bytes they copy), which faults home what the call's copies would
//! touch; a call that fails with `EFAULT` on memory the table did not know of comes to
//! [`cpu_fault`] at the address one of its pointers names, and is made again. Only private anonymous memory is ever in VRAM, so only it is hidden; a
//! VMA the program made inaccessible itself is left so. In attach mode nothing is hidden:
//! the supervisor shares the program's address space and could `mprotect` it itself, but
//! seeing the faults would take a `SIGSEGV` handler of its own in the program's process,
//! which would displace the program's (a test harness's, a runtime's); so CPU accesses are
//! not seen there, and pages stay in VRAM until a GPU fault, prefetch or eviction moves them.
//! A system call given such memory in attach mode simply copies the bytes (they never left
//! the process's memory) and succeeds, as on the kernel, but without the migration back.
//!
//! [`Hidden`]: super::super::vmas::Hidden

use kfd_ioctl::abi::KFD_MIGRATE_TRIGGER_PAGEFAULT_CPU;

use super::super::driver::Driver;
use super::super::memory::PAGE_SIZE;
use super::super::vmas::HiddenSpan;
use super::env::with_env;
use super::migrate::{restore, vram_to_ram};
use crate::backend::CpuProtect;

/// `[start, end)` byte spans minus `cut` (both ascending, disjoint).
fn minus(spans: &[(u64, u64)], cut: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for &(s, e) in spans {
        let mut at = s;
        for &(cs, ce) in cut {
            if ce <= at || cs >= e {
                continue;
            }
            if cs > at {
                out.push((at, cs));
            }
            at = at.max(ce);
        }
        if at < e {
            out.push((at, e));
        }
    }
    out
}

/// `[start, end)` byte spans in both (ascending, disjoint).
fn both(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for &(s, e) in a {
        for &(bs, be) in b {
            let (lo, hi) = (s.max(bs), e.min(be));
            if lo < hi {
                out.push((lo, hi));
            }
        }
    }
    out
}

/// The `PROT_*` bits of a VMA's permissions.
fn prot_of(read: bool, write: bool, exec: bool) -> u32 {
    let mut prot = 0;
    if read {
        prot |= libc::PROT_READ as u32;
    }
    if write {
        prot |= libc::PROT_WRITE as u32;
    }
    if exec {
        prot |= libc::PROT_EXEC as u32;
    }
    prot
}

/// The `mprotect`s that make what process `tgid` has hidden match the pages the model holds
/// in VRAM: spans no longer in VRAM shown again (marked lifting until
/// [`done`]), pages newly in VRAM hidden with the protection their VMA has.
pub(in crate::model) fn plan(m: &Driver, tgid: i32) -> Vec<CpuProtect> {
    if !m.cpu.enabled() {
        return Vec::new();
    }
    // Only a KFD process has anything to hide (a forked child has its own copy, `tracer`).
    if m.cpu.hidden_of(tgid).is_none() && !m.lock().procs.contains_key(&tgid) {
        return Vec::new();
    }
    let hidden = m.cpu.hidden_for(tgid);
    let Ok(vmas) = m.vmas(tgid) else {
        return Vec::new();
    };
    let vmas = vmas.through(Some(std::sync::Arc::clone(&hidden)));
    let st = m.lock();
    // The pages in VRAM, as byte spans.
    let mut want: Vec<(u64, u64)> = Vec::new();
    if let Some(p) = st.procs.get(&tgid) {
        for (key, r) in p.svm.ranges.iter() {
            if r.actual == 0 {
                continue;
            }
            for (first, last, state) in r.pages.runs(0, r.last - key) {
                if state.loc == 0 {
                    continue;
                }
                let (s, e) = ((key + first) * PAGE_SIZE, (key + last + 1) * PAGE_SIZE);
                match want.last_mut() {
                    Some(prev) if prev.1 == s => prev.1 = e,
                    _ => want.push((s, e)),
                }
            }
        }
    }
    let mut ops = Vec::new();
    let mut spans = hidden.lock();
    let old: Vec<(u64, HiddenSpan)> = spans.iter().map(|(&s, &h)| (s, h)).collect();
    let mut applied = Vec::new();
    for (s, h) in old {
        if h.lifting {
            continue;
        }
        applied.push((s, h.end));
        spans.remove(&s);
        let piece = [(s, h.end)];
        for (a, b) in both(&piece, &want) {
            if h.reapply {
                ops.push(CpuProtect {
                    start: a,
                    len: b - a,
                    prot: libc::PROT_NONE as u32,
                });
            }
            spans.insert(
                a,
                HiddenSpan {
                    end: b,
                    reapply: false,
                    ..h
                },
            );
        }
        for (a, b) in minus(&piece, &want) {
            ops.push(CpuProtect {
                start: a,
                len: b - a,
                prot: h.prot,
            });
            spans.insert(
                a,
                HiddenSpan {
                    end: b,
                    lifting: true,
                    reapply: false,
                    ..h
                },
            );
        }
    }
    drop(spans);
    for (a, b) in minus(&want, &applied) {
        for (vma, first, last) in vmas.pieces(a / PAGE_SIZE, b / PAGE_SIZE - 1) {
            let prot = prot_of(vma.read, vma.write, vma.exec);
            if prot == 0 || !vma.migratable() {
                // Already inaccessible (the program's own doing), or never in VRAM.
                continue;
            }
            let (s, e) = (first * PAGE_SIZE, (last + 1) * PAGE_SIZE);
            ops.push(CpuProtect {
                start: s,
                len: e - s,
                prot: libc::PROT_NONE as u32,
            });
            hidden.lock().insert(
                s,
                HiddenSpan {
                    end: e,
                    prot,
                    lifting: false,
                    reapply: false,
                },
            );
        }
    }
    drop(st);
    ops
}

/// The plan's `mprotect`s ran: the lifted spans go; a hide that failed is forgotten (the
/// memory is accessible), a lift that failed too (the memory went away).
pub(in crate::model) fn done(m: &Driver, tgid: i32, failed: &[CpuProtect]) {
    let Some(hidden) = m.cpu.hidden_of(tgid) else {
        return;
    };
    let mut spans = hidden.lock();
    spans.retain(|_, h| !h.lifting);
    for f in failed {
        if f.prot == libc::PROT_NONE as u32 {
            spans.remove(&f.start);
        }
    }
}

/// What process `tgid` has hidden (not being shown again), with the protections to restore.
pub(in crate::model) fn hidden(m: &Driver, tgid: i32) -> Vec<CpuProtect> {
    let Some(hidden) = m.cpu.hidden_of(tgid) else {
        return Vec::new();
    };
    hidden
        .lock()
        .iter()
        .filter(|(_, h)| !h.lifting)
        .map(|(&s, h)| CpuProtect {
            start: s,
            len: h.end - s,
            prot: h.prot,
        })
        .collect()
}

/// `svm_migrate_to_ram` for a CPU access of process `tgid` at byte `addr`, which faulted:
/// whether `addr` is in memory the model hid (see the [module docs](self)).
pub(in crate::model) fn cpu_fault(m: &Driver, tgid: i32, addr: u64) -> bool {
    let Some(hidden) = m.cpu.hidden_of(tgid) else {
        return false;
    };
    {
        let spans = hidden.lock();
        match spans.range(..=addr).next_back() {
            Some((_, h)) if addr < h.end => {
                if h.lifting {
                    // Being shown again: the access goes ahead once it is.
                    return true;
                }
            }
            _ => return false,
        }
    }
    to_ram(m, tgid, addr);
    // The supervisor asks for the plan next.
    if let Some(p) = m.lock().procs.get_mut(&tgid) {
        p.svm.cpu_dirty = false;
    }
    true
}

/// A system call of process `tgid` is given the byte spans `spans` (in the order it copies
/// them) to write into (`write`, as `read()` does) or to read from (as `write()` does): the
/// kernel's `copy_to_user`/`copy_from_user` touches their pages in order, and the first touch
/// of each device-private page runs `svm_migrate_to_ram` of the block around it (the block
/// then home, its other pages no longer fault). Here, before the call runs: every page of the
/// spans that is hidden (in VRAM) and whose VMA allows the access brings its block home, in
/// that order (a page the VMA forbids makes the kernel's call fail with `EFAULT` before any
/// migration, `access_error`, and so it does here). Returns whether anything moved (the
/// supervisor then runs the new plan before letting the call go on). The whole spans count:
/// a call that copies less than it is given (a short `read()`) migrates blocks the kernel
/// would have left in VRAM.
pub(in crate::model) fn cpu_touch(
    m: &Driver,
    tgid: i32,
    spans: &[(u64, u64)],
    write: bool,
) -> bool {
    let Some(hidden) = m.cpu.hidden_of(tgid) else {
        return false;
    };
    let need = if write {
        libc::PROT_WRITE as u32
    } else {
        libc::PROT_READ as u32
    };
    // The hidden pieces of the spans the access may touch, in the call's order.
    let pieces: Vec<(u64, u64)> = {
        let h = hidden.lock();
        let open: Vec<(u64, u64)> = h
            .iter()
            .filter(|(_, span)| !span.lifting && span.prot & need != 0)
            .map(|(&s, span)| (s, span.end))
            .collect();
        spans
            .iter()
            .flat_map(|&span| both(&[span], &open))
            .collect()
    };
    let mut moved = false;
    for (s, e) in pieces {
        let last = (e - 1) / PAGE_SIZE;
        let mut page = s / PAGE_SIZE;
        while page <= last {
            let Some(at) = next_in_vram(m, tgid, page, last) else {
                break;
            };
            to_ram(m, tgid, at * PAGE_SIZE);
            moved = true;
            page = at + 1;
        }
    }
    if moved && let Some(p) = m.lock().procs.get_mut(&tgid) {
        // The supervisor asks for the plan next.
        p.svm.cpu_dirty = false;
    }
    moved
}

/// The first page in `[page, last]` of process `tgid` that the model holds in VRAM.
fn next_in_vram(m: &Driver, tgid: i32, mut page: u64, last: u64) -> Option<u64> {
    let st = m.lock();
    let p = st.procs.get(&tgid)?;
    while page <= last {
        let key = match p.svm.ranges.containing(page) {
            Some(key) => key,
            None => p.svm.ranges.next_after(page).filter(|&k| k <= last)?,
        };
        let r = p.svm.ranges.get(key)?;
        let from = page.max(key);
        let to = last.min(r.last);
        if r.actual != 0
            && let Some((first, _, _)) = r
                .pages
                .runs(from - key, to - key)
                .find(|&(_, _, st)| st.loc != 0)
        {
            return Some(key + first);
        }
        page = r.last.checked_add(1)?;
    }
    None
}

/// A CPU access of process `tgid` at `addr` as the kernel's CPU fault path sees it, for a
/// caller that cannot fault (attach mode, where nothing is hidden: a replay of a recorded CPU
/// fault): when the page is in VRAM, `svm_migrate_to_ram` of the block around it, as
/// [`cpu_fault`] does. The supervisor, if it hides pages, is woken to show them again.
pub(in crate::model) fn cpu_access(m: &Driver, tgid: i32, addr: u64) {
    to_ram(m, tgid, addr);
    if m.lock()
        .procs
        .get_mut(&tgid)
        .is_some_and(|p| std::mem::take(&mut p.svm.cpu_dirty))
    {
        m.cpu.wake(tgid);
    }
}

/// `svm_migrate_to_ram` of the granularity block around `addr` (see the module docs); its
/// caller shows the pages again (`cpu_dirty`).
fn to_ram(m: &Driver, tgid: i32, addr: u64) {
    let Ok(vmas) = m.vmas(tgid) else {
        return;
    };
    let mut st = m.lock();
    with_env(&m.dev, &mut st, tgid, &vmas, |env, p| {
        let page = addr / PAGE_SIZE;
        let Some(key) = p.svm.ranges.containing(page) else {
            return;
        };
        let Some(r) = p.svm.ranges.get(key) else {
            return;
        };
        if r.actual == 0 {
            return;
        }
        // The granularity-aligned block around the page, within the range.
        let size = 1u64 << r.attrs.granularity;
        let start = (page & !(size - 1)).max(key);
        let last = page
            .checked_add(1)
            .and_then(|p1| p1.checked_next_multiple_of(size))
            .map_or(r.last, |end| (end - 1).min(r.last));
        // An error leaves the pages where they are (the kernel's VM_FAULT_SIGBUS cannot
        // happen here: the range has VMAs, or the memory would not be hidden).
        let _ = vram_to_ram(env, p, key, start, last, KFD_MIGRATE_TRIGGER_PAGEFAULT_CPU);
        restore(env, p);
    });
}

/// The program itself changes `[start, start + len)`: unmapped or replaced memory leaves the
/// hidden spans (its `PROT_NONE` goes with the VMA); an `mprotect` over a hidden span (`prot`
/// given) makes it accessible, so the span takes the new protection and is hidden again
/// after the call (the supervisor is woken).
pub(in crate::model) fn program_changed(
    m: &Driver,
    tgid: i32,
    start: u64,
    len: u64,
    prot: Option<u32>,
) {
    let Some(hidden) = m.cpu.hidden_of(tgid) else {
        return;
    };
    let end = start.saturating_add(len.next_multiple_of(PAGE_SIZE));
    let mut spans = hidden.lock();
    let hit: Vec<(u64, HiddenSpan)> = spans
        .iter()
        .filter(|(s, h)| **s < end && h.end > start)
        .map(|(&s, &h)| (s, h))
        .collect();
    if hit.is_empty() {
        return;
    }
    for (s, h) in hit {
        spans.remove(&s);
        for (a, b) in minus(&[(s, h.end)], &[(start, end)]) {
            spans.insert(a, HiddenSpan { end: b, ..h });
        }
        if let Some(prot) = prot {
            let (a, b) = (s.max(start), h.end.min(end));
            spans.insert(
                a,
                HiddenSpan {
                    end: b,
                    prot,
                    reapply: !h.lifting,
                    ..h
                },
            );
        }
    }
    drop(spans);
    if prot.is_some() {
        m.cpu.wake(tgid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_arithmetic() {
        let a = [(0, 10), (20, 30)];
        assert_eq!(minus(&a, &[(5, 25)]), vec![(0, 5), (25, 30)]);
        assert_eq!(minus(&a, &[]), a.to_vec());
        assert_eq!(minus(&a, &[(0, 30)]), vec![]);
        assert_eq!(both(&a, &[(5, 25)]), vec![(5, 10), (20, 25)]);
        assert_eq!(prot_of(true, false, true), 5);
    }
}
