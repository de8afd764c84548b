//! Kernel-derived checks of the memory ioctls. Each test names the kernel function it follows
//! (drivers/gpu/drm/amd/amdkfd/kfd_chardev.c and amdgpu/amdgpu_amdkfd_gpuvm.c) and the
//! condition in it: which check fires first when two arguments are bad, the handle idr,
//! FREE while mapped, MAP/UNMAP resumption at `n_success`, the available-memory accounting and
//! the dma-buf info.

mod model_support;
mod model_svm_support;

use std::os::fd::{AsFd, AsRawFd};

use kfd_emu::backend::Backend;
use kfd_ioctl::abi::*;
use model_support::*;
use model_svm_support::{Anon, MIB};
use rustix::io::Errno;

/// A GPU id no preset has.
const UNKNOWN_GPU: u32 = 0x7;

/// EXPORT_DMABUF of `handle`: the dma-buf fd.
fn export(emu: &Emu, handle: u64) -> Result<u32, Errno> {
    let mut a = kfd_ioctl_export_dmabuf_args {
        handle,
        flags: libc::O_CLOEXEC as u32,
        dmabuf_fd: 0,
    };
    emu.ioctl(AMDKFD_IOC_EXPORT_DMABUF, &mut a)?;
    Ok(a.dmabuf_fd)
}

/// IMPORT_DMABUF of `fd` on `gpu_id` at `va`: the handle.
fn import(emu: &Emu, gpu_id: u32, fd: u32, va: u64) -> Result<u64, Errno> {
    let mut a = kfd_ioctl_import_dmabuf_args {
        va_addr: va,
        handle: 0,
        gpu_id,
        dmabuf_fd: fd,
    };
    emu.ioctl(AMDKFD_IOC_IMPORT_DMABUF, &mut a)?;
    Ok(a.handle)
}

/// GET_DMABUF_INFO of `fd` without metadata.
fn info(emu: &Emu, fd: u32) -> Result<kfd_ioctl_get_dmabuf_info_args, Errno> {
    let mut a = kfd_ioctl_get_dmabuf_info_args {
        dmabuf_fd: fd,
        ..Default::default()
    };
    emu.ioctl(AMDKFD_IOC_GET_DMABUF_INFO, &mut a)?;
    Ok(a)
}

/// SVM SET_ATTR of `[start, start + size)` with one granularity attribute: makes an SVM range.
fn svm_range(emu: &Emu, start: u64, size: u64) -> Result<i64, Errno> {
    #[repr(C)]
    #[derive(zerocopy::IntoBytes, zerocopy::Immutable)]
    struct OneAttr {
        args: kfd_ioctl_svm_args,
        attr: kfd_ioctl_svm_attribute,
    }
    let mut a = OneAttr {
        args: kfd_ioctl_svm_args {
            start_addr: start,
            size,
            op: KFD_IOCTL_SVM_OP_SET_ATTR,
            nattr: 1,
        },
        attr: kfd_ioctl_svm_attribute {
            r#type: KFD_IOCTL_SVM_ATTR_GRANULARITY,
            value: 9,
        },
    };
    emu.ioctl(amdkfd_ioc_svm(1), &mut a)
}

// kfd_ioctl_alloc_memory_of_gpu, in order: `args->size == 0` (-EINVAL); the SVM interval
// checks of the VA and of a USERPTR's CPU address (-EADDRINUSE); kfd_process_device_data_by_id
// (-EINVAL); PUBLIC VRAM on a small BAR (-EINVAL, model_memory covers it); kfd_bind_process_to_device
// (-ENODEV without ACQUIRE_VM); only then the doorbell / MMIO sizes and
// amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu's domain, USERPTR address and memory-limit checks.
#[test]
fn alloc_checks_fire_in_the_kernel_order() {
    let mut emu = Emu::machine("mi210x8");
    let gpus = emu.gpu_ids();
    emu.acquire(0).expect("acquire");
    let unbound = gpus[1];
    let cpu = Anon::new(2 * MIB);
    assert_eq!(svm_range(&emu, cpu.addr, 2 * MIB), Ok(0));
    let userptr = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let cases: [(&str, u32, u64, u64, u32, u64, Errno); 9] = [
        (
            "size 0 before the SVM check",
            UNKNOWN_GPU,
            cpu.addr,
            0,
            VRAM_RW,
            0,
            Errno::INVAL,
        ),
        (
            "the SVM VA check before the GPU",
            UNKNOWN_GPU,
            cpu.addr,
            4096,
            VRAM_RW,
            0,
            Errno::ADDRINUSE,
        ),
        (
            "the SVM CPU-address check before the GPU",
            UNKNOWN_GPU,
            va(1),
            4096,
            userptr,
            cpu.addr,
            Errno::ADDRINUSE,
        ),
        (
            "the SVM check before the bind",
            unbound,
            cpu.addr,
            4096,
            VRAM_RW,
            0,
            Errno::ADDRINUSE,
        ),
        (
            "the bind before the doorbell size",
            unbound,
            va(1),
            4096,
            KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL,
            0,
            Errno::NODEV,
        ),
        (
            "the bind before the MMIO size",
            unbound,
            va(1),
            8192,
            KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP,
            0,
            Errno::NODEV,
        ),
        (
            "the bind before the domain",
            unbound,
            va(1),
            4096,
            KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
            0,
            Errno::NODEV,
        ),
        (
            "the bind before the USERPTR address",
            unbound,
            va(1),
            4096,
            userptr,
            0,
            Errno::NODEV,
        ),
        (
            "the bind before the VRAM limit",
            unbound,
            va(1),
            u64::MAX,
            VRAM_RW,
            0,
            Errno::NODEV,
        ),
    ];
    for (what, gpu, at, size, flags, cpu_addr, errno) in cases {
        assert_eq!(
            emu.alloc_at(gpu, at, size, flags, cpu_addr),
            Err(errno),
            "{what}"
        );
    }
    // Once bound, the same arguments reach the later checks.
    for (size, flags, errno) in [
        (4096, KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL, Errno::INVAL),
        (4096, userptr, Errno::INVAL),
        (u64::MAX, VRAM_RW, Errno::NOMEM),
    ] {
        assert_eq!(
            emu.alloc(gpus[0], va(1), size, flags),
            Err(errno),
            "{flags:#x}"
        );
    }
}

// kfd_ioctl_map_memory_to_gpu, in order: `!args->n_devices`, `n_success > n_devices` (both
// -EINVAL, before the array is read); copy_from_user of the array (-EFAULT); the handle's GPU
// (-EINVAL); kfd_bind_process_to_device of the handle's GPU (-ENODEV); the handle's idr id
// (-ENOMEM). kfd_ioctl_unmap_memory_from_gpu has the same checks but no bind: an unbound GPU's
// unknown id is -ENOMEM there.
#[test]
fn map_and_unmap_checks_fire_in_the_kernel_order() {
    let mut emu = Emu::machine("mi210x8");
    let gpus = emu.gpu_ids();
    emu.acquire(0).expect("acquire");
    let (h, _) = emu.alloc(gpus[0], va(1), 4096, VRAM_RW).expect("alloc");
    let good = gpus.as_ptr() as u64;
    let bad_ptr = 8;
    let unknown_gpu_handle = u64::from(UNKNOWN_GPU) << 32;
    let unbound_handle = u64::from(gpus[1]) << 32;
    for unmap in [false, true] {
        let cases: [(&str, u64, u64, u32, u32, Errno); 6] = [
            (
                "no devices before the array",
                unknown_gpu_handle,
                bad_ptr,
                0,
                0,
                Errno::INVAL,
            ),
            (
                "n_success > n_devices before the array",
                unknown_gpu_handle,
                bad_ptr,
                1,
                2,
                Errno::INVAL,
            ),
            (
                "the array before the handle",
                unknown_gpu_handle,
                bad_ptr,
                1,
                0,
                Errno::FAULT,
            ),
            (
                "the handle's GPU",
                unknown_gpu_handle,
                good,
                1,
                0,
                Errno::INVAL,
            ),
            ("the handle's id", h + 1, good, 1, 0, Errno::NOMEM),
            (
                "an unbound GPU's handle",
                unbound_handle,
                good,
                1,
                0,
                if unmap { Errno::NOMEM } else { Errno::NODEV },
            ),
        ];
        for (what, handle, ptr, n, n_success, errno) in cases {
            assert_eq!(
                emu.map_raw(unmap, handle, ptr, n, n_success),
                (Err(errno), n_success),
                "{what} (unmap: {unmap})"
            );
        }
    }
    // Per device, MAP: the device's GPU (-EINVAL), then its bind (-ENODEV).
    assert_eq!(emu.map(h, &[UNKNOWN_GPU]), (Err(Errno::INVAL), 0));
    assert_eq!(emu.map(h, &[gpus[0], gpus[1]]), (Err(Errno::NODEV), 1));
    assert_eq!(emu.unmap(h, &[UNKNOWN_GPU]), (Err(Errno::INVAL), 0));
    assert_eq!(emu.unmap(h, &gpus[..1]), (Ok(0), 1));
}

// kfd_ioctl_map_memory_to_gpu / kfd_ioctl_unmap_memory_from_gpu: `for (i = args->n_success;
// i < args->n_devices; i++)` with `args->n_success = i+1` after each device, so a retry
// from the `n_success` a failure left maps (unmaps) only the rest, and `n_success ==
// n_devices` does nothing and succeeds.
#[test]
fn map_and_unmap_resume_at_n_success() {
    let mut emu = Emu::machine("mi210x8");
    emu.acquire_all();
    let gpus = emu.gpu_ids();
    let (h, _) = emu.alloc(gpus[0], va(1), 4096, VRAM_RW).expect("alloc");
    assert_eq!(emu.map_from(false, h, &gpus[..2], 2), (Ok(0), 2));
    assert_eq!(
        emu.unmap(h, &gpus[..1]),
        (Err(Errno::INVAL), 0),
        "nothing was mapped"
    );

    // A failure at the second device leaves n_success at 1; the retry starts after it.
    let mut devices = [gpus[0], UNKNOWN_GPU, gpus[1]];
    assert_eq!(emu.map(h, &devices), (Err(Errno::INVAL), 1));
    devices[1] = gpus[2];
    assert_eq!(emu.map_from(false, h, &devices, 1), (Ok(0), 3));
    // Starting past a device skips it.
    assert_eq!(emu.map_from(false, h, &[gpus[3], gpus[4]], 1), (Ok(0), 2));
    assert_eq!(
        emu.unmap(h, &gpus[3..4]),
        (Err(Errno::INVAL), 0),
        "GPU 3 was skipped"
    );

    // UNMAP likewise.
    let mapped = [gpus[0], gpus[1], gpus[2], gpus[4]];
    assert_eq!(emu.map_from(true, h, &mapped, 2), (Ok(0), 4));
    assert_eq!(emu.free(h), Err(Errno::BUSY), "GPUs 0 and 1 still map it");
    assert_eq!(
        emu.unmap(h, &mapped),
        (Err(Errno::INVAL), 2),
        "2 was already unmapped"
    );
    assert_eq!(emu.free(h), Ok(0));
}

// amdgpu_amdkfd_gpuvm_free_memory_of_gpu: `mapped_to_gpu_memory > 0` is -EBUSY before anything
// is released (the handle stays, kfd_ioctl_free_memory_of_gpu removes it only `if (!ret)`,
// and the memory limit is unreserved later); mapping a GPU twice attaches once
// (kfd_mem_attach / `if (entry->is_mapped)`), so one UNMAP per GPU frees it. A second FREE
// finds no handle: -EINVAL.
#[test]
fn free_while_mapped_is_ebusy_and_releases_nothing() {
    let mut emu = Emu::machine("mi210x8");
    emu.acquire_all();
    let gpus = emu.gpu_ids();
    let tgid = emu.caller.tgid;
    let start = emu.available(gpus[0]);
    let (h, _) = emu.alloc(gpus[0], va(1), 4 * MIB, VRAM_RW).expect("alloc");
    assert_eq!(emu.map(h, &gpus[..2]), (Ok(0), 2));
    emu.model
        .gpu_write(tgid, gpus[1], va(1), b"kept")
        .expect("write");
    assert_eq!(emu.free(h), Err(Errno::BUSY));
    assert_eq!(emu.available(gpus[0]), start - 4 * MIB, "still reserved");
    let mut seen = [0u8; 4];
    emu.model
        .gpu_read(tgid, gpus[1], va(1), &mut seen)
        .expect("still mapped");
    assert_eq!(&seen, b"kept");
    assert_eq!(emu.unmap(h, &gpus[..1]), (Ok(0), 1));
    assert_eq!(emu.free(h), Err(Errno::BUSY), "still mapped on GPU 1");
    assert_eq!(
        emu.map(h, &gpus[1..2]),
        (Ok(0), 1),
        "mapping again is a no-op"
    );
    assert_eq!(emu.unmap(h, &gpus[1..2]), (Ok(0), 1));
    assert_eq!(emu.free(h), Ok(0));
    assert_eq!(emu.available(gpus[0]), start);
    assert_eq!(emu.free(h), Err(Errno::INVAL), "double free");
}

// kfd_process_device_create_obj_handle: `idr_alloc(&pdd->alloc_idr, mem, 0, 0, ...)`, one idr
// per process and GPU, lowest free id from 0, taken only after the BO exists (a failed ALLOC
// takes none) and shared by IMPORT_DMABUF; MAKE_HANDLE is `gpu_id << 32 | idr id`, and
// GET_IDR_HANDLE looks the id up in the handle's GPU's idr only.
#[test]
fn handles_come_from_one_idr_per_gpu() {
    let mut emu = Emu::machine("mi210x8");
    emu.acquire_all();
    let gpus = emu.gpu_ids();
    let on = |gpu: u32, id: u64| (u64::from(gpu) << 32) | id;
    let (a0, _) = emu.alloc(gpus[0], va(1), 4096, VRAM_RW).expect("alloc");
    let (b0, _) = emu.alloc(gpus[1], va(2), 4096, VRAM_RW).expect("alloc");
    assert_eq!((a0, b0), (on(gpus[0], 0), on(gpus[1], 0)));
    assert_eq!(
        emu.alloc(gpus[1], va(3), u64::MAX, VRAM_RW),
        Err(Errno::NOMEM)
    );
    let (b1, _) = emu.alloc(gpus[1], va(3), 4096, VRAM_RW).expect("alloc");
    assert_eq!(b1, on(gpus[1], 1), "the failed ALLOC took no id");
    let fd = export(&emu, a0).expect("export");
    let dmabuf = own_fd(fd);
    let b2 = import(&emu, gpus[1], fd, va(4)).expect("import");
    assert_eq!(b2, on(gpus[1], 2), "imports share the idr");
    assert_eq!(
        emu.free(on(gpus[0], 1)),
        Err(Errno::INVAL),
        "id 1 is GPU 1's"
    );
    emu.free(b0).expect("free");
    let (again, _) = emu.alloc(gpus[1], va(5), 4096, VRAM_RW).expect("alloc");
    assert_eq!(again, on(gpus[1], 0), "the lowest free id");
    drop(dmabuf);
}

// kfd_ioctl_get_available_memory needs only the process's pdd (kfd_lock_pdd_by_id), no bind.
// amdgpu_amdkfd_get_available_memory: VRAM size minus `vram_used_aligned` (device-wide, every
// process) minus pins and the page-table reserve, ALIGN_DOWN to 2 MiB.
// amdgpu_amdkfd_reserve_mem_limit charges `vram_used_aligned += ALIGN(size, 2 MiB)` only when
// GTT is not also requested (`if (alloc_flag & GTT) ... else if (alloc_flag & VRAM)`);
// USERPTR is system memory only. amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu halves an
// AQL_QUEUE_MEM BO (`size >>= 1`) before reserving.
#[test]
fn available_memory_follows_the_kernel_accounting() {
    let mut emu = Emu::machine("mi300x");
    let gpu = emu.gpu();
    let start = emu.available(gpu);
    assert_eq!(start % (2 * MIB), 0);
    // The page-table reserve, ESTIMATE_PT_SIZE(amdgpu_amdkfd_total_mem_size): at least
    // system RAM >> 14 (newer kernels: and at least 8 MiB); pinned VRAM lowers it further.
    // The RAM is the machine's (its CPU nodes' memory).
    let ram = emu.model.machine().system_memory();
    let vram = emu.model.machine().gpus()[0].vram_size;
    assert!(
        start <= (vram - (ram >> 14)) & !(2 * MIB - 1),
        "{start} {vram} {ram}"
    );
    emu.acquire_all();
    assert_eq!(emu.available(gpu), start, "ACQUIRE_VM reserves nothing");

    let aql = VRAM_RW | KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM;
    let cpu = Anon::new(2 * MIB);
    let userptr = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let vram_gtt = VRAM_RW | KFD_IOC_ALLOC_MEM_FLAGS_GTT;
    let cases: [(&str, u64, u32, u64, u64); 5] = [
        ("AQL: half of 8 MiB", 8 * MIB, aql, 0, 4 * MIB),
        (
            "AQL: half of 2 MiB, rounded up to 2 MiB",
            2 * MIB,
            aql,
            0,
            2 * MIB,
        ),
        ("6 MiB + 4 KiB: 8 MiB", 6 * MIB + 4096, VRAM_RW, 0, 8 * MIB),
        ("USERPTR", 2 * MIB, userptr, cpu.addr, 0),
        ("VRAM | GTT is charged as GTT", 4 * MIB, vram_gtt, 0, 0),
    ];
    let mut handles = Vec::new();
    for (i, (what, size, flags, cpu_addr, charged)) in cases.into_iter().enumerate() {
        let before = emu.available(gpu);
        let (h, _) = emu
            .alloc_at(gpu, va(i as u64), size, flags, cpu_addr)
            .expect(what);
        assert_eq!(before - emu.available(gpu), charged, "{what}");
        handles.push(h);
    }
    // A refused ALLOC reserves nothing. The limit compares the unaligned `vram_used`, so
    // `available` is conservative: all of it can be allocated, leaving 0.
    let now = emu.available(gpu);
    assert_eq!(emu.alloc(gpu, va(9), vram, VRAM_RW), Err(Errno::NOMEM));
    assert_eq!(emu.available(gpu), now);
    let (rest, _) = emu
        .alloc(gpu, va(9), now, VRAM_RW)
        .expect("all that is available");
    assert_eq!(emu.available(gpu), 0);
    emu.free(rest).expect("free");
    // Another process sees the device-wide figure.
    let other = TestCaller::other();
    let kfd = injected(
        emu.model
            .open(&other, "/dev/kfd", libc::O_RDWR | libc::O_CLOEXEC, 0),
    );
    let mut a = kfd_ioctl_get_available_memory_args {
        available: 0,
        gpu_id: gpu,
        pad: 0,
    };
    let r = emu.model.ioctl(
        &other,
        kfd.as_fd(),
        AMDKFD_IOC_AVAILABLE_MEMORY,
        &mut a as *mut _ as u64,
    );
    assert_eq!(r, Some(Ok(0)));
    assert_eq!(a.available, now);
    for h in handles {
        emu.free(h).expect("free");
    }
    assert_eq!(emu.available(gpu), start);
}

// amdgpu_amdkfd_get_dmabuf_info: `*bo_size = amdgpu_bo_size(bo)` (page-aligned, and half an
// AQL BO); flags VRAM if the BO prefers VRAM (ALLOC picks VRAM first: `if (flags & VRAM)`)
// else GTT, plus PUBLIC for AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED (set only for PUBLIC VRAM);
// metadata through amdgpu_bo_get_metadata only when kfd_ioctl_get_dmabuf_info got a
// `metadata_ptr` (KFD BOs have none: size 0), otherwise `metadata_size` is left as given;
// gpu_id the BO's partition for VRAM. An import of this device's own dma-buf is the same GEM
// object (amdgpu_gem_prime_import), and its export gives back the same dma-buf.
#[test]
fn dmabuf_info_follows_the_bo() {
    let mut emu = Emu::machine("mi210x8");
    emu.acquire_all();
    let gpus = emu.gpu_ids();
    let writable = KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let vram = KFD_IOC_ALLOC_MEM_FLAGS_VRAM;
    let gtt = KFD_IOC_ALLOC_MEM_FLAGS_GTT;
    let public = KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
    let aql = KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM;
    let cases: [(&str, usize, u64, u32, u64, u32, usize); 5] = [
        (
            "private VRAM of 5000 bytes",
            2,
            5000,
            vram | writable,
            8192,
            vram,
            2,
        ),
        (
            "VRAM wins over GTT",
            1,
            4096,
            vram | gtt | public,
            4096,
            vram | public,
            1,
        ),
        (
            "AQL queue memory",
            0,
            4 * MIB,
            VRAM_RW | aql,
            2 * MIB,
            vram | public,
            0,
        ),
        (
            "PUBLIC means nothing for GTT",
            3,
            4096,
            gtt | public,
            4096,
            gtt,
            0,
        ),
        ("GTT", 3, 8192, gtt | writable, 8192, gtt, 0),
    ];
    let mut fds = Vec::new();
    for (i, (what, gpu, size, flags, bo_size, info_flags, info_gpu)) in
        cases.into_iter().enumerate()
    {
        let (h, _) = emu.alloc(gpus[gpu], va(i as u64), size, flags).expect(what);
        let fd = export(&emu, h).expect(what);
        let imported = import(&emu, gpus[gpu], fd, va(10 + i as u64)).expect(what);
        let again = export(&emu, imported).expect(what);
        for (whose, fd) in [("exported", fd), ("imported and exported again", again)] {
            fds.push(own_fd(fd));
            let got = info(&emu, fd).expect(what);
            assert_eq!(
                (got.size, got.flags, got.gpu_id),
                (bo_size, info_flags, gpus[info_gpu]),
                "{what}, {whose}"
            );
        }
    }
    // import_obj_create keeps the dma-buf (`(*mem)->dmabuf = dma_buf`) even for another
    // device, where the import is a new GTT object: exporting that import gives back the
    // original dma-buf, and the info of the original BO (VRAM of GPU 2).
    let fd = fds[0].as_raw_fd() as u32;
    let on_peer = import(&emu, gpus[1], fd, va(20)).expect("import on a peer");
    let again = export(&emu, on_peer).expect("export the peer's import");
    fds.push(own_fd(again));
    let got = info(&emu, again).expect("info");
    assert_eq!(
        (got.size, got.flags, got.gpu_id),
        (8192, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, gpus[2])
    );
    let mut a = kfd_ioctl_get_dmabuf_info_args {
        metadata_size: 77,
        dmabuf_fd: fd,
        ..Default::default()
    };
    emu.ioctl(AMDKFD_IOC_GET_DMABUF_INFO, &mut a).expect("info");
    assert_eq!(a.metadata_size, 77, "no metadata_ptr: left as given");
    let mut buffer = [0xAAu8; 16];
    a.metadata_ptr = buffer.as_mut_ptr() as u64;
    a.metadata_size = 16;
    emu.ioctl(AMDKFD_IOC_GET_DMABUF_INFO, &mut a).expect("info");
    assert_eq!(a.metadata_size, 0, "KFD BOs carry no metadata");
    assert_eq!(buffer, [0xAA; 16], "nothing copied");
}

// kfd_ioctl_export_dmabuf: kfd_device_by_id(GET_GPU_ID) (-EINVAL), the handle (-EINVAL), then
// amdgpu_gem_prime_export's -EPERM for a userptr BO. kfd_ioctl_import_dmabuf: the GPU
// (-EINVAL), the bind (-ENODEV), then dma_buf_get (-EBADF for no file, -EINVAL for a file that
// is not a dma-buf). kfd_ioctl_get_dmabuf_info: the metadata buffer is allocated (kzalloc,
// -ENOMEM past KMALLOC_MAX_SIZE) before the fd is looked up.
#[test]
fn dmabuf_checks_fire_in_the_kernel_order() {
    let mut emu = Emu::machine("mi210x8");
    emu.acquire(0).expect("acquire");
    let gpus = emu.gpu_ids();
    let cpu = Anon::new(4096);
    let userptr = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let (u, _) = emu
        .alloc_at(gpus[0], va(1), 4096, userptr, cpu.addr)
        .expect("userptr");
    for (what, handle, errno) in [
        ("unknown GPU", u64::from(UNKNOWN_GPU) << 32, Errno::INVAL),
        (
            "no such id on a known GPU",
            u64::from(gpus[1]) << 32,
            Errno::INVAL,
        ),
        ("a userptr BO", u, Errno::PERM),
    ] {
        assert_eq!(export(&emu, handle), Err(errno), "{what}");
    }
    let not_dmabuf = emu.kfd.as_raw_fd() as u32;
    let no_fd = 999_999;
    for (what, gpu, fd, errno) in [
        ("the GPU before the fd", UNKNOWN_GPU, no_fd, Errno::INVAL),
        ("the bind before the fd", gpus[1], no_fd, Errno::NODEV),
        ("no such fd", gpus[0], no_fd, Errno::BADF),
        ("not a dma-buf", gpus[0], not_dmabuf, Errno::INVAL),
    ] {
        assert_eq!(import(&emu, gpu, fd, va(2)), Err(errno), "{what}");
    }
    assert_eq!(info(&emu, no_fd).map(|_| ()), Err(Errno::BADF));
    let mut a = kfd_ioctl_get_dmabuf_info_args {
        metadata_ptr: cpu.addr,
        metadata_size: u32::MAX,
        dmabuf_fd: no_fd,
        ..Default::default()
    };
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_GET_DMABUF_INFO, &mut a),
        Err(Errno::NOMEM)
    );
}
