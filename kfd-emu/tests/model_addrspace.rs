//! The address space tracked at the syscall: munmap, mremap, MAP_FIXED mmap, madvise and
//! mprotect of the attached thread reach the model before the kernel runs them, and drive what
//! the kernel's MMU notifiers drive — SVM ranges unmapped or split with their
//! `UNMAP_FROM_GPU` records, evictions with XNACK on (unmapped from the GPUs) and off (queues
//! evicted, then restored 1 ms later), USERPTR BOs evicted and restored (and left without
//! pages when their memory is gone). Each record is checked exactly (timestamps aside), read
//! from an SMI stream opened before the call and right after it returns.

mod model_support;
mod model_svm_support;

use std::sync::Arc;
use std::time::Duration;

use kfd_emu::model::GpuFaultReason;
use kfd_ioctl::abi::*;
use kfd_ioctl::{Errno, Kfd, SmiEvents};
use model_svm_support::*;

/// Every record of the events an address-space change makes, on GPU `gpu`.
fn smi_all(kfd: &Kfd, gpu: u32) -> SmiEvents {
    let smi = kfd.smi_events(gpu).expect("SMI_EVENTS");
    smi.set_mask(
        SmiEventMask::QUEUE_EVICTION | SmiEventMask::QUEUE_RESTORE | SmiEventMask::UNMAP_FROM_GPU,
    )
    .expect("mask");
    smi
}

/// The ranges of this process as `(first page, pages)` relative to `base`.
fn ranges_from(view: &kfd_emu::model::Model, base: u64) -> Vec<(i64, u64)> {
    view.svm_ranges(pid())
        .iter()
        .map(|r| ((r.start as i64 - base as i64) / PAGE as i64, r.size / PAGE))
        .collect()
}

/// `munmap(2)` of `[addr, addr + len)`, as the errno.
fn munmap(addr: u64, len: u64) -> Result<(), Errno> {
    // SAFETY: the tests unmap only memory they mapped themselves (an `Anon`, whose pages they
    // tell it they unmapped) or calls the kernel refuses.
    unsafe { rustix::mm::munmap(addr as *mut _, len as usize) }
}

/// `mprotect(2)`, as the errno.
fn mprotect(addr: u64, len: u64, prot: u32) -> Result<(), Errno> {
    // SAFETY: a raw mprotect of the test's own memory, which no Rust reference covers.
    let r = unsafe { libc::mprotect(addr as *mut _, len as usize, prot as i32) };
    if r == 0 {
        Ok(())
    } else {
        Err(Errno::from_raw_os_error(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ))
    }
}

/// `madvise(2)`, as the errno.
fn madvise(addr: u64, len: u64, advice: i32) -> Result<(), Errno> {
    // SAFETY: dropping pages of the test's own anonymous memory, which no Rust reference
    // covers; the test reads them again only through the kernel (zero pages).
    let r = unsafe { libc::madvise(addr as *mut _, len as usize, advice) };
    if r == 0 {
        Ok(())
    } else {
        Err(Errno::from_raw_os_error(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ))
    }
}

/// Anonymous memory mapped with `MAP_FIXED` over `[addr, addr + len)` of the test's own
/// memory.
fn map_fixed(addr: u64, len: u64) {
    // SAFETY: replaces pages of the test's own `Anon`, which nothing references.
    unsafe {
        rustix::mm::mmap_anonymous(
            addr as *mut _,
            len as usize,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::FIXED,
        )
    }
    .expect("mmap MAP_FIXED");
}

/// With XNACK on SET maps nothing: a GPU read of `va` faults the range's block (all of a
/// small range, left in place) in on GPU `g`.
fn fault_in(view: &kfd_emu::model::Model, g: u32, va: u64) {
    let mut seen = [0u8; 1];
    view.gpu_read(pid(), g, va, &mut seen).expect("fault in");
}

/// With XNACK on: the first GPU, its SMI stream (every event), and 8 pages of a fresh 2 MiB
/// anonymous mapping registered in place for it, the first page faulted in by the GPU.
fn mapped_in_place(view: &kfd_emu::model::Model) -> (Kfd, u32, SmiEvents, i32, Anon) {
    let (kfd, gpus) = open_all(view);
    let g = gpus[0];
    kfd.set_xnack_mode(true).expect("XNACK on");
    let smi = smi_all(&kfd, g);
    let mem = Anon::new(2 * MIB);
    svm_set(&kfd, mem.addr, 8 * PAGE, &[in_place(g)]).expect("in place");
    fault_in(view, g, mem.addr);
    (kfd, g, smi, pid(), mem)
}

#[test]
fn munmap_of_the_middle_of_a_range_leaves_two_and_is_recorded_before_it_returns() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let mut smi = smi_all(&kfd, g);
        let pid = pid();
        let mem = Anon::new(2 * MIB);
        svm_set(&kfd, mem.addr, 16 * PAGE, &[access(g)]).expect("map on the GPU");
        assert_eq!(ranges_from(&view, mem.addr), [(0, 16)]);
        mem.unmap(5, 3);
        // No model call in between: the notifier ran inside munmap.
        let p5 = mem.pfn(5);
        assert_eq!(
            drain(&mut smi),
            [format!("b T -{pid} @{p5:x}(3) {g:x} 2")],
            "UNMAP_FROM_GPU, trigger UNMAP_FROM_CPU, the three pages, on the GPU"
        );
        assert_eq!(ranges_from(&view, mem.addr), [(0, 5), (8, 8)]);
        let mut seen = [0u8; 4];
        view.gpu_read(pid, g, mem.page(4), &mut seen)
            .expect("the head is still mapped");
        view.gpu_read(pid, g, mem.page(8), &mut seen)
            .expect("the tail is still mapped");
        // Memory mapped again at the same place is new: its GET shows the defaults, and the
        // old attributes do not come back.
        map_fixed(mem.page(5), 3 * PAGE);
        mem.mapped_again(5, 3);
        let gran = svm_get_one(&kfd, mem.page(5), 3 * PAGE, KFD_IOCTL_SVM_ATTR_ACCESS, g);
        assert_eq!(
            gran.0, KFD_IOCTL_SVM_ATTR_NO_ACCESS,
            "no range: XNACK off defaults"
        );
        assert_eq!(ranges_from(&view, mem.addr), [(0, 5), (8, 8)]);
        assert!(
            drain(&mut smi).is_empty(),
            "mapping new memory invalidates nothing"
        );
    })
    .expect("attach");
}

#[test]
fn map_fixed_over_a_range_replaces_it() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let mut smi = smi_all(&kfd, g);
        let pid = pid();
        let mem = Anon::new(2 * MIB);
        svm_set(&kfd, mem.addr, 8 * PAGE, &[access(g), granularity(1)]).expect("map");
        map_fixed(mem.page(6), 4 * PAGE);
        let p6 = mem.pfn(6);
        assert_eq!(drain(&mut smi), [format!("b T -{pid} @{p6:x}(2) {g:x} 2")]);
        assert_eq!(ranges_from(&view, mem.addr), [(0, 6)]);
        let gran = svm_get_one(
            &kfd,
            mem.page(6),
            2 * PAGE,
            KFD_IOCTL_SVM_ATTR_GRANULARITY,
            0,
        );
        assert_eq!(gran.1, 9, "the new memory has no range");
    })
    .expect("attach");
}

#[test]
fn mremap_moving_a_range_unmaps_it_from_the_gpus() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let mut smi = smi_all(&kfd, g);
        let pid = pid();
        let mem = Anon::new(2 * MIB);
        let to = Anon::new(2 * MIB);
        svm_set(&kfd, mem.addr, 4 * PAGE, &[access(g)]).expect("map");
        // SAFETY: moves four pages of `mem` onto four pages of `to`, both the test's own;
        // `mem` is told they are gone, `to` still owns its (new) pages.
        let moved = unsafe {
            libc::mremap(
                mem.addr as *mut _,
                (4 * PAGE) as usize,
                (4 * PAGE) as usize,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                to.addr as *mut libc::c_void,
            )
        };
        assert_eq!(moved as u64, to.addr, "mremap");
        mem.forget(0, 4);
        let p0 = mem.pfn(0);
        assert_eq!(drain(&mut smi), [format!("b T -{pid} @{p0:x}(4) {g:x} 2")]);
        assert!(
            view.svm_ranges(pid).is_empty(),
            "SVM ranges do not follow the memory"
        );
        // Shrinking in place cuts the tail off a range.
        svm_set(&kfd, to.addr, 4 * PAGE, &[access(g)]).expect("map the moved memory");
        // SAFETY: shrinks the test's own mapping in place.
        let shrunk =
            unsafe { libc::mremap(to.addr as *mut _, (4 * PAGE) as usize, PAGE as usize, 0) };
        assert_eq!(shrunk as u64, to.addr);
        to.forget(1, 3);
        let t1 = to.pfn(1);
        assert_eq!(drain(&mut smi), [format!("b T -{pid} @{t1:x}(3) {g:x} 2")]);
        assert_eq!(ranges_from(&view, to.addr), [(0, 1)]);
    })
    .expect("attach");
}

#[test]
fn madvise_dontneed_with_xnack_on_unmaps_from_the_gpus_and_keeps_the_range() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (_kfd, g, mut smi, pid, mem) = mapped_in_place(&view);
        assert_eq!(
            view.svm_page(pid, mem.page(2)).map(|p| p.mapped_on),
            Some(vec![g])
        );
        madvise(mem.page(2), 2 * PAGE, libc::MADV_DONTNEED).expect("madvise");
        let p2 = mem.pfn(2);
        assert_eq!(
            drain(&mut smi),
            [format!("b T -{pid} @{p2:x}(2) {g:x} 0")],
            "UNMAP_FROM_GPU, trigger MMU_NOTIFY"
        );
        assert_eq!(ranges_from(&view, mem.addr), [(0, 8)], "the range stays");
        assert_eq!(
            view.svm_page(pid, mem.page(2)).map(|p| p.mapped_on),
            Some(vec![])
        );
        assert_eq!(
            view.svm_page(pid, mem.page(4)).map(|p| p.mapped_on),
            Some(vec![g])
        );
        // A retry fault maps it again.
        let mut seen = [1u8; 4];
        view.gpu_read(pid, g, mem.page(2), &mut seen)
            .expect("faulted in");
        assert_eq!(seen, [0; 4], "dropped pages read as zeros");
        // Advice that drops nothing is not seen.
        madvise(mem.page(4), 2 * PAGE, libc::MADV_WILLNEED).expect("madvise");
        assert!(drain(&mut smi).iter().all(|r| !r.starts_with('b')));
    })
    .expect("attach");
}

#[test]
fn madvise_dontneed_with_xnack_off_evicts_the_queues_then_restores_them() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let mut smi = smi_all(&kfd, g);
        let pid = pid();
        let mem = Anon::new(2 * MIB);
        svm_set(&kfd, mem.addr, 8 * PAGE, &[access(g)]).expect("map");
        madvise(mem.page(1), PAGE, libc::MADV_DONTNEED).expect("madvise");
        assert_eq!(
            drain(&mut smi),
            [format!("9 T -{pid} {g:x} 0")],
            "QUEUE_EVICTION, trigger SVM, before madvise returns"
        );
        assert_eq!(
            records(&mut smi, 1),
            [format!("a T -{pid} {g:x} \0")],
            "QUEUE_RESTORE from the restore worker"
        );
        assert_eq!(ranges_from(&view, mem.addr), [(0, 8)]);
        assert_eq!(
            view.svm_page(pid, mem.page(1)).map(|p| p.mapped_on),
            Some(vec![g])
        );
        // A range nobody mapped on a GPU is not evicted.
        let other = Anon::new(2 * MIB);
        svm_set(&kfd, other.addr, 8 * PAGE, &[]).expect("register, no access");
        madvise(other.addr, 8 * PAGE, libc::MADV_DONTNEED).expect("madvise");
        std::thread::sleep(Duration::from_millis(20));
        assert!(drain(&mut smi).is_empty(), "nothing was mapped");
    })
    .expect("attach");
}

#[test]
fn mprotect_evicts_what_changes_protection() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (_kfd, g, mut smi, pid, mem) = mapped_in_place(&view);
        let rw = (libc::PROT_READ | libc::PROT_WRITE) as u32;
        mprotect(mem.addr, 8 * PAGE, rw).expect("same protection");
        assert!(
            drain(&mut smi).is_empty(),
            "mprotect_fixup: nothing changes"
        );
        mprotect(mem.page(6), 2 * PAGE, libc::PROT_READ as u32).expect("read-only");
        let p6 = mem.pfn(6);
        assert_eq!(drain(&mut smi), [format!("b T -{pid} @{p6:x}(2) {g:x} 0")]);
        // The GPU maps it again read-only on its next fault.
        let mut seen = [0u8; 4];
        view.gpu_read(pid, g, mem.page(6), &mut seen)
            .expect("read fault");
        let page = view.svm_page(pid, mem.page(6)).expect("page");
        assert_eq!((page.mapped_on, page.writable_on), (vec![g], vec![]));
        mprotect(mem.page(6), 2 * PAGE, rw).expect("writable again");
    })
    .expect("attach");
}

#[test]
fn calls_the_kernel_refuses_change_nothing() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let mut smi = smi_all(&kfd, g);
        let mem = Anon::new(2 * MIB);
        svm_set(&kfd, mem.addr, 8 * PAGE, &[access(g)]).expect("map");
        assert_eq!(munmap(mem.addr + 1, PAGE), Err(Errno::INVAL), "unaligned");
        assert_eq!(munmap(mem.addr, 0), Err(Errno::INVAL), "empty");
        assert_eq!(
            munmap(mem.addr, u64::MAX - mem.addr),
            Err(Errno::INVAL),
            "too long"
        );
        let rw = (libc::PROT_READ | libc::PROT_WRITE) as u32;
        assert_eq!(
            mprotect(mem.addr + 8, PAGE, 0),
            Err(Errno::INVAL),
            "unaligned"
        );
        assert_eq!(
            mprotect(mem.addr, PAGE, rw | 0x100),
            Err(Errno::INVAL),
            "bad prot"
        );
        assert_eq!(
            madvise(mem.addr + 8, PAGE, libc::MADV_DONTNEED),
            Err(Errno::INVAL),
            "unaligned"
        );
        assert_eq!(
            mprotect(mem.addr, 0, 0),
            Ok(()),
            "an empty mprotect does nothing"
        );
        std::thread::sleep(Duration::from_millis(20));
        assert!(drain(&mut smi).is_empty(), "no record");
        assert_eq!(ranges_from(&view, mem.addr), [(0, 8)]);
        assert_eq!(
            view.svm_page(pid(), mem.page(0)).map(|p| p.mapped_on),
            Some(vec![g])
        );
    })
    .expect("attach");
}

#[test]
fn userptr_invalidations_evict_and_restore_and_unmapped_memory_stays_invalid() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let mut smi = smi_all(&kfd, g);
        let pid = pid();
        let mem = Anon::new(2 * MIB);
        mem.write(0, b"host");
        // SAFETY: `mem` is this test's memory, mapped until the end of the test (except the
        // page unmapped below, after which the GPU is only shown to fault on it); no Rust
        // reference covers it while the GPU view reaches it.
        let bo =
            unsafe { kfd.alloc_userptr(g, mem.addr, mem.addr, 4 * PAGE, AllocMemFlags::WRITABLE) }
                .expect("USERPTR");
        kfd.map_memory_to_gpu(&bo, &[g]).expect("map");
        madvise(mem.page(3), PAGE, libc::MADV_DONTNEED).expect("madvise");
        assert_eq!(
            drain(&mut smi),
            [format!("9 T -{pid} {g:x} 1")],
            "QUEUE_EVICTION, trigger USERPTR"
        );
        assert_eq!(records(&mut smi, 1), [format!("a T -{pid} {g:x} \0")]);
        let mut seen = [0u8; 4];
        view.gpu_read(pid, g, mem.addr, &mut seen)
            .expect("valid again");
        assert_eq!(&seen, b"host");
        // Memory outside the BO is nobody's business.
        madvise(mem.page(8), PAGE, libc::MADV_DONTNEED).expect("madvise");
        // The BO's memory unmapped: evicted, restored without pages; the GPU faults.
        mem.unmap(2, 1);
        assert_eq!(
            records(&mut smi, 2),
            [
                format!("9 T -{pid} {g:x} 1"),
                format!("a T -{pid} {g:x} \0")
            ]
        );
        let fault = view
            .gpu_read(pid, g, mem.addr, &mut seen)
            .expect_err("no pages");
        assert_eq!(fault.reason, GpuFaultReason::NotMapped);
        // Memory mapped again at the place does not bring the pages back.
        map_fixed(mem.page(2), PAGE);
        mem.mapped_again(2, 1);
        assert!(view.gpu_read(pid, g, mem.addr, &mut seen).is_err());
        kfd.unmap_memory_from_gpu(&bo, &[g]).expect("unmap");
        kfd.free_memory_of_gpu(bo).expect("free");
    })
    .expect("attach");
}

/// The environment variable naming what the traced program ([`addrspace_role`]) does.
const ROLE: &str = "KFD_EMU_TEST_ADDRSPACE_ROLE";

/// Runs this test binary's [`addrspace_role`] as `role` under `kfd-emu run` (the supervisor
/// in this process, the program traced) against a model of the mi300x, and returns its exit
/// status: the role asserts what it sees.
fn run_role(role: &str) -> std::process::ExitStatus {
    let model = model("mi300x");
    let gpu = &model.machine().gpus()[0];
    let mut command = std::process::Command::new(std::env::current_exe().expect("test binary"));
    command
        .args([
            "--exact",
            "addrspace_role",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, format!("{role}:{}:{}", gpu.gpu_id, gpu.render_minor));
    kfd_emu::supervisor::spawn_command(model, &mut command).expect("kfd-emu run")
}

/// Under `kfd-emu run` (a traced program, the supervisor in another process): the munmap of
/// the middle of a range is recorded before munmap returns, and so is a MAP_FIXED mapping of
/// a file over a page of it (a call the tracer sees).
#[test]
fn under_kfd_emu_run_munmap_is_recorded_before_it_returns() {
    let status = run_role("munmap");
    assert!(status.success(), "the program's checks failed: {status:?}");
}

/// Under `kfd-emu run` a fork is seen: the parent's private memory becomes copy-on-write
/// (`MMU_NOTIFY_PROTECTION_PAGE`), so its range mapped on a GPU with XNACK off evicts the
/// queues, and the restore worker resumes them.
#[test]
fn under_kfd_emu_run_a_fork_evicts_the_parents_mapped_ranges() {
    let status = run_role("fork");
    assert!(status.success(), "the program's checks failed: {status:?}");
}

/// The traced program (runs only under [`ROLE`]).
#[test]
fn addrspace_role() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let mut parts = role.split(':');
    let (what, g, minor) = (
        parts.next().unwrap_or(""),
        parts
            .next()
            .and_then(|v| v.parse::<u32>().ok())
            .expect("gpu_id"),
        parts
            .next()
            .and_then(|v| v.parse::<u32>().ok())
            .expect("render minor"),
    );
    let kfd = Kfd::open().expect("the emulated /dev/kfd");
    kfd.acquire_vm(g, minor).expect("acquire_vm");
    let mut smi = smi_all(&kfd, g);
    let pid = pid();
    let mem = Anon::new(2 * MIB);
    svm_set(&kfd, mem.addr, 16 * PAGE, &[access(g)]).expect("map on the GPU");
    match what {
        "munmap" => {
            mem.unmap(5, 3);
            let p5 = mem.pfn(5);
            assert_eq!(drain(&mut smi), [format!("b T -{pid} @{p5:x}(3) {g:x} 2")]);
            let mut a = [attr(KFD_IOCTL_SVM_ATTR_GRANULARITY, 0)];
            assert_eq!(svm_get(&kfd, mem.page(5), PAGE, &mut a), Err(Errno::FAULT));
            svm_get(&kfd, mem.addr, 5 * PAGE, &mut a).expect("the head is a range");
            // A MAP_FIXED mapping of a file (which the tracer, not the listener, sees) over
            // page 10 replaces it.
            let exe = std::fs::File::open("/proc/self/exe").expect("exe");
            // SAFETY: maps a page of this program's file over a page of `mem`, which nothing
            // references; `mem` unmaps it with the rest on drop.
            let at = unsafe {
                libc::mmap(
                    mem.page(10) as *mut _,
                    PAGE as usize,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_FIXED,
                    std::os::fd::AsRawFd::as_raw_fd(&exe),
                    0,
                )
            };
            assert_eq!(at as u64, mem.page(10), "mmap MAP_FIXED of a file");
            let p10 = mem.pfn(10);
            assert_eq!(drain(&mut smi), [format!("b T -{pid} @{p10:x}(1) {g:x} 2")]);
        }
        "fork" => {
            // SAFETY: the child only exits (async-signal-safe).
            let child = unsafe { libc::fork() };
            if child == 0 {
                // SAFETY: ends the child at once, without running the parent's destructors.
                unsafe { libc::_exit(0) };
            }
            assert!(child > 0, "fork");
            let mut status = 0;
            // SAFETY: waits for the child just forked; writes a local.
            assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
            assert_eq!(
                records(&mut smi, 2),
                [
                    format!("9 T -{pid} {g:x} 0"),
                    format!("a T -{pid} {g:x} \0")
                ]
            );
        }
        other => panic!("unknown role {other}"),
    }
}
