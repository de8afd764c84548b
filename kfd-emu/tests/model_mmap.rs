//! `mmap` of the stand-ins at the kernel's offsets: the offsets the ioctls return (the
//! `KFD_MMAP_*` formulas of `kfd_priv.h`, DRM vma-manager offsets from 4 GiB), what
//! `Backend::mmap` answers for them (`kfd_mmap`, `drm_gem_mmap`, `dma_buf_mmap`), and that no
//! process reaches another's memory through its stand-ins.

mod fork_support;
mod model_support;

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use fork_support::wait_pid;
use kfd_emu::backend::{Backend, MmapAction};
use kfd_ioctl::abi::*;
use model_support::*;
use rustix::io::Errno;

const PAGE: u64 = 4096;
const MIB: u64 = 1 << 20;
/// `DRM_FILE_PAGE_OFFSET_START << PAGE_SHIFT` (`include/drm/drm_vma_manager.h`).
const DRM_OFFSET_START: u64 = 1 << 32;

/// `KFD_MMAP_TYPE_*` and `KFD_MMAP_GPU_ID` (`drivers/gpu/drm/amd/amdkfd/kfd_priv.h`), written
/// out here from the kernel, independently of the model's own constants.
const TYPE_DOORBELL: u64 = 0x3 << 62;
const TYPE_EVENTS: u64 = 0x2 << 62;
const TYPE_RESERVED_MEM: u64 = 0x1 << 62;
const TYPE_MMIO: u64 = 0;
fn kfd_gpu_id(gpu_id: u32) -> u64 {
    (u64::from(gpu_id) << 46) & (0xFFFF << 46)
}

/// The errno of an action that must fail.
fn errno(action: MmapAction) -> Errno {
    match action {
        MmapAction::Fail(e) => e,
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// Whether an action redirects.
fn redirects(action: &MmapAction) -> bool {
    matches!(action, MmapAction::Redirect { .. })
}

fn create_event(emu: &Emu, kind: u32) -> kfd_ioctl_create_event_args {
    let mut a = kfd_ioctl_create_event_args {
        event_type: kind,
        auto_reset: 1,
        ..Default::default()
    };
    emu.ioctl(AMDKFD_IOC_CREATE_EVENT, &mut a).expect("create");
    a
}

fn export(emu: &Emu, handle: u64) -> OwnedFd {
    let mut a = kfd_ioctl_export_dmabuf_args {
        handle,
        flags: libc::O_CLOEXEC as u32,
        dmabuf_fd: 0,
    };
    emu.ioctl(AMDKFD_IOC_EXPORT_DMABUF, &mut a).expect("export");
    own_fd(a.dmabuf_fd)
}

fn import(emu: &Emu, gpu: u32, va: u64, dmabuf: &OwnedFd) -> u64 {
    let mut a = kfd_ioctl_import_dmabuf_args {
        va_addr: va,
        handle: 0,
        gpu_id: gpu,
        dmabuf_fd: dmabuf.as_raw_fd() as u32,
    };
    emu.ioctl(AMDKFD_IOC_IMPORT_DMABUF, &mut a).expect("import");
    a.handle
}

/// `pread` of `len` bytes at `offset`: how many bytes the file gave.
fn pread_len(fd: &impl AsFd, offset: u64, len: usize) -> usize {
    let mut buf = vec![0u8; len];
    rustix::io::pread(fd, &mut buf, offset).expect("pread")
}

#[test]
fn kfd_offsets_are_the_kernel_formulas() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let flags = KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let (_, mmio) = emu.alloc(gpu, va(1), PAGE, flags).expect("mmio");
    assert_eq!(
        mmio,
        TYPE_MMIO | kfd_gpu_id(gpu),
        "kfd_ioctl_alloc_memory_of_gpu"
    );
    assert!(mmio > DRM_OFFSET_START, "a 64-bit offset: {mmio:#x}");
    let s1 = create_event(&emu, KFD_IOC_EVENT_SIGNAL);
    let s2 = create_event(&emu, KFD_IOC_EVENT_SIGNAL);
    let other = create_event(&emu, KFD_IOC_EVENT_MEMORY);
    assert_eq!(s1.event_page_offset, TYPE_EVENTS, "kfd_event_create");
    assert_eq!(s2.event_page_offset, TYPE_EVENTS, "every signal event");
    assert_eq!(other.event_page_offset, 0);

    // Each offset maps what the kernel maps there.
    let kfd = emu.kfd.as_fd();
    let mut page = emu
        .cpu_map(kfd, s1.event_page_offset, 32 * 1024)
        .expect("the event page");
    let slot = |n: usize, p: &mut CpuMap| p.bytes()[n * 8..n * 8 + 8].to_vec();
    assert_eq!(slot(1, &mut page), [0xFF; 8], "slot 1 unsignaled");
    assert!(redirects(&emu.mmap_action(kfd, mmio, PAGE)));
    let doorbells = emu.mmap_action(kfd, TYPE_DOORBELL | kfd_gpu_id(gpu), 8192);
    assert!(redirects(&doorbells), "{doorbells:?}");
    let cwsr = emu.mmap_action(kfd, TYPE_RESERVED_MEM | kfd_gpu_id(gpu), 2 * PAGE);
    assert!(redirects(&cwsr), "{cwsr:?}");
    // The doorbell slice, the MMIO page and the event page are distinct memory.
    let mut db = emu
        .cpu_map(kfd, TYPE_DOORBELL | kfd_gpu_id(gpu), 8192)
        .expect("doorbells");
    let mut regs = emu.cpu_map(kfd, mmio, PAGE as usize).expect("mmio");
    db.bytes()[8..16].copy_from_slice(&7u64.to_ne_bytes());
    regs.bytes()[8..16].copy_from_slice(&9u64.to_ne_bytes());
    assert_eq!(slot(1, &mut page), [0xFF; 8]);
    assert_eq!(db.bytes()[8..16], 7u64.to_ne_bytes());
}

#[test]
fn kfd_mmap_errnos_follow_kfd_mmap() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let kfd = emu.kfd.as_fd();
    let bad_gpu = kfd_gpu_id(gpu ^ 0x5A5A);
    // No signal page yet (kfd_event_mmap).
    assert_eq!(errno(emu.mmap_action(kfd, TYPE_EVENTS, PAGE)), Errno::INVAL);
    create_event(&emu, KFD_IOC_EVENT_SIGNAL);
    for (what, offset, len, want) in [
        (
            "doorbell, unknown gpu_id",
            TYPE_DOORBELL | bad_gpu,
            8192,
            Errno::NODEV,
        ),
        ("doorbell, gpu_id 0", TYPE_DOORBELL, 8192, Errno::NODEV),
        (
            "doorbell, one page",
            TYPE_DOORBELL | kfd_gpu_id(gpu),
            PAGE,
            Errno::INVAL,
        ),
        (
            "doorbell, 3 pages",
            TYPE_DOORBELL | kfd_gpu_id(gpu),
            3 * PAGE,
            Errno::INVAL,
        ),
        (
            "mmio, unknown gpu_id",
            TYPE_MMIO | bad_gpu,
            PAGE,
            Errno::NODEV,
        ),
        ("mmio, gpu_id 0", 0x1000, PAGE, Errno::NODEV),
        ("mmio, two pages", kfd_gpu_id(gpu), 2 * PAGE, Errno::INVAL),
        (
            "reserved, unknown gpu_id",
            TYPE_RESERVED_MEM | bad_gpu,
            2 * PAGE,
            Errno::NODEV,
        ),
        (
            "reserved, one page",
            TYPE_RESERVED_MEM | kfd_gpu_id(gpu),
            PAGE,
            Errno::INVAL,
        ),
        (
            "events, past the page",
            TYPE_EVENTS,
            64 * 1024,
            Errno::INVAL,
        ),
        ("not page aligned", TYPE_EVENTS | 8, PAGE, Errno::INVAL),
        ("no length", TYPE_EVENTS, 0, Errno::INVAL),
    ] {
        assert_eq!(errno(emu.mmap_action(kfd, offset, len)), want, "{what}");
    }
    // Any size up to the page (get_order(32 KiB)), at the page start.
    assert!(redirects(&emu.mmap_action(kfd, TYPE_EVENTS, PAGE)));
    assert!(redirects(&emu.mmap_action(kfd, TYPE_EVENTS, 20 * 1024)));
    // Another process (a forked child with the fd): not its /dev/kfd.
    let child = TestCaller::other();
    assert_eq!(
        errno(emu.mmap_action_as(&child, kfd, TYPE_EVENTS, PAGE)),
        Errno::BADF
    );
    // Once the process is gone, its stand-in maps nothing.
    emu.model.process_exited(emu.caller.tgid);
    assert_eq!(errno(emu.mmap_action(kfd, TYPE_EVENTS, PAGE)), Errno::BADF);
}

#[test]
fn bo_offsets_come_from_a_vma_manager_from_4_gib() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let gtt = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let host = vec![0u8; 3 * PAGE as usize];
    let host_page = (host.as_ptr() as u64).next_multiple_of(PAGE);
    let userptr = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let doorbell = KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let bos = [
        emu.alloc(gpu, va(1), PAGE, VRAM_RW).expect("vram"),
        emu.alloc(gpu, va(2), 3 * PAGE, gtt).expect("gtt"),
        emu.alloc(gpu, va(3), 2 * MIB, VRAM_RW).expect("2 MiB"),
        emu.alloc_at(gpu, va(4), PAGE, userptr, host_page)
            .expect("userptr"),
        emu.alloc(gpu, va(5), 8192, doorbell).expect("doorbell"),
    ];
    let sizes = [PAGE, 3 * PAGE, 2 * MIB, PAGE, 8192];
    for (i, &(_, offset)) in bos.iter().enumerate() {
        assert!(offset >= DRM_OFFSET_START, "bo {i}: {offset:#x}");
        assert_eq!(offset % PAGE, 0, "bo {i}: {offset:#x}");
        for (j, &(_, other)) in bos.iter().enumerate().skip(i + 1) {
            let disjoint = offset + sizes[i] <= other || other + sizes[j] <= offset;
            assert!(disjoint, "bo {i} and {j} overlap: {offset:#x} {other:#x}");
        }
    }
    // The USERPTR's address went in, a vma offset came out (amdgpu_bo_mmap_offset).
    assert_ne!(bos[3].1, host_page);
    // A freed node is reused by the next object that fits it best (drm_mm, INSERT_BEST).
    emu.free(bos[1].0).expect("free");
    let (_, again) = emu.alloc(gpu, va(6), 3 * PAGE, gtt).expect("gtt again");
    assert_eq!(again, bos[1].1);
}

#[test]
fn render_mmap_errnos_follow_drm_gem_mmap() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let render = emu.renders[0].as_fd();
    let (_, a) = emu.alloc(gpu, va(1), 2 * PAGE, VRAM_RW).expect("a");
    let (_, b) = emu.alloc(gpu, va(2), 2 * PAGE, VRAM_RW).expect("b");
    assert_eq!(b, a + 2 * PAGE, "packed after each other");
    let hidden = VRAM_RW & !KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
    let (_, private) = emu.alloc(gpu, va(3), PAGE, hidden).expect("private");
    let host = vec![0u8; 2 * PAGE as usize];
    let host_page = (host.as_ptr() as u64).next_multiple_of(PAGE);
    let userptr = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let (_, user) = emu
        .alloc_at(gpu, va(4), PAGE, userptr, host_page)
        .expect("userptr");
    // Inside one object, from its start or not: allowed.
    assert!(redirects(&emu.mmap_action(render, a, 2 * PAGE)));
    assert!(redirects(&emu.mmap_action(render, a + PAGE, PAGE)));
    // VRAM without PUBLIC too: amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu sets no
    // AMDGPU_GEM_CREATE_NO_CPU_ACCESS (`PUBLIC ? CPU_ACCESS_REQUIRED : 0`), so
    // amdgpu_gem_object_mmap lets it through.
    assert!(redirects(&emu.mmap_action(render, private, PAGE)));
    for (what, offset, len, want) in [
        ("the small offset of old", 0x20_0000, PAGE, Errno::INVAL),
        ("no object there", b + 100 * MIB, PAGE, Errno::INVAL),
        ("past the end of a", a + PAGE, 2 * PAGE, Errno::INVAL),
        ("across a and b", a, 4 * PAGE, Errno::INVAL),
        ("a userptr BO", user, PAGE, Errno::PERM),
    ] {
        assert_eq!(errno(emu.mmap_action(render, offset, len)), want, "{what}");
    }
    // Another open of the render node that is no process's VM: the objects are not its.
    let second = emu.open_render(0);
    assert_eq!(
        errno(emu.mmap_action(second.as_fd(), a, PAGE)),
        Errno::ACCESS
    );
    assert_eq!(pread_len(&second, 0, 16), 0, "an empty file");
}

/// A real second process (a forked child that holds the render fd the parent opened for it,
/// so that ACQUIRE_VM finds it there), driven through the same model.
struct OtherProcess {
    emu: Emu,
    release: OwnedFd,
    pid: i32,
}

impl OtherProcess {
    fn start(first: &Emu) -> OtherProcess {
        let render = first.open_render(0);
        let (pid, release) = fork_support::fork_idle();
        let caller = TestCaller {
            tid: pid,
            tgid: pid,
        };
        let kfd = injected(first.model.open(&caller, "/dev/kfd", libc::O_RDWR, 0));
        let mut emu = Emu {
            model: first.model.clone(),
            caller,
            kfd,
            renders: Vec::new(),
        };
        let mut a = kfd_ioctl_acquire_vm_args {
            drm_fd: render.as_raw_fd() as u32,
            gpu_id: emu.gpu(),
        };
        emu.ioctl(AMDKFD_IOC_ACQUIRE_VM, &mut a)
            .expect("acquire_vm");
        emu.renders.push(render);
        OtherProcess { emu, release, pid }
    }
}

impl Drop for OtherProcess {
    fn drop(&mut self) {
        let _ = rustix::io::write(&self.release, &[1]);
        wait_pid(self.pid);
    }
}

#[test]
fn a_process_reaches_only_its_own_objects() {
    let mut a = Emu::machine("mi300x");
    a.acquire_all();
    let b = OtherProcess::start(&a);
    let gpu = a.gpu();
    let (_, mine) = a.alloc(gpu, va(1), 2 * PAGE, VRAM_RW).expect("a's bo");
    let (_, theirs) = b.emu.alloc(gpu, va(1), 2 * PAGE, VRAM_RW).expect("b's bo");
    let secret = b"b's secret";
    let mut map = b
        .emu
        .cpu_map(b.emu.renders[0].as_fd(), theirs, 2 * PAGE as usize)
        .expect("b maps its BO");
    map.bytes()[..secret.len()].copy_from_slice(secret);
    map.bytes()[PAGE as usize..][..secret.len()].copy_from_slice(secret);

    // A's render file: nothing to read anywhere, and B's offset is not A's to map.
    let render = a.renders[0].as_fd();
    for offset in [0, PAGE, theirs, theirs + PAGE, mine] {
        assert_eq!(pread_len(&render, offset, 64), 0, "pread at {offset:#x}");
    }
    assert_eq!(errno(a.mmap_action(render, theirs, PAGE)), Errno::ACCESS);
    // And the other way round.
    let b_render = b.emu.renders[0].as_fd();
    assert_eq!(
        errno(b.emu.mmap_action(b_render, mine, PAGE)),
        Errno::ACCESS
    );
    // B's own mapping still shows the bytes it wrote.
    let mut again = b
        .emu
        .cpu_map(b_render, theirs + PAGE, PAGE as usize)
        .expect("map");
    assert_eq!(&again.bytes()[..secret.len()], secret);

    // When B is gone, its objects go: its old offset is no object's, even through its file.
    b.emu.model.process_exited(b.pid);
    assert_eq!(errno(a.mmap_action(render, theirs, PAGE)), Errno::INVAL);
    assert_eq!(
        errno(b.emu.mmap_action(b_render, theirs, PAGE)),
        Errno::INVAL
    );
    assert_eq!(
        errno(b.emu.mmap_action(b_render, mine, PAGE)),
        Errno::ACCESS
    );
}

#[test]
fn a_forked_child_maps_through_its_parents_render_file() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let (_, offset) = emu.alloc(gpu, va(1), PAGE, VRAM_RW).expect("alloc");
    let child = TestCaller::other();
    let render = emu.renders[0].as_fd();
    // The allow list belongs to the DRM file, whoever maps it.
    assert!(redirects(&emu.mmap_action_as(&child, render, offset, PAGE)));
}

#[test]
fn a_dma_buf_maps_the_bos_bytes_until_the_last_reference() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let render = emu.renders[0].as_fd();
    let (h, offset) = emu.alloc(gpu, va(1), 2 * PAGE, VRAM_RW).expect("alloc");
    let mut bo = emu
        .cpu_map(render, offset, 2 * PAGE as usize)
        .expect("map the BO");
    bo.bytes()[100..105].copy_from_slice(b"to-db");
    let dmabuf = export(&emu, h);
    assert_eq!(
        rustix::fs::ftruncate(&dmabuf, 0),
        Err(Errno::PERM),
        "sealed: no program can cut the BO's memory short"
    );
    // The dma-buf stand-in is mapped natively: it is the BO's memory.
    assert!(matches!(
        emu.mmap_action(dmabuf.as_fd(), 0, 2 * PAGE),
        MmapAction::Continue
    ));
    let mut db = emu
        .cpu_map(dmabuf.as_fd(), 0, 2 * PAGE as usize)
        .expect("map the dma-buf");
    assert_eq!(&db.bytes()[100..105], b"to-db");
    db.bytes()[PAGE as usize..][..5].copy_from_slice(b"to-bo");
    assert_eq!(&bo.bytes()[PAGE as usize..][..5], b"to-bo");
    assert_eq!(
        errno(emu.mmap_action(dmabuf.as_fd(), PAGE, 2 * PAGE)),
        Errno::INVAL,
        "past the buffer"
    );
    // Exporting again gives the same dma-buf.
    let again = export(&emu, h);
    let key = |fd: &OwnedFd| {
        let st = rustix::fs::fstat(fd).expect("fstat");
        (st.st_dev, st.st_ino)
    };
    assert_eq!(key(&again), key(&dmabuf));

    // An import on the same GPU is the same GEM object: the same offset, which outlives the
    // exporter's handle while the import holds it.
    let imported = import(&emu, gpu, va(2), &dmabuf);
    drop((bo, db));
    emu.free(h).expect("free the exporter's handle");
    let mut through_import = emu
        .cpu_map(render, offset, 2 * PAGE as usize)
        .expect("the import's offset is the exporter's");
    assert_eq!(&through_import.bytes()[100..105], b"to-db");
    let mut db = emu
        .cpu_map(dmabuf.as_fd(), 0, 2 * PAGE as usize)
        .expect("map the dma-buf");
    assert_eq!(&db.bytes()[PAGE as usize..][..5], b"to-bo");
    drop(through_import);
    drop(db);
    // The dma-buf keeps the object alive past the import's FREE too; the offset is the
    // render file's no more (no handle on it).
    emu.free(imported).expect("free the import");
    assert_eq!(errno(emu.mmap_action(render, offset, PAGE)), Errno::ACCESS);
    let mut db = emu
        .cpu_map(dmabuf.as_fd(), 0, 2 * PAGE as usize)
        .expect("map the dma-buf");
    assert_eq!(&db.bytes()[100..105], b"to-db");
}

#[test]
fn a_dma_buf_of_vram_without_public_maps_like_any_other() {
    // amdgpu_gem_object_mmap refuses only NO_CPU_ACCESS BOs, and KFD makes none: a VRAM BO
    // allocated without PUBLIC has no AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED, nothing more.
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let hidden = VRAM_RW & !KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
    let (h, _) = emu.alloc(gpu, va(1), PAGE, hidden).expect("alloc");
    let dmabuf = export(&emu, h);
    assert!(matches!(
        emu.mmap_action(dmabuf.as_fd(), 0, PAGE),
        MmapAction::Continue
    ));
    assert_eq!(
        errno(emu.mmap_action(dmabuf.as_fd(), PAGE, PAGE)),
        Errno::INVAL,
        "still only inside the buffer"
    );
}

#[test]
fn the_event_offset_maps_a_bo_given_as_the_signal_page() {
    let mut emu = Emu::machine("mi300x");
    let (_, offset, a) = emu.signal_event_on_a_bo();
    assert_eq!(a.event_page_offset, TYPE_EVENTS);
    let mut events = emu
        .cpu_map(emu.kfd.as_fd(), TYPE_EVENTS, 32 * 1024)
        .expect("the event page");
    let mut bo = emu
        .cpu_map(emu.renders[0].as_fd(), offset, 32 * 1024)
        .expect("the BO");
    bo.bytes()[8..16].copy_from_slice(&5u64.to_ne_bytes());
    assert_eq!(events.bytes()[8..16], 5u64.to_ne_bytes(), "the same memory");
}

#[test]
fn an_import_on_another_gpu_is_a_new_object_that_goes_with_its_last_handle() {
    let mut emu = Emu::machine("mi210x8");
    emu.acquire_all();
    let gpus = emu.gpu_ids();
    let size = 4 * PAGE;
    let (exported, _) = emu.alloc(gpus[0], va(1), size, VRAM_RW).expect("on GPU 0");
    let dmabuf = export(&emu, exported);
    let (_, a) = emu
        .alloc(gpus[1], va(2), size, VRAM_RW)
        .expect("a on GPU 1");
    let (_, b) = emu
        .alloc(gpus[1], va(3), size, VRAM_RW)
        .expect("b on GPU 1");
    assert_eq!(b, a + size);
    // The import takes the next node of GPU 1's manager; freeing it gives the node back
    // although the exporter's object (and the dma-buf) live on.
    let imported = import(&emu, gpus[1], va(4), &dmabuf);
    emu.free(imported).expect("free the import");
    let (_, c) = emu
        .alloc(gpus[1], va(5), size, VRAM_RW)
        .expect("c on GPU 1");
    assert_eq!(c, b + size, "the import's node was freed and reused");
    // An import on GPU 1 while c holds that node lands after it.
    let again = import(&emu, gpus[1], va(6), &dmabuf);
    let (_, d) = emu
        .alloc(gpus[1], va(7), size, VRAM_RW)
        .expect("d on GPU 1");
    assert_eq!(d, c + 2 * size, "the second import holds the node after c");
    emu.free(again).expect("free");
}
