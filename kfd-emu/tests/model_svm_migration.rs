//! Where SVM pages live and who maps them: prefetch migrations, GPU faults through the GPU
//! view (XNACK on and off), munmap, shared memory, NO_ACCESS and GPU_RO, VRAM accounting — each
//! checked against the exact SMI records the kernel emits (timestamps aside) and against the
//! bytes both the CPU and the GPU see.

mod model_support;
mod model_svm_support;

use std::sync::Arc;

use kfd_emu::model::GpuFaultReason;
use kfd_ioctl::abi::*;
use kfd_ioctl::{Errno, SmiEvents};
use model_svm_support::*;

const UNDEF: u32 = KFD_IOCTL_SVM_LOCATION_UNDEFINED;
const VRAM_RW: AllocMemFlags = AllocMemFlags::VRAM
    .union(AllocMemFlags::WRITABLE)
    .union(AllocMemFlags::PUBLIC);

/// Every SVM-related event (and VM faults), on GPU `gpu`.
fn smi_all(kfd: &kfd_ioctl::Kfd, gpu: u32) -> SmiEvents {
    let smi = kfd.smi_events(gpu).expect("SMI_EVENTS");
    smi.set_mask(
        SmiEventMask::VMFAULT
            | SmiEventMask::MIGRATE_START
            | SmiEventMask::MIGRATE_END
            | SmiEventMask::PAGE_FAULT_START
            | SmiEventMask::PAGE_FAULT_END
            | SmiEventMask::QUEUE_EVICTION
            | SmiEventMask::QUEUE_RESTORE
            | SmiEventMask::UNMAP_FROM_GPU,
    )
    .expect("mask");
    smi
}

/// The name and id the VM's task info carries: this (attached) thread, which acquired the VMs.
fn this_thread() -> (i32, String) {
    let tid = rustix::thread::gettid().as_raw_nonzero().get();
    let comm = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).expect("comm");
    (tid, comm.trim_end().to_owned())
}

#[test]
fn prefetch_moves_a_mapped_range_to_vram_and_back_with_xnack_off() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let mut smi = smi_all(&kfd, g);
        let pid = pid();
        let mem = Anon::new(4 * MIB);
        let pattern: Vec<u8> = (0..8192u32).map(|i| (i * 7) as u8).collect();
        mem.write(4096, &pattern);
        let available = kfd.available_memory(g).expect("available");

        svm_set(&kfd, mem.addr, mem.len, &[preferred(g), access(g)]).expect("set");
        assert_eq!(
            drain(&mut smi),
            Vec::<String>::new(),
            "mapping emits nothing"
        );
        let page = view.svm_page(pid, mem.addr).expect("registered");
        assert_eq!((page.location, page.mapped_on), (0, vec![g]));

        svm_set(&kfd, mem.addr, mem.len, &[prefetch(g)]).expect("prefetch");
        let (p0, n) = (mem.pfn(0), mem.len / PAGE);
        assert_eq!(
            drain(&mut smi),
            [
                format!("5 T -{pid} @{p0:x}({n:x}) 0->{g:x} {g:x}:{g:x} 0"),
                format!("9 T -{pid} {g:x} 0"),
                format!("6 T -{pid} @{p0:x}({n:x}) 0->{g:x} 0 0"),
                format!("a T -{pid} {g:x} \0"),
            ]
        );
        let page = view.svm_page(pid, mem.page(1000)).expect("registered");
        assert_eq!(
            (page.location, page.mapped_on, page.writable_on),
            (g, vec![g], vec![g])
        );
        assert_eq!(view.svm_vram_usage(g), mem.len);
        assert_eq!(
            kfd.available_memory(g).expect("available"),
            available,
            "KFD reserves VRAM for SVM only while migrating"
        );
        let r = view.svm_ranges(pid);
        assert_eq!((r.len(), r[0].actual_loc, r[0].prefetch_loc), (1, g, g));

        // The bytes are where the CPU left them, seen from the GPU, and the other way round.
        let mut seen = vec![0u8; pattern.len()];
        view.gpu_read(pid, g, mem.addr + 4096, &mut seen)
            .expect("GPU read");
        assert_eq!(seen, pattern);
        view.gpu_write(pid, g, mem.addr + 3 * MIB, b"from the GPU")
            .expect("GPU write");
        let mut back = [0u8; 12];
        mem.read(3 * MIB, &mut back);
        assert_eq!(&back, b"from the GPU");
        assert_eq!(drain(&mut smi), Vec::<String>::new(), "mapped: no faults");

        svm_set(&kfd, mem.addr, mem.len, &[prefetch(0)]).expect("back to system memory");
        assert_eq!(
            drain(&mut smi),
            [
                format!("5 T -{pid} @{p0:x}({n:x}) {g:x}->0 0:{g:x} 0"),
                format!("9 T -{pid} {g:x} 0"),
                format!("6 T -{pid} @{p0:x}({n:x}) {g:x}->0 0 0"),
                format!("a T -{pid} {g:x} \0"),
            ]
        );
        assert_eq!(view.svm_vram_usage(g), 0);
        assert_eq!(view.svm_ranges(pid)[0].actual_loc, 0);
        // Prefetching where it already is does nothing.
        svm_set(&kfd, mem.addr, mem.len, &[prefetch(0)]).expect("again");
        assert_eq!(drain(&mut smi), Vec::<String>::new());
    })
    .expect("attach");
}

#[test]
fn record_timestamps_are_boottime_nanoseconds_in_order() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let mut smi = smi_all(&kfd, gpus[0]);
        let mem = Anon::new(2 * MIB);
        let before = boottime_ns();
        svm_set(&kfd, mem.addr, mem.len, &[access(gpus[0])]).expect("map");
        svm_set(&kfd, mem.addr, mem.len, &[prefetch(gpus[0])]).expect("prefetch");
        let after = boottime_ns();
        let lines = drain_raw(&mut smi);
        assert_eq!(lines.len(), 4);
        let stamps: Vec<i64> = lines.iter().map(|l| timestamp(l)).collect();
        assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{stamps:?}");
        assert!(before <= stamps[0] && stamps[3] <= after, "{stamps:?}");
    })
    .expect("attach");
}

#[test]
fn gpu_faults_migrate_blocks_toward_the_gpu_with_xnack_on() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        kfd.set_xnack_mode(true).expect("XNACK on");
        let mut smi = smi_all(&kfd, g);
        let pid = pid();
        // Never registered: the fault creates a range of the 2 MiB block around it.
        let mem = Anon::new(4 * MIB);
        mem.write(5 * PAGE, b"CPU data");
        let mut seen = [0u8; 8];
        view.gpu_read(pid, g, mem.page(5), &mut seen)
            .expect("the fault is handled");
        assert_eq!(&seen, b"CPU data");
        let (p0, p5) = (mem.pfn(0), mem.pfn(5));
        assert_eq!(
            drain(&mut smi),
            [
                format!("7 T -{pid} @{p5:x}({g:x}) R"),
                format!("5 T -{pid} @{p0:x}(200) 0->{g:x} {UNDEF:x}:{UNDEF:x} 1"),
                format!("6 T -{pid} @{p0:x}(200) 0->{g:x} 1 0"),
                format!("8 T -{pid} @{p5:x}({g:x}) M"),
            ]
        );
        view.gpu_read(pid, g, mem.page(6), &mut seen)
            .expect("mapped now");
        assert_eq!(drain(&mut smi), Vec::<String>::new());
        // A write in the second block.
        view.gpu_write(pid, g, mem.page(700), b"GPU data")
            .expect("write fault handled");
        let (p512, p700) = (mem.pfn(512), mem.pfn(700));
        assert_eq!(
            drain(&mut smi),
            [
                format!("7 T -{pid} @{p700:x}({g:x}) W"),
                format!("5 T -{pid} @{p512:x}(200) 0->{g:x} {UNDEF:x}:{UNDEF:x} 1"),
                format!("6 T -{pid} @{p512:x}(200) 0->{g:x} 1 0"),
                format!("8 T -{pid} @{p700:x}({g:x}) M"),
            ]
        );
        mem.read(700 * PAGE, &mut seen);
        assert_eq!(&seen, b"GPU data");
        let ranges = view.svm_ranges(pid);
        assert_eq!(ranges.len(), 2);
        assert!(
            ranges
                .iter()
                .all(|r| r.actual_loc == g && r.size == 2 * MIB)
        );

        // A registered range migrates in blocks of its granularity (16 pages here).
        let small = Anon::new(2 * MIB);
        svm_set(&kfd, small.addr, small.len, &[granularity(4)]).expect("set");
        view.gpu_read(pid, g, small.page(20), &mut seen)
            .expect("fault");
        let (b16, b20) = (small.pfn(16), small.pfn(20));
        assert_eq!(
            drain(&mut smi),
            [
                format!("7 T -{pid} @{b20:x}({g:x}) R"),
                format!("5 T -{pid} @{b16:x}(10) 0->{g:x} {UNDEF:x}:{UNDEF:x} 1"),
                format!("6 T -{pid} @{b16:x}(10) 0->{g:x} 1 0"),
                format!("8 T -{pid} @{b20:x}({g:x}) M"),
            ]
        );
        assert_eq!(
            view.svm_page(pid, small.page(31)).map(|p| p.location),
            Some(g)
        );
        assert_eq!(
            view.svm_page(pid, small.page(32)).map(|p| p.location),
            Some(0)
        );
        // The migration invalidated the mapped range: with XNACK on, it is unmapped from the
        // GPUs with access, which fault again.
        view.gpu_read(pid, g, small.page(40), &mut seen)
            .expect("fault");
        let (b32, b40) = (small.pfn(32), small.pfn(40));
        assert_eq!(
            drain(&mut smi),
            [
                format!("7 T -{pid} @{b40:x}({g:x}) R"),
                format!("5 T -{pid} @{b32:x}(10) 0->{g:x} {UNDEF:x}:{UNDEF:x} 1"),
                format!("b T -{pid} @{b32:x}(10) {g:x} 1"),
                format!("6 T -{pid} @{b32:x}(10) 0->{g:x} 1 0"),
                format!("8 T -{pid} @{b40:x}({g:x}) M"),
            ]
        );
        assert_eq!(
            view.svm_page(pid, small.page(20)).map(|p| p.mapped_on),
            Some(vec![g]),
            "other blocks keep their mapping"
        );
    })
    .expect("attach");
}

#[test]
fn access_in_place_maps_system_memory_without_migrating() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        kfd.set_xnack_mode(true).expect("XNACK on");
        let mut smi = smi_all(&kfd, g);
        let pid = pid();
        let mem = Anon::new(2 * MIB);
        svm_set(&kfd, mem.addr, mem.len, &[in_place(g)]).expect("set");
        let mut seen = [0u8; 4];
        view.gpu_read(pid, g, mem.page(3), &mut seen)
            .expect("fault");
        let p3 = mem.pfn(3);
        assert_eq!(
            drain(&mut smi),
            [
                format!("7 T -{pid} @{p3:x}({g:x}) R"),
                format!("8 T -{pid} @{p3:x}({g:x}) U"),
            ]
        );
        let page = view.svm_page(pid, mem.page(3)).expect("page");
        assert_eq!((page.location, page.mapped_on), (0, vec![g]));
        assert_eq!(page.writable_on, vec![g]);
        // An mprotect of its first pages (MMU notifier: `svm_range_evict`, XNACK on) unmaps
        // them from the GPU, which keeps no writable mapping of them; the rest stays.
        // SAFETY: the test's own mapping; nothing holds a reference into it.
        let r = unsafe {
            libc::mprotect(
                mem.addr as *mut libc::c_void,
                4 * PAGE as usize,
                libc::PROT_READ,
            )
        };
        assert_eq!(r, 0);
        let page = view.svm_page(pid, mem.page(3)).expect("page");
        assert_eq!((page.mapped_on, page.writable_on), (vec![], vec![]));
        let page = view.svm_page(pid, mem.page(10)).expect("page");
        assert_eq!((page.mapped_on, page.writable_on), (vec![g], vec![g]));
        let _ = drain(&mut smi);
        // A preferred location in system memory wins over ACCESS.
        let other = Anon::new(2 * MIB);
        svm_set(&kfd, other.addr, other.len, &[preferred(0), access(g)]).expect("set");
        view.gpu_read(pid, g, other.page(0), &mut seen)
            .expect("fault");
        let q0 = other.pfn(0);
        assert_eq!(
            drain(&mut smi),
            [
                format!("7 T -{pid} @{q0:x}({g:x}) R"),
                format!("8 T -{pid} @{q0:x}({g:x}) U"),
            ]
        );
    })
    .expect("attach");
}

#[test]
fn a_gpu_outside_the_hive_faults_the_pages_out_of_the_other_gpus_vram() {
    // mi210x8: GPUs 0-3 and 4-7 are two XGMI hives.
    let model = model("mi210x8");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, g) = open_all(&view);
        kfd.set_xnack_mode(true).expect("XNACK on");
        let (mut on0, mut on4) = (smi_all(&kfd, g[0]), smi_all(&kfd, g[4]));
        let pid = pid();
        let mem = Anon::new(2 * MIB);
        svm_set(&kfd, mem.addr, mem.len, &[prefetch(g[0])]).expect("prefetch");
        let p0 = mem.pfn(0);
        assert_eq!(
            drain(&mut on0),
            [
                format!(
                    "5 T -{pid} @{p0:x}(200) 0->{:x} {:x}:{UNDEF:x} 0",
                    g[0], g[0]
                ),
                format!("6 T -{pid} @{p0:x}(200) 0->{:x} 0 0", g[0]),
            ]
        );
        assert_eq!(drain(&mut on4), Vec::<String>::new(), "another GPU's node");
        // GPU 4 (ACCESS by default) faults: everything back to system memory (recorded on
        // GPU 0, where it was; the range, mapped on GPU 0, is unmapped from every GPU with
        // access), then its block to GPU 4.
        let mut seen = [0u8; 4];
        view.gpu_read(pid, g[4], mem.page(9), &mut seen)
            .expect("fault");
        let p9 = mem.pfn(9);
        assert_eq!(
            drain(&mut on0),
            [
                format!(
                    "5 T -{pid} @{p0:x}(200) {:x}->0 {:x}:{UNDEF:x} 1",
                    g[0], g[0]
                ),
                format!("b T -{pid} @{p0:x}(200) {:x} 1", g[0]),
                format!("6 T -{pid} @{p0:x}(200) {:x}->0 1 0", g[0]),
            ]
        );
        assert_eq!(
            drain(&mut on4),
            [
                format!("7 T -{pid} @{p9:x}({:x}) R", g[4]),
                format!("b T -{pid} @{p0:x}(200) {:x} 1", g[4]),
                format!(
                    "5 T -{pid} @{p0:x}(200) 0->{:x} {:x}:{UNDEF:x} 1",
                    g[4], g[0]
                ),
                format!("6 T -{pid} @{p0:x}(200) 0->{:x} 1 0", g[4]),
                format!("8 T -{pid} @{p9:x}({:x}) M", g[4]),
            ]
        );
        assert_eq!(view.svm_vram_usage(g[0]), 0);
        assert_eq!(view.svm_vram_usage(g[4]), 2 * MIB);
    })
    .expect("attach");
}

#[test]
fn munmap_removes_the_pages_from_the_ranges() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let mut smi = smi_all(&kfd, g);
        let pid = pid();
        let mem = Anon::new(2 * MIB);
        svm_set(&kfd, mem.addr, 8 * PAGE, &[access(g), granularity(2)]).expect("map");
        mem.unmap(2, 2);
        // The MMU notifier ran inside munmap: before any other call the record is readable
        // (UNMAP_FROM_GPU, trigger UNMAP_FROM_CPU, the two pages, the GPU) and the range is
        // split around the hole.
        let p2 = mem.pfn(2);
        assert_eq!(drain(&mut smi), [format!("b T -{pid} @{p2:x}(2) {g:x} 2")]);
        assert_eq!(view.svm_ranges(pid).len(), 2);
        let gran = svm_get_one(&kfd, mem.addr, 2 * PAGE, KFD_IOCTL_SVM_ATTR_GRANULARITY, 0);
        assert_eq!(gran.1, 2, "the rest keeps its attributes");
        let ranges: Vec<(u64, u64)> = view
            .svm_ranges(pid)
            .iter()
            .map(|r| ((r.start - mem.addr) / PAGE, r.size / PAGE))
            .collect();
        assert_eq!(ranges, [(0, 2), (4, 4)]);
        let mut q = [granularity(0)];
        assert_eq!(
            svm_get(&kfd, mem.page(2), 2 * PAGE, &mut q),
            Err(Errno::FAULT)
        );
        let mut seen = [0u8; 4];
        view.gpu_read(pid, g, mem.page(1), &mut seen)
            .expect("still mapped");
        let fault = view
            .gpu_read(pid, g, mem.page(2), &mut seen)
            .expect_err("gone from the GPU");
        assert_eq!(fault.reason, GpuFaultReason::NotMapped);
        // New memory at the same place is not the old range.
        // SAFETY: maps fresh anonymous memory over the hole this test made in its own mapping.
        unsafe {
            rustix::mm::mmap_anonymous(
                mem.page(2) as *mut _,
                (2 * PAGE) as usize,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::FIXED,
            )
        }
        .expect("mmap again");
        let gran = svm_get_one(
            &kfd,
            mem.page(2),
            2 * PAGE,
            KFD_IOCTL_SVM_ATTR_GRANULARITY,
            0,
        );
        assert_eq!(gran.1, 9, "the defaults");
        // Unmapping everything removes it all.
        mem.unmap(0, 8);
        let other = Anon::new(2 * MIB);
        svm_set(&kfd, other.addr, PAGE, &[]).expect("touch SVM");
        assert_eq!(view.svm_ranges(pid).len(), 1, "only the new one");
    })
    .expect("attach");
}

#[test]
fn shared_memory_is_not_migrated() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let mut smi = smi_all(&kfd, g);
        let pid = pid();
        let mem = Anon::shared(2 * MIB);
        mem.write(0, b"shared");
        svm_set(&kfd, mem.addr, mem.len, &[access(g), prefetch(g)]).expect("set");
        let p0 = mem.pfn(0);
        // migrate_vma_setup collects no page of a shared VMA: the records, and nothing moved.
        assert_eq!(
            drain(&mut smi),
            [
                format!("5 T -{pid} @{p0:x}(200) 0->{g:x} {g:x}:{UNDEF:x} 0"),
                format!("6 T -{pid} @{p0:x}(200) 0->{g:x} 0 0"),
            ]
        );
        let page = view.svm_page(pid, mem.addr).expect("page");
        assert_eq!((page.location, page.mapped_on), (0, vec![g]));
        assert_eq!(view.svm_vram_usage(g), 0);
        assert_eq!(view.svm_ranges(pid)[0].actual_loc, 0);
        let mut seen = [0u8; 6];
        view.gpu_read(pid, g, mem.addr, &mut seen)
            .expect("mapped in system memory");
        assert_eq!(&seen, b"shared");
    })
    .expect("attach");
}

#[test]
fn no_access_and_gpu_ro_are_enforced() {
    let model = model("mi210x8");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, g) = open_all(&view);
        let (mut on0, mut on1) = (smi_all(&kfd, g[0]), smi_all(&kfd, g[1]));
        let pid = pid();
        let (tid, comm) = this_thread();
        let vm_fault = format!("1 {tid:x}:{comm}");
        let mem = Anon::new(2 * MIB);
        let mut seen = [0u8; 4];
        // XNACK off: only the GPUs with access are mapped.
        svm_set(&kfd, mem.addr, mem.len, &[access(g[0]), no_access(g[1])]).expect("set");
        view.gpu_read(pid, g[0], mem.addr, &mut seen)
            .expect("GPU 0 has access");
        let fault = view
            .gpu_read(pid, g[1], mem.addr, &mut seen)
            .expect_err("GPU 1 has none");
        assert_eq!(fault.reason, GpuFaultReason::NotMapped);
        assert_eq!(drain(&mut on1), std::slice::from_ref(&vm_fault));
        assert_eq!(drain(&mut on0), Vec::<String>::new());
        // GPU_RO: the PTEs lose their write bit.
        svm_set(
            &kfd,
            mem.addr,
            mem.len,
            &[set_flags(KFD_IOCTL_SVM_FLAG_GPU_RO)],
        )
        .expect("set");
        let fault = view
            .gpu_write(pid, g[0], mem.addr, b"x")
            .expect_err("read-only");
        assert_eq!(fault.reason, GpuFaultReason::ReadOnly);
        assert_eq!(drain(&mut on0), std::slice::from_ref(&vm_fault));
        view.gpu_read(pid, g[0], mem.addr, &mut seen)
            .expect("reads still work");

        // XNACK on: the fault of a GPU without access cannot be handled.
        kfd.set_xnack_mode(true).expect("XNACK on");
        let other = Anon::new(2 * MIB);
        svm_set(&kfd, other.addr, other.len, &[no_access(g[1])]).expect("set");
        let fault = view
            .gpu_read(pid, g[1], other.addr, &mut seen)
            .expect_err("no access");
        assert_eq!(fault.reason, GpuFaultReason::NoAccess);
        assert_eq!(drain(&mut on1), std::slice::from_ref(&vm_fault));
        // GPU_RO with XNACK on: the fault maps the page read-only, and the write faults.
        svm_set(
            &kfd,
            other.addr,
            other.len,
            &[set_flags(KFD_IOCTL_SVM_FLAG_GPU_RO)],
        )
        .expect("set");
        let fault = view
            .gpu_write(pid, g[0], other.addr, b"x")
            .expect_err("read-only");
        assert_eq!(fault.reason, GpuFaultReason::ReadOnly);
        let lines = drain(&mut on0);
        assert_eq!(lines.last(), Some(&vm_fault), "{lines:?}");
        assert!(
            lines[0].starts_with("7 T ") && lines[0].ends_with(" W"),
            "{lines:?}"
        );
    })
    .expect("attach");
}

/// A prefetch past the KFD VRAM limit: the migration's reservation fails (`ENOSPC` in
/// `svm_migrate_ram_to_vram`), which `svm_range_trigger_migration` drops (upstream
/// 1e214f7faaf5): the call succeeds and the range stays in system memory.
#[test]
fn prefetch_needs_room_under_the_kfd_vram_limit() {
    let model = model("radeon-vii");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let mem = Anon::new(2 * MIB);
        let available = kfd.available_memory(g).expect("available");
        let hog = kfd
            .alloc_memory_of_gpu(g, 0x6000_0000_0000, available, VRAM_RW)
            .expect("all the VRAM KFD has");
        assert_eq!(svm_set(&kfd, mem.addr, mem.len, &[prefetch(g)]), Ok(()));
        assert_eq!(view.svm_vram_usage(g), 0);
        assert!(
            view.svm_ranges(pid())
                .iter()
                .all(|r| r.actual_loc == 0 && r.prefetch_loc == g),
            "in system memory, the prefetch location kept"
        );
        kfd.free_memory_of_gpu(hog).expect("free");
        assert_eq!(svm_set(&kfd, mem.addr, mem.len, &[prefetch(g)]), Ok(()));
        assert_eq!(view.svm_vram_usage(g), 2 * MIB);
        assert_eq!(kfd.available_memory(g).expect("available"), available);
    })
    .expect("attach");
}

#[test]
fn always_mapped_ranges_evict_queues_even_with_xnack_on() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        kfd.set_xnack_mode(true).expect("XNACK on");
        let mut smi = smi_all(&kfd, g);
        let pid = pid();
        let mem = Anon::new(2 * MIB);
        svm_set(
            &kfd,
            mem.addr,
            mem.len,
            &[set_flags(KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED)],
        )
        .expect("mapped on every GPU with access");
        assert_eq!(
            view.svm_page(pid, mem.addr).map(|p| p.mapped_on),
            Some(vec![g])
        );
        svm_set(&kfd, mem.addr, mem.len, &[prefetch(g)]).expect("prefetch");
        let p0 = mem.pfn(0);
        assert_eq!(
            drain(&mut smi),
            [
                format!("5 T -{pid} @{p0:x}(200) 0->{g:x} {g:x}:{UNDEF:x} 0"),
                format!("9 T -{pid} {g:x} 0"),
                format!("6 T -{pid} @{p0:x}(200) 0->{g:x} 0 0"),
                format!("a T -{pid} {g:x} \0"),
            ]
        );
    })
    .expect("attach");
}

#[test]
fn memory_mapped_again_in_place_of_a_range_is_new_memory() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let mut smi = smi_all(&kfd, g);
        let pid = pid();
        let mem = Anon::new(2 * MIB);
        let len = mem.len;
        svm_set(&kfd, mem.addr, len, &[access(g), granularity(3)]).expect("map");
        let keep = Anon::new(2 * MIB);
        svm_set(&kfd, keep.addr, len, &[granularity(5)]).expect("another range");
        keep.write(0, b"still here");
        // The program frees the memory and maps new memory at the same place before its
        // next SVM call: the maps look as before, but the munmap was seen and removed the
        // range.
        mem.unmap(0, len / PAGE);
        let remap = |prot| {
            // SAFETY: maps fresh memory over the address range this test just unmapped;
            // FIXED_NOREPLACE refuses to replace anything that took its place meanwhile.
            unsafe {
                rustix::mm::mmap_anonymous(
                    mem.addr as *mut _,
                    len as usize,
                    prot,
                    rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::FIXED_NOREPLACE,
                )
            }
            .expect("map again");
            mem.mapped_again(0, len / PAGE);
        };
        remap(rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE);
        let gran = svm_get_one(&kfd, mem.addr, len, KFD_IOCTL_SVM_ATTR_GRANULARITY, 0);
        assert_eq!(gran.1, 9, "the defaults: the old range is gone");
        let p0 = mem.pfn(0);
        assert_eq!(
            drain(&mut smi),
            [format!("b T -{pid} @{p0:x}(200) {g:x} 2")]
        );
        let gran = svm_get_one(&kfd, keep.addr, len, KFD_IOCTL_SVM_ATTR_GRANULARITY, 0);
        assert_eq!(
            gran.1, 5,
            "a range whose memory stayed keeps its attributes"
        );
        // Again, with the address only reserved (PROT_NONE), as libhsakmt reserves VA for
        // its next allocation.
        svm_set(&kfd, mem.addr, len, &[granularity(4)]).expect("register the new memory");
        mem.unmap(0, len / PAGE);
        remap(rustix::mm::ProtFlags::empty());
        let bo = kfd
            .alloc_memory_of_gpu(g, mem.addr, len, VRAM_RW)
            .expect("ALLOC at the reserved address: the range is gone");
        drop(bo);
        assert_eq!(view.svm_ranges(pid).len(), 1, "only `keep`'s");
    })
    .expect("attach");
}

#[test]
fn a_fault_migrates_toward_the_preferred_gpu_of_its_hive() {
    let model = model("mi210x8");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, g) = open_all(&view);
        kfd.set_xnack_mode(true).expect("XNACK on");
        let (mut on0, mut on1) = (smi_all(&kfd, g[0]), smi_all(&kfd, g[1]));
        let pid = pid();
        let mem = Anon::new(2 * MIB);
        mem.write(0, b"data");
        svm_set(&kfd, mem.addr, mem.len, &[preferred(g[1])]).expect("set");
        // GPU 0 faults; GPU 1, preferred and in its hive, gets the pages; GPU 0 maps them
        // there, over XGMI.
        let mut seen = [0u8; 4];
        view.gpu_read(pid, g[0], mem.addr, &mut seen)
            .expect("fault");
        assert_eq!(&seen, b"data");
        let p0 = mem.pfn(0);
        let (g0, g1) = (g[0], g[1]);
        assert_eq!(
            drain(&mut on0),
            [
                format!("7 T -{pid} @{p0:x}({g0:x}) R"),
                format!("8 T -{pid} @{p0:x}({g0:x}) M"),
            ]
        );
        assert_eq!(
            drain(&mut on1),
            [
                format!("5 T -{pid} @{p0:x}(200) 0->{g1:x} {UNDEF:x}:{g1:x} 1"),
                format!("6 T -{pid} @{p0:x}(200) 0->{g1:x} 1 0"),
            ]
        );
        let page = view.svm_page(pid, mem.addr).expect("page");
        assert_eq!((page.location, page.mapped_on), (g1, vec![g0]));
    })
    .expect("attach");
}

/// Retry-fault filtering (`svm_range_restore_pages`: a fault on a range validated less than
/// `AMDGPU_SVM_RANGE_RETRY_FAULT_PENDING`, 2 ms, earlier is dropped and the GPU retries; the
/// retries of the same address are dropped by `amdgpu_gmc_filter_faults`), under the model
/// clock: after a fault maps one 2 MiB granule of a 4 MiB range, a fault on the other granule
/// at once makes no records until the window has passed, then one PAGE_FAULT_START stamped
/// exactly 2 ms after the validation (the first fault's PAGE_FAULT_END) with its migration;
/// a fault on another range is handled at once; the granule mapped first stays mapped. A
/// fault's migration lasts what its granule's pages cost.
#[test]
fn a_fault_on_a_range_validated_within_2_ms_is_handled_when_the_window_ends() {
    use kfd_emu::machine::Machine;
    use kfd_emu::model::{ClockMode, Costs, Model, ModelConfig, Timing};
    const WINDOW: i64 = 2_000_000;
    let machine = Machine::preset("mi300x").expect("preset");
    let costs = Costs::new(&machine, Timing::default());
    let model = Model::new(ModelConfig {
        machine,
        clock: ClockMode::Model,
        ..ModelConfig::default()
    })
    .expect("model");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        kfd.set_xnack_mode(true).expect("XNACK on");
        let mut smi = smi_all(&kfd, g);
        let pid = pid();
        let mem = Anon::new(10 * MIB);
        let start = mem.addr.next_multiple_of(2 * MIB);
        let first = (start - mem.addr) / PAGE;
        svm_set(&kfd, start, 4 * MIB, &[access(g)]).expect("set");
        let other = start + 4 * MIB;
        svm_set(&kfd, other, 2 * MIB, &[access(g)]).expect("set");
        let mut seen = [0u8; 4];
        view.gpu_read(pid, g, mem.page(first + 5), &mut seen)
            .expect("first fault");
        let one = drain_raw(&mut smi);
        assert_eq!(one.len(), 4, "{one:?}");
        // The migration lasts what its 2 MiB granule costs, not the range's 4 MiB.
        assert_eq!(
            timestamp(&one[2]) - timestamp(&one[1]),
            costs.migration_ns(0, 2 * MIB) as i64,
            "{one:?}"
        );
        let validated = timestamp(&one[3]);
        // The other granule of the same range, at once.
        view.gpu_read(pid, g, mem.page(first + 600), &mut seen)
            .expect("second fault");
        let two = drain_raw(&mut smi);
        let (b512, p600) = (mem.pfn(first + 512), mem.pfn(first + 600));
        assert_eq!(
            two.iter().map(|r| shape(r)).collect::<Vec<_>>(),
            [
                format!("7 T -{pid} @{p600:x}({g:x}) R"),
                format!("5 T -{pid} @{b512:x}(200) 0->{g:x} {UNDEF:x}:{UNDEF:x} 1"),
                format!("b T -{pid} @{b512:x}(200) {g:x} 1"),
                format!("6 T -{pid} @{b512:x}(200) 0->{g:x} 1 0"),
                format!("8 T -{pid} @{p600:x}({g:x}) M"),
            ],
            "one fault handled, none for the dropped tries"
        );
        assert_eq!(timestamp(&two[0]) - validated, WINDOW, "{one:?} {two:?}");
        // Another range: no window.
        let end_two = timestamp(&two[4]);
        let p = (other - mem.addr) / PAGE;
        view.gpu_read(pid, g, mem.page(p + 1), &mut seen)
            .expect("third fault");
        let three = drain_raw(&mut smi);
        assert_eq!(three.len(), 4, "{three:?}");
        assert_eq!(timestamp(&three[0]), end_two, "{two:?} {three:?}");
        // The first granule stays mapped: no fault, no record.
        view.gpu_write(pid, g, mem.page(first + 5), b"GPU!")
            .expect("mapped: no fault");
        assert_eq!(drain_raw(&mut smi), Vec::<String>::new());
    })
    .expect("attach");
}

/// The CPU fault path (`svm_migrate_to_ram`, as `Model::cpu_access` replays it) on a 4 MiB
/// range prefetched to the GPU: an access in either 2 MiB granule migrates exactly that
/// granule back (trigger PAGEFAULT_CPU) — the first, a block ending before the range does,
/// and the second, one starting after the range does — with its unmap from the GPU, the
/// range keeping its BO until its last VRAM page leaves; under the model clock each
/// migration lasts what its granule's pages cost.
#[test]
fn a_cpu_access_migrates_its_granule_back_in_what_its_pages_cost() {
    use kfd_emu::machine::Machine;
    use kfd_emu::model::{ClockMode, Costs, Model, ModelConfig, Timing};
    let machine = Machine::preset("mi300x").expect("preset");
    let cost = Costs::new(&machine, Timing::default()).migration_ns(0, 2 * MIB) as i64;
    let model = Model::new(ModelConfig {
        machine,
        clock: ClockMode::Model,
        ..ModelConfig::default()
    })
    .expect("model");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        kfd.set_xnack_mode(true).expect("XNACK on");
        let mut smi = smi_all(&kfd, g);
        let pid = pid();
        let mem = Anon::new(6 * MIB);
        let start = mem.addr.next_multiple_of(2 * MIB);
        svm_set(&kfd, start, 4 * MIB, &[access(g), prefetch(g)]).expect("prefetch");
        let _ = drain(&mut smi);
        for (at, granule) in [
            (start + 3 * PAGE, start),
            (start + 2 * MIB + 7 * PAGE, start + 2 * MIB),
        ] {
            view.cpu_access(pid, at);
            let records = drain_raw(&mut smi);
            let p = granule / PAGE;
            // Each granule unmapped from the GPU in turn: the range stays mapped after the
            // first (only a whole-range unmap clears `mapped_to_gpu`).
            assert_eq!(
                records.iter().map(|r| shape(r)).collect::<Vec<_>>(),
                [
                    format!("5 T -{pid} @{p:x}(200) {g:x}->0 {g:x}:{UNDEF:x} 2"),
                    format!("b T -{pid} @{p:x}(200) {g:x} 1"),
                    format!("6 T -{pid} @{p:x}(200) {g:x}->0 2 0"),
                ]
            );
            assert_eq!(
                timestamp(&records[2]) - timestamp(&records[0]),
                cost,
                "{records:?}"
            );
            let page = view.svm_page(pid, at).expect("an SVM page");
            assert_eq!(page.location, 0);
            assert_eq!(
                (page.mapped_on, page.writable_on),
                (vec![], vec![]),
                "unmapped, and so no longer writable, on the GPU"
            );
        }
    })
    .expect("attach");
}

/// Which GPUs `svm_range_validate_and_map` maps a range on, on mi210x8 (hives 0–3, 4–7):
/// - XNACK on, prefetched to GPU 1: mapped there (the GPU holding it, with ACCESS), and only
///   there; prefetched to GPU 2 with NO_ACCESS for it: mapped nowhere;
/// - in GPU 0's VRAM with ACCESS for every GPU (a range made with XNACK on starts so,
///   `svm_range_new`), remapped with XNACK off by the restore worker after an mprotect: on
///   GPUs 0–3 only, as VRAM of one GPU is mapped only in its hive (`svm_range_map_to_gpus`);
/// - XNACK off, a range whose last pages are PROT_NONE: SET_ATTR succeeds and maps the
///   readable pages, the others skipped (`hmm_range_fault` cannot read them).
#[test]
fn validate_and_map_maps_the_gpus_the_kernel_does() {
    let model = model("mi210x8");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, g) = open_all(&view);
        let pid = pid();
        kfd.set_xnack_mode(true).expect("XNACK on");
        let a = Anon::new(2 * MIB);
        svm_set(&kfd, a.addr, a.len, &[prefetch(g[1])]).expect("prefetch to 1");
        let page = view.svm_page(pid, a.page(5)).expect("page");
        assert_eq!((page.location, page.mapped_on), (g[1], vec![g[1]]));
        let b = Anon::new(2 * MIB);
        svm_set(&kfd, b.addr, b.len, &[no_access(g[2]), prefetch(g[2])]).expect("prefetch");
        let page = view.svm_page(pid, b.page(5)).expect("page");
        assert_eq!((page.location, page.mapped_on), (g[2], vec![]));

        // In GPU 0's VRAM with ACCESS for GPU 4 too (XNACK on: the prefetch minds only
        // ACCESS_IN_PLACE), then XNACK off and an mprotect: the restore worker maps it again,
        // on GPU 0 only.
        let c = Anon::new(2 * MIB);
        svm_set(
            &kfd,
            c.addr,
            c.len,
            &[access(g[0]), access(g[4]), prefetch(g[0])],
        )
        .expect("prefetch to 0");
        kfd.set_xnack_mode(false).expect("XNACK off");
        let mut smi = smi_all(&kfd, g[0]);
        // SAFETY: the test's own mapping; nothing holds a reference into it.
        let r =
            unsafe { libc::mprotect(c.addr as *mut libc::c_void, c.len as usize, libc::PROT_READ) };
        assert_eq!(r, 0);
        // The mprotect evicts the process's queues (XNACK off); the restore worker maps the
        // range again for every GPU with ACCESS (all of them: a range made with XNACK on
        // starts with every GPU's, `svm_range_new`) and then restores them (`QUEUE_RESTORE`):
        // on GPUs 0–3 only, the hive of the GPU whose VRAM holds it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut records = Vec::new();
        while !records.iter().any(|r: &String| r.starts_with("a "))
            && std::time::Instant::now() < deadline
        {
            records.extend(drain(&mut smi));
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(
            records.iter().any(|r| r.starts_with("a ")),
            "restored: {records:?}"
        );
        let page = view.svm_page(pid, c.page(5)).expect("page");
        assert_eq!((page.location, page.mapped_on), (g[0], g[..4].to_vec()));

        let d = Anon::new(2 * MIB);
        // SAFETY: the test's own mapping; nothing holds a reference into it.
        let r = unsafe {
            libc::mprotect(
                (d.addr + d.len - 4 * PAGE) as *mut libc::c_void,
                4 * PAGE as usize,
                libc::PROT_NONE,
            )
        };
        assert_eq!(r, 0);
        assert_eq!(svm_set(&kfd, d.addr, d.len, &[access(g[0])]), Ok(()));
        let first = view.svm_page(pid, d.page(0)).expect("page");
        assert_eq!(first.mapped_on, vec![g[0]]);
        let last = view.svm_page(pid, d.page(d.len / PAGE - 1)).expect("page");
        assert_eq!(last.mapped_on, Vec::<u32>::new());
    })
    .expect("attach");
}
