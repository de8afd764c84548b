//! The queue ioctls against the model through the `Backend` trait: CREATE_QUEUE's checks in
//! the kernel's order with the kernel's errnos (each case names the kernel condition), the
//! buffer checks of newer kernels on both sides of their KFD minor, the per-process limit,
//! the doorbell offsets, the other queue ioctls on known and unknown queues, what queues
//! forbid while they exist, and the leak report.

mod model_support;

use kfd_emu::backend::Backend;
use kfd_emu::machine::Machine;
use kfd_emu::model::ModelConfig;
use kfd_ioctl::QueueSizes;
use kfd_ioctl::abi::*;
use model_support::{Emu, svm_set, va};
use rustix::io::Errno;

/// `ENOTSUPP` (524), which `set_queue_properties_from_user` returns for an unknown type.
const ENOTSUPP: Errno = Errno::from_raw_os_error(524);
/// Above `TASK_SIZE`: `access_ok` refuses it.
const KERNEL_ADDR: u64 = 1 << 47;
const GTT_RW: u32 = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;

fn emu(machine: &str, minor: u32) -> Emu {
    let mut emu = Emu::new(ModelConfig {
        machine: Machine::preset(machine).expect("preset"),
        kfd_minor: minor,
        ..ModelConfig::default()
    });
    emu.acquire_all();
    emu
}

/// A GTT BO of `size` bytes at `va`, mapped on the first GPU.
fn mapped(emu: &Emu, va: u64, size: u64) {
    let (h, _) = emu.alloc(emu.gpu(), va, size, GTT_RW).expect("alloc");
    assert_eq!(emu.map(h, &[emu.gpu()]).0, Ok(0));
}

/// SDMA queue arguments over a 4 KiB ring at `va(1)` and pointers in the page at `va(2)`,
/// both mapped (what kfd_queue_acquire_buffers accepts).
fn sdma_args(emu: &Emu) -> kfd_ioctl_create_queue_args {
    kfd_ioctl_create_queue_args {
        ring_base_address: va(1),
        write_pointer_address: va(2) + 8,
        read_pointer_address: va(2),
        ring_size: 4096,
        gpu_id: emu.gpu(),
        queue_type: KFD_IOC_QUEUE_TYPE_SDMA,
        queue_percentage: 100,
        queue_priority: 7,
        ..Default::default()
    }
}

fn with_buffers(emu: &Emu) {
    mapped(emu, va(1), 4096);
    mapped(emu, va(2), 4096);
}

fn create(
    emu: &Emu,
    a: &kfd_ioctl_create_queue_args,
) -> Result<kfd_ioctl_create_queue_args, Errno> {
    let mut a = *a;
    emu.ioctl(AMDKFD_IOC_CREATE_QUEUE, &mut a).map(|_| a)
}

fn destroy(emu: &Emu, queue_id: u32) -> Result<i64, Errno> {
    let mut a = kfd_ioctl_destroy_queue_args { queue_id, pad: 0 };
    emu.ioctl(AMDKFD_IOC_DESTROY_QUEUE, &mut a)
}

#[test]
fn create_queue_checks_its_arguments_in_the_kernels_order() {
    let emu = emu("mi100", KFD_IOCTL_MINOR_VERSION);
    with_buffers(&emu);
    let ok = sdma_args(&emu);
    let with = |f: &dyn Fn(&mut kfd_ioctl_create_queue_args)| {
        let mut a = ok;
        f(&mut a);
        create(&emu, &a).map(|_| ())
    };
    // set_queue_properties_from_user, in order:
    // `(queue_percentage & 0xFF) > KFD_MAX_QUEUE_PERCENTAGE`, before any address check.
    assert_eq!(
        with(&|a| {
            a.queue_percentage = 101;
            a.ring_base_address = KERNEL_ADDR;
        }),
        Err(Errno::INVAL)
    );
    // `queue_priority > KFD_MAX_QUEUE_PRIORITY`.
    assert_eq!(with(&|a| a.queue_priority = 16), Err(Errno::INVAL));
    // `ring_base_address && !access_ok(ring_base_address, 8)`.
    assert_eq!(
        with(&|a| a.ring_base_address = KERNEL_ADDR),
        Err(Errno::FAULT)
    );
    // `!is_power_of_2(ring_size) && ring_size != 0`.
    assert_eq!(with(&|a| a.ring_size = 3000), Err(Errno::INVAL));
    // `!access_ok(read_pointer_address, 4)`, `!access_ok(write_pointer_address, 4)`.
    assert_eq!(
        with(&|a| a.read_pointer_address = KERNEL_ADDR),
        Err(Errno::FAULT)
    );
    assert_eq!(
        with(&|a| a.write_pointer_address = KERNEL_ADDR),
        Err(Errno::FAULT)
    );
    // `eop_buffer_address && !access_ok(...)`, `ctx_save_restore_address && !access_ok(...)`.
    assert_eq!(
        with(&|a| a.eop_buffer_address = KERNEL_ADDR),
        Err(Errno::FAULT)
    );
    assert_eq!(
        with(&|a| a.ctx_save_restore_address = KERNEL_ADDR),
        Err(Errno::FAULT)
    );
    // An unknown queue type: -ENOTSUPP, after the address checks.
    assert_eq!(with(&|a| a.queue_type = 5), Err(ENOTSUPP));
    // kfd_ioctl_create_queue: no pdd for the gpu_id.
    assert_eq!(with(&|a| a.gpu_id = 0), Err(Errno::INVAL));
    assert_eq!(with(&|a| a.gpu_id = 0xDEAD), Err(Errno::INVAL));
    // `sdma_engine_id > max_sdma_eng_id` (MI100: 2 PCIe + 6 xGMI engines).
    let by_id = |id| {
        with(&|a| {
            a.queue_type = KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID;
            a.sdma_engine_id = id;
        })
    };
    assert_eq!(by_id(8), Err(Errno::INVAL));
    // The PM4 target XCC in bits 8-15 of the percentage is not the percentage.
    let created = create(&emu, &{
        let mut a = ok;
        a.queue_percentage = 0x0364;
        a
    })
    .expect("a valid SDMA queue");
    assert_eq!(destroy(&emu, created.queue_id), Ok(0));
    assert_eq!(by_id(7).map(|_| ()), Ok(()));
}

#[test]
fn create_queue_needs_a_bound_process_and_a_type_the_kernel_knows() {
    // kfd_bind_process_to_device fails without ACQUIRE_VM: -ESRCH.
    let emu = Emu::machine("mi300x");
    let a = sdma_args(&emu);
    assert_eq!(create(&emu, &a).map(|_| ()), Err(Errno::SRCH));
    // SDMA_BY_ENG_ID arrived with KFD 1.17: before, it is an unknown type.
    let old = emu_minor(16);
    let mut a = sdma_args(&old);
    a.queue_type = KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID;
    assert_eq!(create(&old, &a).map(|_| ()), Err(ENOTSUPP));
}

fn emu_minor(minor: u32) -> Emu {
    emu("mi300x", minor)
}

#[test]
fn newer_kernels_check_the_queue_buffers_and_older_ones_do_not() {
    // kfd_queue_acquire_buffers (KFD 1.16 on): each of the write pointer, the read pointer
    // and the ring must be a GPU mapping that starts at its page, the pointers one page long,
    // the ring exactly its size (`kfd_queue_buffer_get`); else -EINVAL.
    for (minor, checked) in [(KFD_IOCTL_MINOR_VERSION, true), (16, true), (15, false)] {
        let emu = emu_minor(minor);
        let a = sdma_args(&emu);
        let expect = |r: Result<kfd_ioctl_create_queue_args, Errno>| {
            let r = r.map(|q| destroy(&emu, q.queue_id).expect("destroy"));
            if checked {
                assert_eq!(r, Err(Errno::INVAL), "minor {minor}");
            } else {
                assert_eq!(r, Ok(0), "minor {minor}");
            }
        };
        // Nothing mapped at all.
        expect(create(&emu, &a));
        // Pointers in a two-page mapping.
        mapped(&emu, va(2), 8192);
        mapped(&emu, va(1), 8192);
        expect(create(&emu, &a));
        // Pointers in their page, the ring in a mapping twice its size.
        mapped(&emu, va(3), 4096);
        let mut b = a;
        b.read_pointer_address = va(3);
        b.write_pointer_address = va(3) + 8;
        expect(create(&emu, &b));
        // The ring not at the start of its mapping.
        let mut c = b;
        c.ring_base_address = va(1) + 4096;
        expect(create(&emu, &c));
        // A ring mapping of the ring's size: accepted everywhere.
        mapped(&emu, va(4), 4096);
        let mut d = b;
        d.ring_base_address = va(4);
        let q = create(&emu, &d).expect("exact buffers");
        assert_eq!(destroy(&emu, q.queue_id), Ok(0), "minor {minor}");
    }
}

#[test]
fn compute_queues_need_the_gpus_eop_and_cwsr_sizes_on_newer_kernels() {
    let emu = emu("mi100", KFD_IOCTL_MINOR_VERSION);
    let machine = Machine::preset("mi100").unwrap();
    let node = machine.node_of(&machine.gpus()[0]).unwrap();
    let sizes = QueueSizes::for_node(node).expect("CWSR sizes of gfx908");
    with_buffers(&emu);
    mapped(&emu, va(3), sizes.eop_buffer_size);
    mapped(&emu, va(4), sizes.total_ctx_save_size());
    let ok = kfd_ioctl_create_queue_args {
        queue_type: KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
        eop_buffer_address: va(3),
        eop_buffer_size: sizes.eop_buffer_size,
        ctx_save_restore_address: va(4),
        ctx_save_restore_size: sizes.cwsr_size,
        ctl_stack_size: sizes.ctl_stack_size,
        ..sdma_args(&emu)
    };
    // `eop_ring_buffer_size != node eop_buffer_size`.
    let mut a = ok;
    a.eop_buffer_size = 8192;
    assert_eq!(create(&emu, &a).map(|_| ()), Err(Errno::INVAL));
    // `ctl_stack_size != node ctl_stack_size`, `ctx_save_restore_area_size < cwsr_size`.
    let mut a = ok;
    a.ctl_stack_size += 4096;
    assert_eq!(create(&emu, &a).map(|_| ()), Err(Errno::INVAL));
    let mut a = ok;
    a.ctx_save_restore_size -= 4096;
    assert_eq!(create(&emu, &a).map(|_| ()), Err(Errno::INVAL));
    // The save area mapping must span (cwsr_size + debug_memory_size) * num_xcc.
    let mut a = ok;
    a.ctx_save_restore_address = va(3);
    assert_eq!(create(&emu, &a).map(|_| ()), Err(Errno::INVAL));
    // A larger save area is fine (the check is `<` since "drm/amdkfd: relax checks for over
    // allocation of save area"), its mapping spanning the size asked for, not the node's.
    let mut larger = ok;
    larger.ctx_save_restore_size += 4096;
    assert_eq!(create(&emu, &larger).map(|_| ()), Err(Errno::INVAL));
    let bigger = QueueSizes {
        cwsr_size: larger.ctx_save_restore_size,
        ..sizes
    };
    mapped(&emu, va(5), bigger.total_ctx_save_size());
    larger.ctx_save_restore_address = va(5);
    let q = create(&emu, &larger).expect("a compute queue with a larger save area");
    assert_eq!(destroy(&emu, q.queue_id), Ok(0));
    let q = create(&emu, &ok).expect("a compute queue with the GPU's sizes");
    // Its doorbell: the first CP doorbell (0) of the process's slice.
    let base = (3u64 << 62) | (u64::from(emu.gpu()) << 46);
    assert_eq!(q.doorbell_offset, base);
    assert_eq!(destroy(&emu, q.queue_id), Ok(0));
}

#[test]
fn doorbell_offsets_are_the_kernels() {
    // MI100: 2 PCIe SDMA engines. allocate_sdma_queue takes queues engine by engine; their
    // SOC15 doorbells are the engine's index (0x100 + 0xA * engine) plus the mirror offset
    // (512) for odd queues and queue / 2; CP queues take the lowest free index.
    let emu = emu("mi100", KFD_IOCTL_MINOR_VERSION);
    with_buffers(&emu);
    let base = (3u64 << 62) | (u64::from(emu.gpu()) << 46);
    let a = sdma_args(&emu);
    let offsets: Vec<u64> = (0..4)
        .map(|_| create(&emu, &a).expect("SDMA queue").doorbell_offset - base)
        .collect();
    let index =
        |engine: u64, queue: u64| (0x100 + 0xA * engine + (queue & 1) * 512 + queue / 2) * 8;
    let want: Vec<u64> = [(0, 0), (1, 0), (0, 1), (1, 1)]
        .iter()
        .map(|&(e, q)| index(e, q) & 0x1FFF)
        .collect();
    assert_eq!(offsets, want);
    // Queue ids are the lowest free ones, per process.
    let q = create(&emu, &a).expect("fifth");
    assert_eq!(q.queue_id, 4);
    assert_eq!(destroy(&emu, 1), Ok(0));
    assert_eq!(create(&emu, &a).expect("reuses id 1").queue_id, 1);
}

#[test]
fn the_other_queue_ioctls_on_unknown_and_known_queues() {
    let emu = emu("mi100", KFD_IOCTL_MINOR_VERSION);
    with_buffers(&emu);
    // Unknown queue: pqm_destroy_queue -EINVAL; pqm_update_queue_properties, pqm_update_mqd
    // and pqm_get_wave_state -EFAULT; kfd_ioctl_alloc_queue_gws -EINVAL.
    assert_eq!(destroy(&emu, 3), Err(Errno::INVAL));
    let mut u = kfd_ioctl_update_queue_args {
        ring_base_address: va(1),
        queue_id: 3,
        ring_size: 4096,
        queue_percentage: 50,
        queue_priority: 3,
    };
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_UPDATE_QUEUE, &mut u),
        Err(Errno::FAULT)
    );
    let mask = [0xFFFF_FFFFu32; 2];
    let mut m = kfd_ioctl_set_cu_mask_args {
        queue_id: 3,
        num_cu_mask: 64,
        cu_mask_ptr: mask.as_ptr() as u64,
    };
    assert_eq!(emu.ioctl(AMDKFD_IOC_SET_CU_MASK, &mut m), Err(Errno::FAULT));
    let mut w = kfd_ioctl_get_queue_wave_state_args {
        queue_id: 3,
        ..Default::default()
    };
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_GET_QUEUE_WAVE_STATE, &mut w),
        Err(Errno::FAULT)
    );
    let mut g = kfd_ioctl_alloc_queue_gws_args {
        queue_id: 3,
        num_gws: 1,
        ..Default::default()
    };
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_ALLOC_QUEUE_GWS, &mut g),
        Err(Errno::INVAL)
    );

    let sdma = create(&emu, &sdma_args(&emu)).expect("SDMA queue").queue_id;
    // UPDATE: the argument checks, then the new properties.
    u.queue_id = sdma;
    u.queue_priority = 16;
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_UPDATE_QUEUE, &mut u),
        Err(Errno::INVAL)
    );
    u.queue_priority = 3;
    assert_eq!(emu.ioctl(AMDKFD_IOC_UPDATE_QUEUE, &mut u), Ok(0));
    // A new ring must be a mapping of its size on newer kernels.
    u.ring_size = 8192;
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_UPDATE_QUEUE, &mut u),
        Err(Errno::INVAL)
    );
    // SET_CU_MASK: `num_cu_mask % 32`, `num_cu_mask == 0`, then the copy.
    m.queue_id = sdma;
    m.num_cu_mask = 33;
    assert_eq!(emu.ioctl(AMDKFD_IOC_SET_CU_MASK, &mut m), Err(Errno::INVAL));
    m.num_cu_mask = 0;
    assert_eq!(emu.ioctl(AMDKFD_IOC_SET_CU_MASK, &mut m), Err(Errno::INVAL));
    m.num_cu_mask = 64;
    m.cu_mask_ptr = KERNEL_ADDR;
    assert_eq!(emu.ioctl(AMDKFD_IOC_SET_CU_MASK, &mut m), Err(Errno::FAULT));
    m.cu_mask_ptr = mask.as_ptr() as u64;
    assert_eq!(emu.ioctl(AMDKFD_IOC_SET_CU_MASK, &mut m), Ok(0));
    // Wave state: only an inactive compute queue with CWSR has one.
    w.queue_id = sdma;
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_GET_QUEUE_WAVE_STATE, &mut w),
        Err(Errno::INVAL)
    );
    // GWS go to compute queues only.
    g.queue_id = sdma;
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_ALLOC_QUEUE_GWS, &mut g),
        Err(Errno::INVAL)
    );
    // Destroyed once.
    assert_eq!(destroy(&emu, sdma), Ok(0));
    assert_eq!(destroy(&emu, sdma), Err(Errno::INVAL));
}

#[test]
fn a_process_has_at_most_127_queues_on_a_gpu_and_255_on_gc_9_4_3() {
    // pqm_create_queue: `pdd->qpd.queue_count >= max_queues` (127, the HWS limit; 255 on
    // GC 9.4.3, "No HWS limit on GFX 9.4.3"): -ENOSPC. Compute queues without CWSR on a
    // kernel before the buffer checks. kfdtest's AllQueues makes 152 queues on one MI300X
    // (24 CP, 16 PCIe SDMA and 112 xGMI SDMA queues).
    for (machine, limit) in [("mi100", 127), ("mi210x8", 127), ("mi300x", 255)] {
        let emu = emu(machine, 15);
        let a = kfd_ioctl_create_queue_args {
            queue_type: KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
            ..sdma_args(&emu)
        };
        for i in 0..limit {
            let q = create(&emu, &a).unwrap_or_else(|e| panic!("{machine}: queue {i}: {e}"));
            assert_eq!(q.queue_id, i);
        }
        assert_eq!(
            create(&emu, &a).map(|_| ()),
            Err(Errno::NOSPC),
            "{machine}: queue {limit}"
        );
        assert_eq!(destroy(&emu, 50), Ok(0));
        assert_eq!(create(&emu, &a).expect("a slot again").queue_id, 50);
    }
}

#[test]
fn xnack_and_runtime_enable_refuse_while_queues_exist() {
    let emu = emu("mi300x", KFD_IOCTL_MINOR_VERSION);
    with_buffers(&emu);
    let q = create(&emu, &sdma_args(&emu)).expect("queue");
    // kfd_ioctl_set_xnack_mode: "Process has user queues running" -EBUSY (a query is fine).
    let mut x = kfd_ioctl_set_xnack_mode_args { xnack_enabled: 0 };
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_SET_XNACK_MODE, &mut x),
        Err(Errno::BUSY)
    );
    x.xnack_enabled = -1;
    assert_eq!(emu.ioctl(AMDKFD_IOC_SET_XNACK_MODE, &mut x), Ok(0));
    // kfd_ioctl_runtime_enable with queues: -EEXIST.
    let mut r = kfd_ioctl_runtime_enable_args {
        mode_mask: KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK,
        ..Default::default()
    };
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_RUNTIME_ENABLE, &mut r),
        Err(Errno::EXIST)
    );
    assert_eq!(destroy(&emu, q.queue_id), Ok(0));
    x.xnack_enabled = 0;
    assert_eq!(emu.ioctl(AMDKFD_IOC_SET_XNACK_MODE, &mut x), Ok(0));
    assert_eq!(emu.ioctl(AMDKFD_IOC_RUNTIME_ENABLE, &mut r), Ok(0));
}

#[test]
fn a_queue_left_at_exit_is_a_leak_and_a_destroyed_one_is_not() {
    for leave in [false, true] {
        // A kernel before the buffer checks: the BOs can go while the queue stays, so the
        // queue is all that is left.
        let mut emu = Emu::new(ModelConfig {
            machine: Machine::preset("mi100").unwrap(),
            check_leaks: true,
            kfd_minor: 15,
            ..ModelConfig::default()
        });
        emu.acquire_all();
        let (ring, _) = emu.alloc(emu.gpu(), va(1), 4096, GTT_RW).unwrap();
        let (ptrs, _) = emu.alloc(emu.gpu(), va(2), 4096, GTT_RW).unwrap();
        for h in [ring, ptrs] {
            assert_eq!(emu.map(h, &[emu.gpu()]).0, Ok(0));
        }
        let q = create(&emu, &sdma_args(&emu)).expect("queue");
        if !leave {
            assert_eq!(destroy(&emu, q.queue_id), Ok(0));
        }
        for h in [ring, ptrs] {
            assert_eq!(emu.unmap(h, &[emu.gpu()]).0, Ok(0));
            assert_eq!(emu.free(h), Ok(0));
        }
        emu.model.process_exited(emu.caller.tgid);
        assert_eq!(emu.model.leaks_found(), leave, "queue left: {leave}");
    }
}

#[test]
fn newer_kernels_refuse_to_unmap_what_a_queue_holds() {
    // unmap_bo_from_gpuvm: `bo_va->queue_refcount` -> -EBUSY, from the kernels that take it
    // in kfd_queue_acquire_buffers; the hold goes with DESTROY_QUEUE.
    for (minor, held) in [(KFD_IOCTL_MINOR_VERSION, true), (15, false)] {
        let emu = emu("mi100", minor);
        let gpu = emu.gpu();
        let (ring, _) = emu.alloc(gpu, va(1), 4096, GTT_RW).unwrap();
        let (ptrs, _) = emu.alloc(gpu, va(2), 4096, GTT_RW).unwrap();
        let (other, _) = emu.alloc(gpu, va(3), 4096, GTT_RW).unwrap();
        for h in [ring, ptrs, other] {
            assert_eq!(emu.map(h, &[gpu]).0, Ok(0));
        }
        let q = create(&emu, &sdma_args(&emu)).expect("queue");
        // A BO the queue does not use unmaps.
        assert_eq!(emu.unmap(other, &[gpu]), (Ok(0), 1));
        let want = if held {
            (Err(Errno::BUSY), 0)
        } else {
            (Ok(0), 1)
        };
        assert_eq!(emu.unmap(ring, &[gpu]), want, "minor {minor}");
        assert_eq!(emu.unmap(ptrs, &[gpu]), want, "minor {minor}");
        assert_eq!(destroy(&emu, q.queue_id), Ok(0));
        if held {
            assert_eq!(emu.unmap(ring, &[gpu]), (Ok(0), 1));
            assert_eq!(emu.unmap(ptrs, &[gpu]), (Ok(0), 1));
        }
    }
}

#[test]
fn a_save_area_in_svm_memory_needs_gpu_always_mapped_access() {
    // kfd_queue_acquire_buffers: a CWSR area that is no BO mapping is looked up as SVM ranges
    // (kfd_queue_buffer_svm_get): mapped to the GPU, accessible by it, GPU_ALWAYS_MAPPED.
    // libhsakmt 6.x puts the save area there (queues.c, register_svm_range).
    let emu = emu("mi300x", KFD_IOCTL_MINOR_VERSION);
    let machine = Machine::preset("mi300x").unwrap();
    let node = machine.node_of(&machine.gpus()[0]).unwrap();
    let sizes = QueueSizes::for_node(node).expect("CWSR sizes of gfx942");
    with_buffers(&emu);
    mapped(&emu, va(3), sizes.eop_buffer_size);
    let len = usize::try_from(sizes.total_ctx_save_size()).unwrap();
    let area = |attrs: &[(u32, u32)]| {
        // SAFETY: a fresh private anonymous mapping, unmapped when the test process exits.
        let p = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            )
        }
        .expect("mmap");
        let addr = p as u64;
        assert_eq!(svm_set(&emu, addr, len as u64, attrs), Ok(0));
        addr
    };
    // ACCESS takes a gpu_id.
    let node_id = emu.gpu();
    let flags = KFD_IOCTL_SVM_FLAG_HOST_ACCESS | KFD_IOCTL_SVM_FLAG_GPU_EXEC;
    let always = flags | KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED;
    let args = |addr| kfd_ioctl_create_queue_args {
        queue_type: KFD_IOC_QUEUE_TYPE_COMPUTE,
        eop_buffer_address: va(3),
        eop_buffer_size: sizes.eop_buffer_size,
        ctx_save_restore_address: addr,
        ctx_save_restore_size: sizes.cwsr_size,
        ctl_stack_size: sizes.ctl_stack_size,
        ..sdma_args(&emu)
    };
    // What libhsakmt sets: flags cleared and set, GPU access, always mapped.
    let good = area(&[
        (KFD_IOCTL_SVM_ATTR_CLR_FLAGS, !always),
        (KFD_IOCTL_SVM_ATTR_SET_FLAGS, always),
        (KFD_IOCTL_SVM_ATTR_ACCESS, node_id),
    ]);
    let q = create(&emu, &args(good)).expect("a compute queue over an SVM save area");
    assert_eq!(destroy(&emu, q.queue_id), Ok(0));
    // Without GPU_ALWAYS_MAPPED, or without the GPU's access, or not SVM memory at all.
    let not_always = area(&[
        (KFD_IOCTL_SVM_ATTR_SET_FLAGS, flags),
        (KFD_IOCTL_SVM_ATTR_ACCESS, node_id),
    ]);
    assert_eq!(
        create(&emu, &args(not_always)).map(|_| ()),
        Err(Errno::INVAL)
    );
    let no_access = area(&[(KFD_IOCTL_SVM_ATTR_SET_FLAGS, always)]);
    assert_eq!(
        create(&emu, &args(no_access)).map(|_| ()),
        Err(Errno::INVAL)
    );
    // Every page counts: only the first half's range is accessible and always mapped.
    let half = area(&[]);
    let half_len = (len as u64 / 2) & !4095;
    let _ = svm_set(
        &emu,
        half,
        half_len,
        &[
            (KFD_IOCTL_SVM_ATTR_SET_FLAGS, always),
            (KFD_IOCTL_SVM_ATTR_ACCESS, node_id),
        ],
    );
    assert_eq!(create(&emu, &args(half)).map(|_| ()), Err(Errno::INVAL));
}

#[test]
fn gws_go_to_one_queue_per_process_and_gpu_and_come_back_with_it() {
    // kfd_ioctl_alloc_queue_gws → pqm_set_gws: "Only allow one queue per process can have
    // GWS assigned" (`qpd->num_gws`: EBUSY), taking them back when no queue has them is
    // EINVAL, `first_gws` is 0; pqm_clean_queue_resource gives them back with the queue.
    let emu = emu("mi210x8", 15);
    with_buffers(&emu);
    let a = kfd_ioctl_create_queue_args {
        queue_type: KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
        ..sdma_args(&emu)
    };
    let q0 = create(&emu, &a).expect("queue 0").queue_id;
    let q1 = create(&emu, &a).expect("queue 1").queue_id;
    let gws = |queue_id: u32, num_gws: u32| {
        let mut g = kfd_ioctl_alloc_queue_gws_args {
            queue_id,
            num_gws,
            first_gws: 0xdead,
            ..Default::default()
        };
        emu.ioctl(AMDKFD_IOC_ALLOC_QUEUE_GWS, &mut g)
            .map(|_| g.first_gws)
    };
    assert_eq!(
        gws(q0, 0),
        Err(Errno::INVAL),
        "no queue has GWS to give back"
    );
    assert_eq!(gws(q0, 1), Ok(0), "the first GWS entry is 0");
    assert_eq!(
        gws(q1, 64),
        Err(Errno::BUSY),
        "another queue of the process"
    );
    assert_eq!(gws(q0, 1), Err(Errno::BUSY), "the same queue again");
    assert_eq!(destroy(&emu, q0), Ok(0));
    assert_eq!(gws(q1, 64), Ok(0), "given back with the destroyed queue");
    assert_eq!(gws(q1, 0), Ok(0), "taken back");
    assert_eq!(gws(q1, 0), Err(Errno::INVAL));
    assert_eq!(gws(q1, 1), Ok(0));
}
