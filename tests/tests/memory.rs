//! Open, read the version and apertures, and allocate/map/unmap/free on every GPU — on the
//! emulated machines and, when present, on the hardware.

use kfd_ioctl::abi::AllocMemFlags;
use kfd_ioctl::topology::Topology;
use kfd_ioctl::{Errno, Error, GpuId, Kfd, MemoryPolicy};
use kfd_tests::{Target, VaReservation, on_every_target};

const MIB: u64 = 1 << 20;

/// The GPUs of the topology as `(gpu_id, drm_render_minor)`.
fn gpus(topo: &Topology) -> Vec<(GpuId, u32)> {
    topo.gpus()
        .filter_map(|n| Some((n.gpu_id()?, n.properties.drm_render_minor as u32)))
        .collect()
}

fn open_and_acquire(target: &Target) -> (Kfd, Vec<(GpuId, u32)>) {
    let kfd = Kfd::open().unwrap_or_else(|e| panic!("{}: {e}", target.name()));
    assert_eq!(kfd.version().major, 1);
    assert!(
        kfd.version().minor >= 5,
        "{}: KFD {}",
        target.name(),
        kfd.version()
    );
    assert_eq!(kfd.get_version().unwrap(), kfd.version());
    let topo = Topology::read().unwrap_or_else(|e| panic!("{}: {e}", target.name()));
    let gpus = gpus(&topo);
    assert!(
        !gpus.is_empty(),
        "{}: no GPU in the topology",
        target.name()
    );
    for &(gpu_id, minor) in &gpus {
        kfd.acquire_vm(gpu_id, minor).unwrap();
        // Idempotent, as the kernel's same-file rule.
        kfd.acquire_vm(gpu_id, minor).unwrap();
        kfd.set_memory_policy(gpu_id, &MemoryPolicy::default())
            .unwrap();
    }
    (kfd, gpus)
}

#[test]
fn version_and_apertures_cover_every_gpu() {
    on_every_target(&["mi300x", "mi210x8"], |target| {
        let (kfd, gpus) = open_and_acquire(target);
        let apertures = kfd.get_process_apertures().unwrap();
        assert_eq!(apertures.len(), gpus.len(), "{}", target.name());
        for &(gpu_id, _) in &gpus {
            let a = apertures
                .iter()
                .find(|a| a.gpu_id == gpu_id)
                .expect("an aperture per GPU");
            // GFX9+: 48-bit GPU VM below the hole, LDS and scratch in their own 2^48 slots.
            assert!(a.gpuvm.start <= 1 << 24, "gpuvm base {:#x}", a.gpuvm.start);
            assert!(a.gpuvm.end >= 1 << 47, "gpuvm end {:#x}", a.gpuvm.end);
            assert!(a.lds.start >= 1 << 48 && a.scratch.start > a.lds.start);
        }
    });
}

#[test]
fn allocate_map_unmap_free_on_every_gpu() {
    on_every_target(&["mi300x", "mi210x8"], |target| {
        let (kfd, gpus) = open_and_acquire(target);
        for &(gpu_id, _) in &gpus {
            let before = kfd.available_memory(gpu_id).unwrap();
            let va = VaReservation::new((4 * MIB) as usize, (2 * MIB) as usize);
            let flags = AllocMemFlags::VRAM | AllocMemFlags::WRITABLE | AllocMemFlags::EXECUTABLE;
            let bo = kfd
                .alloc_memory_of_gpu(gpu_id, va.addr(), 2 * MIB, flags)
                .unwrap();
            assert_eq!(
                (bo.gpu_id(), bo.va(), bo.size()),
                (gpu_id, va.addr(), 2 * MIB)
            );
            assert_eq!(
                bo.handle() >> 32,
                u64::from(gpu_id.get()),
                "handle is gpu_id << 32 | id"
            );
            let during = kfd.available_memory(gpu_id).unwrap();
            assert!(
                during + 2 * MIB <= before,
                "{}: {before} -> {during}",
                target.name()
            );

            kfd.map_memory_to_gpu(&bo, &[gpu_id]).unwrap();
            assert_eq!(bo.mapped_gpus(), vec![gpu_id]);
            kfd.unmap_memory_from_gpu(&bo, &[gpu_id]).unwrap();
            assert!(bo.mapped_gpus().is_empty());
            // Unmapping again: the BO is not mapped on that GPU.
            let err = kfd.unmap_memory_from_gpu(&bo, &[gpu_id]).unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::DeviceList {
                        errno: Errno::INVAL,
                        ..
                    }
                ),
                "{err}"
            );
            kfd.free_memory_of_gpu(bo).unwrap();
            assert_eq!(
                kfd.available_memory(gpu_id).unwrap(),
                before,
                "{}",
                target.name()
            );
        }
    });
}

#[test]
fn system_memory_is_mapped_on_all_gpus_and_cpu_visible() {
    on_every_target(&["mi300x", "mi210x8"], |target| {
        let (kfd, gpus) = open_and_acquire(target);
        let ids: Vec<GpuId> = gpus.iter().map(|g| g.0).collect();
        let va = VaReservation::new((2 * MIB) as usize, (2 * MIB) as usize);
        let bo = kfd
            .alloc_memory_of_gpu(
                ids[0],
                va.addr(),
                64 << 10,
                AllocMemFlags::GTT | AllocMemFlags::WRITABLE,
            )
            .unwrap();
        kfd.map_memory_to_gpu(&bo, &ids).unwrap();
        assert_eq!(bo.mapped_gpus(), ids, "{}", target.name());
        {
            let cpu = bo.map_cpu().unwrap();
            let mut zeroes = [0xffu8; 64];
            cpu.read_slice(&mut zeroes, 0).unwrap();
            assert_eq!(zeroes, [0u8; 64], "new GTT memory reads as zero");
            cpu.write_slice(b"kfd-rs", 100).unwrap();
            let again = bo.map_cpu().unwrap();
            let mut back = [0u8; 6];
            again.read_slice(&mut back, 100).unwrap();
            assert_eq!(&back, b"kfd-rs", "two CPU mappings see the same bytes");
            assert!(
                cpu.write_slice(b"abc", (64 << 10) - 2).is_err(),
                "writes past the end are refused"
            );
        }
        // Dropping the BO unmaps it from every GPU and frees it.
        drop(bo);
    });
}

#[test]
fn a_device_list_map_that_fails_part_way_says_where_and_keeps_track() {
    on_every_target(&["mi210x8"], |target| {
        let (kfd, gpus) = open_and_acquire(target);
        if gpus.len() < 3 {
            kfd_skip::skip_part(&target.name(), "needs 3 GPUs");
            return;
        }
        let ids: Vec<GpuId> = gpus.iter().map(|g| g.0).collect();
        let va = VaReservation::new((2 * MIB) as usize, (2 * MIB) as usize);
        let flags = AllocMemFlags::GTT | AllocMemFlags::WRITABLE;
        // A BO at `va` mapped on the third GPU only...
        let first = kfd
            .alloc_memory_of_gpu(ids[0], va.addr(), 64 << 10, flags)
            .unwrap();
        kfd.map_memory_to_gpu(&first, &ids[2..3]).unwrap();
        // ...so a second BO at the same VA (allowed at ALLOC) maps on the first two GPUs and
        // then clashes in the third GPU's VM.
        let second = kfd
            .alloc_memory_of_gpu(ids[0], va.addr(), 64 << 10, flags)
            .unwrap();
        let err = kfd.map_memory_to_gpu(&second, &ids).unwrap_err();
        match &err {
            Error::DeviceList {
                done,
                failed_gpu,
                total,
                errno,
                ..
            } => {
                assert_eq!(done.as_slice(), &ids[..2], "{err}");
                assert_eq!(*failed_gpu, ids[2]);
                assert_eq!(*total, ids.len());
                assert_eq!(*errno, Errno::INVAL);
            }
            other => panic!(
                "{}: expected a device-list error, got {other}",
                target.name()
            ),
        }
        assert_eq!(
            second.mapped_gpus(),
            &ids[..2],
            "the GPUs that did map are tracked"
        );
        // Dropping unmaps from exactly those, then frees.
        kfd.free_memory_of_gpu(second).unwrap();
        kfd.free_memory_of_gpu(first).unwrap();
    });
}

/// The kernel's argument checks of ALLOC and MAP (kfd-ioctl's `validate` module lists them
/// with the kernel functions), as the library reports them: an odd size is rounded up to
/// pages (`PAGE_ALIGN` in `amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu`) and the BO covers the
/// rounded range on the GPU; an unaligned GPU address, which the kernel records at ALLOC and
/// refuses at every MAP (`amdgpu_vm_verify_parameters`), is refused at ALLOC with the
/// kernel's EINVAL; address 0, accepted at ALLOC (the kernel's "VRAM without VA" case), is
/// refused at MAP (`kfd_mem_attach`); a size of 0 is EINVAL (`kfd_ioctl_alloc_memory_of_gpu`).
#[test]
fn odd_sizes_round_and_bad_addresses_fail_with_the_kernels_errno() {
    on_every_target(&["mi300x"], |target| {
        let (kfd, gpus) = open_and_acquire(target);
        let gpu_id = gpus[0].0;
        let va = VaReservation::new((4 * MIB) as usize, (2 * MIB) as usize);
        let flags = AllocMemFlags::VRAM | AllocMemFlags::WRITABLE;

        let odd = kfd
            .alloc_memory_of_gpu(gpu_id, va.addr(), 4097, flags)
            .unwrap();
        assert_eq!(odd.size(), 8192, "{}: the kernel's BO size", target.name());
        kfd.map_memory_to_gpu(&odd, &[gpu_id]).unwrap();
        // The second page belongs to the first BO on the GPU: a BO there clashes.
        let next_page = kfd
            .alloc_memory_of_gpu(gpu_id, va.addr() + 4096, 4096, flags)
            .unwrap();
        let clash = kfd.map_memory_to_gpu(&next_page, &[gpu_id]).unwrap_err();
        assert_eq!(clash.errno(), Some(Errno::INVAL), "{clash}");
        let after = kfd
            .alloc_memory_of_gpu(gpu_id, va.addr() + 8192, 4096, flags)
            .unwrap();
        kfd.map_memory_to_gpu(&after, &[gpu_id]).unwrap();

        let rejected = |e: Error| match e {
            Error::Rejected {
                ioctl,
                context,
                errno,
                reason,
            } => (ioctl, context.gpu_id, errno, reason),
            other => panic!("{}: expected a rejection, got {other}", target.name()),
        };
        let unaligned = kfd
            .alloc_memory_of_gpu(gpu_id, va.addr() + 123, 4096, flags)
            .unwrap_err();
        let text = unaligned.to_string();
        let (ioctl, gpu, errno, reason) = rejected(unaligned);
        assert_eq!(
            (ioctl, gpu, errno),
            ("ALLOC_MEMORY_OF_GPU", Some(gpu_id), Errno::INVAL)
        );
        assert!(reason.contains("not 4 KiB aligned"), "{text}");
        assert!(
            text.contains(&format!("at {:#x}", va.addr() + 123)),
            "names the range: {text}"
        );

        let empty = kfd
            .alloc_memory_of_gpu(gpu_id, va.addr(), 0, flags)
            .unwrap_err();
        assert_eq!(rejected(empty).2, Errno::INVAL);

        let no_va = kfd.alloc_memory_of_gpu(gpu_id, 0, 4096, flags).unwrap();
        let (ioctl, _, errno, reason) =
            rejected(kfd.map_memory_to_gpu(&no_va, &[gpu_id]).unwrap_err());
        assert_eq!((ioctl, errno), ("MAP_MEMORY_TO_GPU", Errno::INVAL));
        assert!(reason.contains("no GPU address"), "{reason}");
        assert!(no_va.mapped_gpus().is_empty());
    });
}

/// Allocating on a GPU before `acquire_vm` is ENODEV (`kfd_bind_process_to_device` finds no
/// VM); the message says what to do.
#[test]
fn allocating_before_acquire_vm_says_to_acquire_it() {
    on_every_target(&["mi300x"], |target| {
        let kfd = Kfd::open().unwrap();
        let topo = Topology::read().unwrap();
        let gpu_id = gpus(&topo)[0].0;
        let va = VaReservation::new((2 * MIB) as usize, (2 * MIB) as usize);
        let err = kfd
            .alloc_memory_of_gpu(gpu_id, va.addr(), 2 * MIB, AllocMemFlags::VRAM)
            .unwrap_err();
        assert_eq!(err.errno(), Some(Errno::NODEV), "{}: {err}", target.name());
        assert!(
            err.to_string().ends_with(
                "ENODEV; the GPU's VM is not acquired: call Kfd::acquire_vm for it first"
            ),
            "{err}"
        );
    });
}

/// `Kfd::alloc_memory`: one address for the CPU and the GPU. The BO is allocated at an
/// address the process reserved (2 MiB aligned from 2 MiB up, inside every GPU's GPUVM
/// aperture), a CPU-visible BO is mapped for the CPU at that same address (what the CPU
/// writes there, the GPU reads at it), device-only VRAM has no CPU view, and dropping
/// frees the BO (the VRAM comes back) before the address is released.
#[test]
fn alloc_memory_gives_one_address_for_cpu_and_gpu() {
    use kfd_ioctl::Memory;
    use kfd_ioctl::vm_memory::Bytes;
    on_every_target(&["mi300x", "mi210x8"], |target| {
        let name = target.name();
        let (kfd, gpus) = open_and_acquire(target);
        let ids: Vec<GpuId> = gpus.iter().map(|g| g.0).collect();
        let gpu = ids[0];
        let before = kfd.available_memory(gpu).unwrap();
        let public = AllocMemFlags::VRAM | AllocMemFlags::WRITABLE | AllocMemFlags::PUBLIC;
        let gtt = AllocMemFlags::GTT | AllocMemFlags::WRITABLE;
        let vram = kfd.alloc_memory(gpu, 64 * MIB, public, &ids).unwrap();
        let host = kfd.alloc_memory(gpu, 64 * MIB + 1, gtt, &[gpu]).unwrap();
        let small = kfd.alloc_memory(gpu, 4096, public, &[gpu]).unwrap();
        for m in [&vram, &host, &small] {
            let aperture = kfd.gpuvm_aperture(gpu).unwrap().unwrap();
            assert!(aperture.start <= m.va() && m.va() + m.size() <= aperture.end);
            assert_eq!(m.va(), m.buffer_object().va(), "{name}");
        }
        assert_eq!(vram.va() % (2 * MIB), 0, "{name}");
        assert_eq!(host.va() % (2 * MIB), 0, "{name}");
        assert_eq!(small.va() % (64 << 10), 0, "{name}");
        assert_eq!(host.size(), 64 * MIB + 4096, "{name}: rounded to pages");
        assert_eq!(Memory::alignment(2 * MIB, gtt), 2 << 20);
        assert_eq!(vram.buffer_object().mapped_gpus(), ids, "{name}");
        // The CPU sees the BO at the GPU address.
        let cpu = vram.as_volatile_slice().unwrap();
        assert_eq!(cpu.ptr_guard().as_ptr() as u64, vram.va());
        cpu.write_slice(b"one address", 4096).unwrap();
        if let Target::Emulated { model, .. } = target {
            for &g in &ids {
                let mut seen = [0u8; 11];
                model
                    .gpu_read(
                        std::process::id() as i32,
                        g.get(),
                        vram.va() + 4096,
                        &mut seen,
                    )
                    .unwrap();
                assert_eq!(&seen, b"one address", "{name}: gpu {g}");
            }
        }
        let device_only = kfd
            .alloc_memory(gpu, 2 * MIB, AllocMemFlags::VRAM, &[gpu])
            .unwrap();
        assert!(!device_only.is_cpu_visible());
        assert!(device_only.as_volatile_slice().is_err(), "{name}");
        // USERPTR and friends have their own calls.
        assert!(matches!(
            kfd.alloc_memory(gpu, 4096, AllocMemFlags::USERPTR, &[] as &[GpuId]),
            Err(Error::InvalidArgument { .. })
        ));
        drop((vram, host, small, device_only));
        assert_eq!(kfd.available_memory(gpu).unwrap(), before, "{name}: freed");
    });
}

/// Host-visible VRAM on a small-BAR GPU: the kernel refuses `VRAM | PUBLIC` with EINVAL
/// (`kfd_ioctl_alloc_memory_of_gpu`: "Alloc host visible vram on small bar is not
/// allowed"); the message keeps the flags and says what to do. Without PUBLIC the VRAM is
/// device-only: `alloc_memory` gives it no CPU view.
#[test]
fn small_bar_vram_fails_with_its_flags_and_the_resizable_bar_hint() {
    on_every_target(&["rx9070xt-small-bar"], |target| {
        let name = target.name();
        let (kfd, gpus) = open_and_acquire(target);
        let gpu = gpus[0].0;
        let public = AllocMemFlags::VRAM | AllocMemFlags::WRITABLE | AllocMemFlags::PUBLIC;
        let err = match (kfd.alloc_memory(gpu, 64 * MIB, public, &[gpu]), target) {
            (Err(err), _) => err,
            // This machine's GPU has a large BAR: nothing to refuse.
            (Ok(_), Target::Hardware) => return,
            (Ok(m), _) => panic!("{name}: small-BAR VRAM|PUBLIC was allocated: {m:?}"),
        };
        assert_eq!(err.errno(), Some(Errno::INVAL), "{name}: {err}");
        let text = err.to_string();
        assert!(
            text.contains("(VRAM|WRITABLE|PUBLIC, 64 MiB at 0x") && text.contains("resizable BAR"),
            "{name}: {text}"
        );
        let device_only = kfd
            .alloc_memory(gpu, 64 * MIB, AllocMemFlags::VRAM, &[gpu])
            .unwrap();
        assert!(!device_only.is_cpu_visible(), "{name}");
    });
}
