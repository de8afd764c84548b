//! USERPTR registration over memory that is not plain process memory: what
//! AMDKFD_IOC_ALLOC_MEMORY_OF_GPU with `KFD_IOC_ALLOC_MEM_FLAGS_USERPTR` answers, at the ALLOC
//! ioctl itself, when the range is a BO's own CPU mapping, unmapped, partly mapped, read-only
//! or inaccessible.
//!
//! The kernel gets a USERPTR BO's pages when it is made: `amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu`
//! → `init_user_pages` → `amdgpu_ttm_tt_get_user_pages` (`vma_lookup` of the first byte:
//! `EFAULT`) → `amdgpu_hmm_range_get_pages` → `hmm_range_fault` with `HMM_PFN_REQ_FAULT |
//! HMM_PFN_REQ_WRITE` (KFD registers with userflags 0, so never `READONLY`). mm/hmm.c walks the
//! range VMA by VMA: a hole is `EFAULT` (`hmm_vma_walk_hole`), a `VM_IO | VM_PFNMAP` VMA or one
//! without `VM_READ` is `EFAULT` (`hmm_vma_walk_test`), a VMA without `VM_WRITE` is `EPERM`
//! (`hmm_vma_fault`); the first failing VMA decides. A BO's CPU mapping (render node, dma-buf:
//! `ttm_bo_mmap_obj`; the doorbell page of `/dev/kfd`: `kfd_doorbell_mmap`) is
//! `VM_IO | VM_PFNMAP`. On failure the BO is put (`drm_gem_object_put`) before any handle is
//! made (`kfd_process_device_create_obj_handle` runs only after a successful alloc), so the next
//! BO gets the id the failed one would have had (`idr_alloc`, lowest free id); and the
//! reservation `amdgpu_amdkfd_reserve_mem_limit` made is given back with the BO, which the
//! model's teardown check holds it to (`ModelConfig::check_teardown`: fails when a failed ALLOC
//! keeps its charge).
//!
//! Each case holds on a real MI300X too: the mappings are made the way libhsakmt makes them
//! (render-node offsets from ALLOC, `/dev/kfd` doorbell offsets), and each assertion is the
//! kernel's errno.

mod model_support;
mod model_svm_support;

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

use kfd_emu::backend::{Backend, MmapAction};
use kfd_emu::machine::Machine;
use kfd_emu::model::ModelConfig;
use kfd_ioctl::abi::*;
use model_support::*;
use rustix::io::Errno;
use rustix::mm::{MapFlags, ProtFlags};

const PAGE: u64 = 4096;

/// What libhsakmt's `fmm_register_user_memory` asks for (`hsaKmtRegisterMemory`).
const USERPTR: u32 = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR
    | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
    | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE;

const GTT: u32 = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;

/// `KFD_MMAP_TYPE_DOORBELL | KFD_MMAP_GPU_ID(gpu_id)` (kfd_priv.h), written out from the
/// kernel independently of the model.
fn doorbell_offset(gpu_id: u32) -> u64 {
    (0x3 << 62) | ((u64::from(gpu_id) << 46) & (0xFFFF << 46))
}

/// A `PROT_NONE` reservation of this process's address space, unmapped on drop, into which
/// each test maps pieces side by side with `MAP_FIXED`.
struct Window {
    base: u64,
    pages: u64,
}

impl Window {
    fn new(pages: u64) -> Window {
        // SAFETY: a fresh private reservation nothing else uses; unmapped on drop.
        let base = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                (pages * PAGE) as usize,
                ProtFlags::empty(),
                MapFlags::PRIVATE | MapFlags::NORESERVE,
            )
        }
        .expect("reserve");
        Window {
            base: base as u64,
            pages,
        }
    }

    /// The address of page `page`.
    fn at(&self, page: u64) -> u64 {
        assert!(page <= self.pages);
        self.base + page * PAGE
    }

    /// Anonymous private memory with `prot` over pages `[page, page + n)`.
    fn anon(&self, page: u64, n: u64, prot: ProtFlags) {
        // SAFETY: replaces pages of this window's own reservation (MAP_FIXED inside it);
        // nothing holds a reference into them.
        unsafe {
            rustix::mm::mmap_anonymous(
                self.at(page) as *mut _,
                (n * PAGE) as usize,
                prot,
                MapFlags::PRIVATE | MapFlags::FIXED,
            )
        }
        .expect("map anonymous memory");
    }

    /// A shared read-write mapping of `fd` at `offset` over pages `[page, page + n)`.
    fn file(&self, page: u64, n: u64, fd: BorrowedFd<'_>, offset: u64) {
        // SAFETY: as in `anon`: pages of this window only.
        unsafe {
            rustix::mm::mmap(
                self.at(page) as *mut _,
                (n * PAGE) as usize,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::FIXED,
                fd,
                offset,
            )
        }
        .expect("map a file");
    }

    /// Leaves pages `[page, page + n)` without any mapping.
    fn hole(&self, page: u64, n: u64) {
        // SAFETY: unmaps pages of this window only.
        unsafe { rustix::mm::munmap(self.at(page) as *mut _, (n * PAGE) as usize) }
            .expect("munmap");
    }

    /// Maps `n` pages of stand-in `file` at `offset` over `[page, page + n)` as `kfd-emu run`
    /// carries out the model's decision: the memory it redirects to, or the file itself.
    fn standin(&self, emu: &Emu, page: u64, n: u64, file: BorrowedFd<'_>, offset: u64) {
        match emu.mmap_action(file, offset, n * PAGE) {
            MmapAction::Redirect { fd, offset } => self.file(page, n, fd.as_fd(), offset),
            MmapAction::Continue => self.file(page, n, file, offset),
            MmapAction::Fail(e) => panic!("mmap of the stand-in at {offset:#x}: {e:?}"),
        }
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: the whole reservation `new` made, not used after this.
        let _ = unsafe { rustix::mm::munmap(self.base as *mut _, (self.pages * PAGE) as usize) };
    }
}

/// The handle the next BO on `gpu` gets: a GTT page allocated and freed again. A failed ALLOC
/// that left an idr entry (a handle, a leaked BO) changes it.
fn next_handle(emu: &Emu, gpu: u32) -> u64 {
    let (handle, _) = emu.alloc(gpu, va(60), PAGE, GTT).expect("a GTT page");
    emu.free(handle).expect("free");
    handle
}

/// A model of an MI300X that checks, when the process exits, that its teardown frees
/// everything ([`ModelConfig::check_teardown`]): a failed ALLOC that kept memory or a charge
/// shows up there. (On hardware the kernel's own accounting is not visible; the handle check
/// of [`refused`] is.)
fn mi300x() -> Emu {
    let mut emu = Emu::new(ModelConfig {
        machine: Machine::preset("mi300x").expect("preset"),
        check_teardown: true,
        ..ModelConfig::default()
    });
    emu.acquire_all();
    emu
}

/// Ends the test's KFD process: nothing the failed ALLOCs made survives its teardown.
fn nothing_survives(emu: &Emu) {
    emu.model.process_exited(emu.caller.tgid);
    assert!(
        !emu.model.teardown_leaks_found(),
        "the teardown left memory or charges behind"
    );
}

/// A USERPTR of `pages` pages at `addr` must fail with `errno` and leave no handle behind.
#[track_caller]
fn refused(emu: &Emu, what: &str, addr: u64, pages: u64, errno: Errno) {
    let gpu = emu.gpu();
    let before = next_handle(emu, gpu);
    assert_eq!(
        emu.alloc_at(gpu, va(61), pages * PAGE, USERPTR, addr),
        Err(errno),
        "{what}"
    );
    assert_eq!(
        next_handle(emu, gpu),
        before,
        "{what}: no handle left behind"
    );
}

/// A USERPTR of `pages` pages at `addr` is made (and freed again).
#[track_caller]
fn registered(emu: &Emu, what: &str, addr: u64, pages: u64) {
    let (handle, _) = emu
        .alloc_at(emu.gpu(), va(62), pages * PAGE, USERPTR, addr)
        .unwrap_or_else(|e| panic!("{what}: {e:?}"));
    emu.free(handle).expect("free");
}

/// A BO's own CPU mapping is device memory (`VM_IO | VM_PFNMAP`): registering it, or any range
/// that reaches into it, is `EFAULT` at ALLOC (`hmm_vma_walk_test`), whether the mapping came
/// from the render node (GTT and CPU-visible VRAM, `ttm_bo_mmap_obj`), a dma-buf of the BO or
/// the doorbell slice of `/dev/kfd` (`kfd_doorbell_mmap`). Plain memory next to it registers.
#[test]
fn a_bos_cpu_mapping_is_not_process_memory() {
    let emu = mi300x();
    let gpu = emu.gpu();
    let render = emu.renders[0].try_clone().expect("dup the render fd");
    let w = Window::new(16);
    // [0,2) anonymous | [2,4) GTT BO | [4,6) VRAM BO | [6,8) dma-buf | [8,10) doorbells |
    // [10,12) anonymous
    w.anon(0, 2, ProtFlags::READ | ProtFlags::WRITE);
    let (gtt, gtt_offset) = emu.alloc(gpu, va(1), 2 * PAGE, GTT).expect("GTT BO");
    w.standin(&emu, 2, 2, render.as_fd(), gtt_offset);
    let (_, vram_offset) = emu.alloc(gpu, va(2), 2 * PAGE, VRAM_RW).expect("VRAM BO");
    w.standin(&emu, 4, 2, render.as_fd(), vram_offset);
    let dmabuf = emu.export(gtt).expect("export the GTT BO");
    w.standin(&emu, 6, 2, dmabuf.as_fd(), 0);
    let doorbell_flags = KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    emu.alloc(gpu, va(3), 2 * PAGE, doorbell_flags)
        .expect("the doorbell BO");
    w.standin(&emu, 8, 2, emu.kfd.as_fd(), doorbell_offset(gpu));
    w.anon(10, 2, ProtFlags::READ | ProtFlags::WRITE);

    registered(&emu, "plain memory before the BOs", w.at(0), 2);
    registered(&emu, "plain memory after them", w.at(10), 2);
    for (what, page, pages) in [
        ("a GTT BO's render-node mapping", 2, 2),
        ("its second page", 3, 1),
        ("a VRAM BO's render-node mapping", 4, 2),
        ("a dma-buf mapping", 6, 2),
        ("the doorbell page of /dev/kfd", 8, 1),
        ("plain memory running into a BO's mapping", 0, 3),
        ("a BO's mapping running into plain memory", 9, 3),
        ("the whole window", 0, 12),
    ] {
        refused(&emu, what, w.at(page), pages, Errno::FAULT);
    }
    nothing_survives(&emu);
}

/// A range with no VMA under some page is `EFAULT` at ALLOC: at its first byte
/// (`amdgpu_ttm_tt_get_user_pages`' `vma_lookup`) or further on (`hmm_vma_walk_hole`); one
/// that wraps is `EOVERFLOW` (`mmu_interval_notifier_insert`).
#[test]
fn unmapped_partly_mapped_and_wrapping_ranges() {
    let emu = mi300x();
    let w = Window::new(8);
    // [0,2) rw | [2,3) hole | [3,5) rw | [5,6) hole | [6,8) rw
    w.anon(0, 8, ProtFlags::READ | ProtFlags::WRITE);
    w.hole(2, 1);
    w.hole(5, 1);
    registered(&emu, "the mapped pages", w.at(3), 2);
    for (what, page, pages) in [
        ("a hole", 2, 1),
        ("a hole, then mapped memory", 2, 3),
        ("mapped memory, then a hole", 3, 3),
        ("a hole in the middle", 0, 5),
        ("two holes", 0, 8),
    ] {
        refused(&emu, what, w.at(page), pages, Errno::FAULT);
    }
    // amdgpu_hmm_register → mmu_interval_notifier_insert, before any page is looked at: a
    // range whose last byte wraps is EOVERFLOW.
    refused(
        &emu,
        "a range that wraps",
        u64::MAX - PAGE + 1,
        2,
        Errno::OVERFLOW,
    );
    nothing_survives(&emu);
}

/// Every USERPTR's pages are faulted for writing (KFD's userflags 0), whatever `WRITABLE`
/// says: read-only memory is `EPERM` (`hmm_vma_fault`), memory without `VM_READ` is `EFAULT`
/// (`hmm_vma_walk_test`), and the first failing VMA decides.
#[test]
fn read_only_and_inaccessible_memory() {
    let emu = mi300x();
    let gpu = emu.gpu();
    let w = Window::new(8);
    // [0,2) rw | [2,4) read-only | [4,6) PROT_NONE | [6,8) rw
    w.anon(0, 2, ProtFlags::READ | ProtFlags::WRITE);
    w.anon(2, 2, ProtFlags::READ);
    w.anon(4, 2, ProtFlags::empty());
    w.anon(6, 2, ProtFlags::READ | ProtFlags::WRITE);
    for (what, page, pages, errno) in [
        ("read-only memory", 2, 2, Errno::PERM),
        ("writable, then read-only memory", 0, 3, Errno::PERM),
        ("read-only, then inaccessible memory", 3, 2, Errno::PERM),
        ("inaccessible memory", 4, 2, Errno::FAULT),
        ("inaccessible, then writable memory", 5, 2, Errno::FAULT),
    ] {
        refused(&emu, what, w.at(page), pages, errno);
    }
    let read_only = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR;
    assert_eq!(
        emu.alloc_at(gpu, va(5), PAGE, read_only, w.at(2)),
        Err(Errno::PERM),
        "without WRITABLE too: KFD never registers a USERPTR read-only"
    );
    registered(&emu, "writable memory", w.at(6), 2);
    nothing_survives(&emu);
}

/// The same walk after ALLOC: a USERPTR BO's memory replaced by a BO's CPU mapping (a
/// `MAP_FIXED` mmap of the render node over it) evicts it (`amdgpu_hmm_invalidate_hsa`), and
/// the restore worker's `update_invalid_user_pages` gets `EFAULT` for the device memory now
/// there, which it takes for success with no pages: the queues resume and a GPU access through
/// the USERPTR BO faults — it never reaches the other BO's memory through the process's
/// mapping. (Under the supervisor, which tells the model of the `MAP_FIXED`.)
#[test]
fn a_userptr_whose_memory_becomes_a_bos_mapping_keeps_no_pages() {
    use kfd_ioctl::abi::AllocMemFlags;
    use model_svm_support::{Anon, MIB, model, open_all, pid};
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let pid = pid();
        let smi = kfd.smi_events(g).expect("SMI_EVENTS");
        smi.set_mask(SmiEventMask::QUEUE_EVICTION | SmiEventMask::QUEUE_RESTORE)
            .expect("mask");
        let mut smi = smi;
        let mem = Anon::new(2 * MIB);
        mem.write(0, b"host");
        // SAFETY: `mem` is this test's memory, mapped until the end of the test; its first
        // pages are replaced below, after which the GPU is only shown to fault on them; no
        // Rust reference covers them while the GPU view reaches them.
        let user =
            unsafe { kfd.alloc_userptr(g, mem.addr, mem.addr, 2 * PAGE, AllocMemFlags::WRITABLE) }
                .expect("USERPTR");
        kfd.map_memory_to_gpu(&user, &[g]).expect("map");
        let mut seen = [0u8; 4];
        view.gpu_read(pid, g, mem.addr, &mut seen)
            .expect("the USERPTR's pages");
        assert_eq!(&seen, b"host");

        let flags = AllocMemFlags::GTT | AllocMemFlags::WRITABLE;
        let gtt = kfd
            .alloc_memory_of_gpu(g, mem.addr + MIB, 2 * PAGE, flags)
            .expect("a GTT BO");
        let render = kfd.render_fd(g).expect("the render fd");
        let offset = gtt.mmap_offset().expect("an mmap offset");
        // SAFETY: replaces the first two pages of `mem` (this test's), which nothing
        // references, with the GTT BO's CPU mapping; `mem`'s drop unmaps them.
        unsafe {
            rustix::mm::mmap(
                mem.addr as *mut _,
                (2 * PAGE) as usize,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::FIXED,
                &*render,
                offset,
            )
        }
        .expect("map the GTT BO over the USERPTR's memory");
        mem.write(0, b"bo!!");
        let records = model_svm_support::records(&mut smi, 2);
        assert_eq!(records.len(), 2, "evicted and restored: {records:?}");
        assert!(records[0].starts_with("9 "), "QUEUE_EVICTION: {records:?}");
        assert!(records[1].starts_with("a "), "QUEUE_RESTORE: {records:?}");
        let fault = view
            .gpu_read(pid, g, mem.addr, &mut seen)
            .expect_err("no pages: the GPU access faults");
        assert_eq!(fault.reason, kfd_emu::model::GpuFaultReason::NotMapped);

        kfd.unmap_memory_from_gpu(&user, &[g]).expect("unmap");
        kfd.free_memory_of_gpu(user).expect("free the USERPTR");
        kfd.free_memory_of_gpu(gtt).expect("free the GTT BO");
    })
    .expect("attach");
}
