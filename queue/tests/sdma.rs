//! SDMA queues end to end: `kfd-queue` over `kfd-ioctl`, on kfd-emu (attached) by default —
//! each test is the same on an AMD GPU, where the kernel and the copy engine answer.
//!
//! What is proved: bytes copied by the engine between GTT, VRAM, USERPTR and SVM memory are
//! what the CPU and the GPU view read afterwards; fill, fence, atomic, timestamp and
//! poll-memory commands do what the packets say; a Signal command wakes WAIT_EVENTS; a copy to
//! an unmapped or read-only address is a VM fault (the SMI record and the memory event) and
//! then a stopped queue; the queue's limits and its doorbell offset are the kernel's.

use std::sync::Arc;
use std::time::Duration;

use kfd_emu::model::{Model, ModelConfig};
use kfd_ioctl::abi::{
    AllocMemFlags, KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE, KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
    KFD_IOCTL_SVM_LOCATION_SYSMEM, SmiEventMask, kfd_ioctl_svm_attribute,
};
use kfd_ioctl::smi::Record;
use kfd_ioctl::topology::Topology;
use kfd_ioctl::{BufferObject, Errno, EventKind, Kfd, WaitOutcome};
use kfd_queue::packet::{AtomicOp, PollFunc};
use kfd_queue::{Command, Error, QueueContext, SdmaEngine, SdmaQueue};

const WAIT: Duration = Duration::from_secs(10);

/// One process's view of the first GPU.
struct Env {
    model: Arc<Model>,
    kfd: Kfd,
    gpu_id: u32,
    context: Arc<QueueContext>,
    /// A free GPU VA range for the test's buffer objects.
    base: u64,
}

impl Env {
    /// A BO of `size` bytes at `base + offset`, mapped on the GPU.
    fn bo(&self, offset: u64, size: u64, flags: AllocMemFlags) -> BufferObject {
        let bo = self
            .kfd
            .alloc_memory_of_gpu(self.gpu_id, self.base + offset, size, flags)
            .expect("alloc");
        self.kfd
            .map_memory_to_gpu(&bo, &[self.gpu_id])
            .expect("map");
        bo
    }

    /// What the GPU reads at `va` (the model's GPU view).
    fn gpu_read(&self, va: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0u8; len];
        self.model
            .gpu_read(std::process::id() as i32, self.gpu_id, va, &mut buf)
            .expect("the GPU view reads it");
        buf
    }

    fn queue(&self) -> SdmaQueue {
        SdmaQueue::new(&self.context, self.gpu_id, SdmaEngine::Pcie, 4096).expect("SDMA queue")
    }
}

const GTT: AllocMemFlags = AllocMemFlags::GTT.union(AllocMemFlags::WRITABLE);
const VRAM: AllocMemFlags = AllocMemFlags::VRAM
    .union(AllocMemFlags::WRITABLE)
    .union(AllocMemFlags::PUBLIC);

/// Runs `f` attached to a fresh model of `cfg` (or on the hardware).
fn with_gpu_in(cfg: ModelConfig, f: impl FnOnce(&Env) + Send) {
    let model = Model::new(cfg).expect("model");
    let view = model.clone();
    kfd_emu::supervisor::run_attached(model, move || {
        let kfd = Kfd::open().expect("open");
        let topology = Topology::read().expect("topology");
        let gpu = topology.gpus().next().expect("a GPU").clone();
        let gpu_id = gpu.gpu_id().expect("gpu_id");
        kfd.acquire_vm(gpu_id, gpu.properties.drm_render_minor as u32)
            .expect("acquire_vm");
        let apertures = kfd.get_process_apertures().expect("apertures");
        let gpuvm_start = apertures
            .iter()
            .find(|a| a.gpu_id == gpu_id)
            .expect("aperture")
            .gpuvm
            .start;
        let context = QueueContext::new(&kfd, &topology).expect("context");
        f(&Env {
            model: view,
            kfd,
            gpu_id,
            context,
            base: gpuvm_start + (1 << 40),
        });
    })
    .expect("attach");
}

fn with_gpu(f: impl FnOnce(&Env) + Send) {
    with_gpu_in(ModelConfig::default(), f);
}

/// A pattern that tells offsets apart.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

#[test]
fn copies_between_gtt_and_vram_are_seen_by_the_cpu_and_the_gpu_view() {
    with_gpu(|env| {
        const LEN: usize = 3 << 20;
        let host = env.bo(0, 8 << 20, GTT);
        let vram = env.bo(16 << 20, 8 << 20, VRAM);
        let back = env.bo(32 << 20, 8 << 20, GTT);
        let data = pattern(LEN, 7);
        host.map_cpu().unwrap().write(0, &data).unwrap();
        let mut q = env.queue();
        // Host → device, device → device (within VRAM), device → host.
        let c = q.copy(vram.va(), host.va(), LEN as u64).unwrap();
        q.wait(c, WAIT).unwrap();
        let c = q
            .copy(vram.va() + (4 << 20), vram.va(), LEN as u64)
            .unwrap();
        q.wait(c, WAIT).unwrap();
        let c = q
            .copy(back.va() + 1, vram.va() + (4 << 20), LEN as u64)
            .unwrap();
        q.wait(c, WAIT).unwrap();
        let mut out = vec![0u8; LEN];
        back.map_cpu().unwrap().read(1, &mut out).unwrap();
        assert!(out == data, "device → host copy lost bytes");
        let mut vram_cpu = vec![0u8; LEN];
        vram.map_cpu()
            .unwrap()
            .read(4 << 20, &mut vram_cpu)
            .unwrap();
        assert!(vram_cpu == data, "the CPU sees the VRAM copy");
        assert!(env.gpu_read(vram.va(), LEN) == data, "the GPU sees it too");
        // Nothing beyond the copy was written.
        assert_eq!(env.gpu_read(back.va(), 1), [0]);
        assert_eq!(env.gpu_read(back.va() + 1 + LEN as u64, 1), [0]);
        // The engine consumed everything submitted.
        assert_eq!(q.read_pointer().unwrap(), q.write_pointer());
    });
}

#[test]
fn copies_larger_than_a_packet_are_split_and_complete() {
    with_gpu(|env| {
        // 9 MiB: three COPY_LINEAR packets of at most copy_max_bytes (4 MiB).
        const LEN: usize = 9 << 20;
        let src = env.bo(0, 16 << 20, GTT);
        let dst = env.bo(16 << 20, 16 << 20, VRAM);
        let data = pattern(LEN, 3);
        src.map_cpu().unwrap().write(0, &data).unwrap();
        let mut q = env.queue();
        let c = q.copy(dst.va(), src.va(), LEN as u64).unwrap();
        q.wait(c, WAIT).unwrap();
        assert!(env.gpu_read(dst.va(), LEN) == data);
    });
}

#[test]
fn userptr_and_svm_memory_are_copied_through_too() {
    with_gpu(|env| {
        let layout = std::alloc::Layout::from_size_align(64 << 10, 4096).unwrap();
        // SAFETY: a fresh allocation of a non-zero size, freed at the end of the test after
        // every buffer object and SVM range over it is gone.
        let user = unsafe { std::alloc::alloc_zeroed(layout) };
        let svm = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!user.is_null() && !svm.is_null());
        let (user_va, svm_va) = (user as u64, svm as u64);
        let data = pattern(16 << 10, 9);
        // SAFETY: `svm` is this test's allocation, 64 KiB; nothing else uses it.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), svm, data.len()) };
        {
            // SAFETY: `user` is this test's allocation, live until after the BO is freed at
            // the end of this block; it is read only with volatile reads while the GPU writes.
            let userptr = unsafe {
                env.kfd.alloc_userptr(
                    env.gpu_id,
                    user_va,
                    user_va,
                    64 << 10,
                    AllocMemFlags::WRITABLE,
                )
            }
            .expect("USERPTR");
            env.kfd.map_memory_to_gpu(&userptr, &[env.gpu_id]).unwrap();
            let attrs = [
                kfd_ioctl_svm_attribute {
                    r#type: KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
                    value: KFD_IOCTL_SVM_LOCATION_SYSMEM,
                },
                kfd_ioctl_svm_attribute {
                    r#type: KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE,
                    value: env.gpu_id,
                },
            ];
            // SAFETY: the range is this test's allocation, live for the rest of the test.
            unsafe { env.kfd.svm_set_attr(svm_va, 64 << 10, &attrs) }.expect("SVM range");
            let mut q = env.queue();
            // SVM → USERPTR.
            let c = q.copy(user_va + 4096, svm_va, data.len() as u64).unwrap();
            q.wait(c, WAIT).unwrap();
            let mut seen = vec![0u8; data.len()];
            for (i, b) in seen.iter_mut().enumerate() {
                // SAFETY: inside `user`, read volatile: the GPU wrote it.
                *b = unsafe { user.add(4096 + i).read_volatile() };
            }
            assert!(seen == data, "the CPU sees the USERPTR copy");
            assert!(env.gpu_read(user_va + 4096, data.len()) == data);
            drop(q);
            env.kfd.free_memory_of_gpu(userptr).expect("free");
        }
        // SAFETY: allocated above with `layout`; nothing refers to them any more.
        unsafe {
            std::alloc::dealloc(user, layout);
            std::alloc::dealloc(svm, layout);
        }
    });
}

#[test]
fn fill_fence_atomic_and_timestamp_do_what_their_packets_say() {
    with_gpu(|env| {
        let mem = env.bo(0, 1 << 20, GTT);
        let cpu = mem.map_cpu().unwrap();
        cpu.write(0x100, &40u64.to_le_bytes()).unwrap();
        cpu.write(0x108, &5u64.to_le_bytes()).unwrap();
        let mut q = env.queue();
        let va = mem.va();
        let c = q
            .submit(&[
                Command::Fill {
                    dst: va + 0x1000,
                    value: 0xA5A5_0001,
                    bytes: 0x2000,
                },
                Command::Fence {
                    addr: va + 0x40,
                    value: 0x1234_5678,
                },
                Command::Atomic {
                    op: AtomicOp::Add64,
                    addr: va + 0x100,
                    src: 2,
                    cmp: 0,
                },
                Command::Atomic {
                    op: AtomicOp::CompareSwap64,
                    addr: va + 0x108,
                    src: 99,
                    cmp: 5,
                },
                Command::Atomic {
                    op: AtomicOp::CompareSwap64,
                    addr: va + 0x100,
                    src: 7,
                    cmp: 0,
                },
                Command::Timestamp { addr: va + 0x200 },
                Command::Timestamp { addr: va + 0x208 },
            ])
            .unwrap();
        q.wait(c, WAIT).unwrap();
        let read = |at: usize, n: usize| {
            let mut b = vec![0u8; n];
            cpu.read(at, &mut b).unwrap();
            b
        };
        let fill = read(0x1000, 0x2000);
        assert!(
            fill.chunks(4).all(|d| d == 0xA5A5_0001u32.to_le_bytes()),
            "every dword filled"
        );
        assert_eq!(read(0x1000 + 0x2000, 4), [0; 4], "and no further");
        assert_eq!(read(0x40, 4), 0x1234_5678u32.to_le_bytes());
        let u64_at = |at| u64::from_le_bytes(read(at, 8).try_into().unwrap());
        assert_eq!(
            u64_at(0x100),
            42,
            "add, then a compare-swap that did not match"
        );
        assert_eq!(u64_at(0x108), 99, "a compare-swap that matched");
        let (t0, t1) = (u64_at(0x200), u64_at(0x208));
        assert!(t0 > 0 && t1 >= t0, "timestamps {t0} then {t1}");
    });
}

#[test]
fn poll_memory_holds_the_queue_until_the_value_arrives() {
    with_gpu(|env| {
        let mem = env.bo(0, 4096, GTT);
        let cpu = mem.map_cpu().unwrap();
        let mut q = env.queue();
        let c = q
            .submit(&[
                Command::PollMemory {
                    addr: mem.va(),
                    value: 1,
                    mask: 0xFF,
                    func: PollFunc::Equal,
                },
                Command::Fence {
                    addr: mem.va() + 8,
                    value: 77,
                },
            ])
            .unwrap();
        // The condition does not hold: nothing after the poll runs.
        match q.wait(c, Duration::from_millis(100)) {
            Err(Error::Timeout(_)) => {}
            other => panic!("expected a timeout, got {other:?}"),
        }
        let mut fence = [0u8; 4];
        cpu.read(8, &mut fence).unwrap();
        assert_eq!(fence, [0; 4]);
        // Bits outside the mask do not count; then the value arrives.
        cpu.write(0, &0x0000_0101u32.to_le_bytes()).unwrap();
        q.wait(c, WAIT).unwrap();
        cpu.read(8, &mut fence).unwrap();
        assert_eq!(u32::from_le_bytes(fence), 77);
    });
}

#[test]
fn a_signal_command_wakes_wait_events_and_the_ring_wraps() {
    with_gpu(|env| {
        let mut q = env.queue();
        let (event, _) = q.signal_event().unwrap();
        // Not set before anything ran.
        assert_eq!(
            env.kfd.wait_events(&[&event], false, 0).unwrap(),
            WaitOutcome::Timeout
        );
        // Enough submissions to go round the 4 KiB ring several times.
        let mut last = None;
        for _ in 0..300 {
            last = Some(q.submit(&[Command::Signal(&event)]).unwrap());
            match env.kfd.wait_events(&[&event], false, 10_000).unwrap() {
                WaitOutcome::Complete(_) => {}
                WaitOutcome::Timeout => panic!("the trap did not wake WAIT_EVENTS"),
            }
        }
        q.wait(last.unwrap(), WAIT).unwrap();
        assert!(
            q.write_pointer() > 4 * q.ring_size() as u64,
            "the ring wrapped"
        );
        assert_eq!(q.read_pointer().unwrap(), q.write_pointer());
    });
}

#[test]
fn a_copy_to_an_unmapped_address_is_a_vm_fault_then_a_stopped_queue() {
    with_gpu(|env| {
        let mut smi = env.kfd.smi_events(env.gpu_id).unwrap();
        smi.set_mask(SmiEventMask::VMFAULT).unwrap();
        let src = env.bo(0, 1 << 20, GTT);
        let unmapped = env.base + (64 << 20);
        let mut q = env.queue();
        let before = q.write_pointer();
        let c = q.copy(unmapped + 0x123, src.va(), 4096).unwrap();
        match q.wait(c, WAIT) {
            Err(Error::VmFault(f)) => {
                assert_eq!(f.gpu_id, env.gpu_id);
                assert_eq!(f.va, unmapped, "the faulting page");
                assert!(f.not_present && !f.read_only);
            }
            other => panic!("expected a VM fault, got {other:?}"),
        }
        // The SMI client saw the fault.
        let mut faults = 0;
        while let Some(line) = smi.read_line().unwrap() {
            if let Ok(Record::VmFault { .. }) = Record::parse(&line) {
                faults += 1;
            }
        }
        assert_eq!(faults, 1, "one VMFAULT record");
        // The queue stopped at the faulting packet: what follows never runs.
        assert_eq!(q.read_pointer().unwrap(), before);
        let fence = q
            .submit(&[Command::Fence {
                addr: src.va(),
                value: 1,
            }])
            .unwrap();
        assert!(matches!(q.wait(fence, WAIT), Err(Error::VmFault(_))));
        assert!(!q.is_done(fence).unwrap());
        assert_eq!(q.read_pointer().unwrap(), before);
    });
}

#[test]
fn a_write_to_read_only_memory_faults_as_read_only() {
    with_gpu(|env| {
        let src = env.bo(0, 4096, GTT);
        let read_only = env.bo(1 << 20, 4096, AllocMemFlags::GTT);
        let mut q = env.queue();
        let c = q.copy(read_only.va(), src.va(), 64).unwrap();
        match q.wait(c, WAIT) {
            Err(Error::VmFault(f)) => assert!(f.read_only, "{f:?}"),
            other => panic!("expected a VM fault, got {other:?}"),
        }
        assert_eq!(env.gpu_read(read_only.va(), 64), vec![0; 64]);
    });
}

#[test]
fn sdma_queues_run_out_and_xgmi_queues_need_xgmi_engines() {
    // MI100: 2 PCIe SDMA engines with 8 queues each, and 6 xGMI engines.
    let cfg = ModelConfig {
        machine: kfd_emu::machine::Machine::preset("mi100").unwrap(),
        ..ModelConfig::default()
    };
    with_gpu_in(cfg, |env| {
        let mut queues = Vec::new();
        let err = loop {
            match SdmaQueue::new(&env.context, env.gpu_id, SdmaEngine::Pcie, 4096) {
                Ok(q) => queues.push(q),
                Err(e) => break e,
            }
            assert!(
                queues.len() <= 16,
                "more PCIe SDMA queues than the engines have"
            );
        };
        assert_eq!(queues.len(), 16);
        assert!(
            matches!(&err, Error::Kfd(e) if e.errno() == Some(Errno::NOMEM)),
            "{err}"
        );
        // xGMI engines still have queues; a queue per engine id too.
        let x = SdmaQueue::new(&env.context, env.gpu_id, SdmaEngine::Xgmi, 4096).unwrap();
        let by_id = SdmaQueue::new(&env.context, env.gpu_id, SdmaEngine::Id(7), 4096).unwrap();
        let past = SdmaQueue::new(&env.context, env.gpu_id, SdmaEngine::Id(8), 4096);
        assert!(matches!(&past, Err(Error::Kfd(e)) if e.errno() == Some(Errno::INVAL)));
        // Every queue runs: a copy on the xGMI one.
        let mem = env.bo(0, 4096, GTT);
        let mut x = x;
        let c = x
            .submit(&[Command::Fence {
                addr: mem.va(),
                value: 3,
            }])
            .unwrap();
        x.wait(c, WAIT).unwrap();
        drop((by_id, x));
        // Destroying one gives its slot back.
        queues.pop();
        SdmaQueue::new(&env.context, env.gpu_id, SdmaEngine::Pcie, 4096).unwrap();
    });
    // A GPU without xGMI engines (RX 7900 XTX): no xGMI queue.
    let cfg = ModelConfig {
        machine: kfd_emu::machine::Machine::preset("rx7900xtx").unwrap(),
        ..ModelConfig::default()
    };
    with_gpu_in(cfg, |env| {
        let err = SdmaQueue::new(&env.context, env.gpu_id, SdmaEngine::Xgmi, 4096).unwrap_err();
        assert!(
            matches!(&err, Error::Kfd(e) if e.errno() == Some(Errno::NOMEM)),
            "{err}"
        );
    });
}

#[test]
fn memory_events_only_fire_on_faults() {
    with_gpu(|env| {
        let memory = env.kfd.create_event(EventKind::Memory, false).unwrap();
        let mem = env.bo(0, 4096, GTT);
        let mut q = env.queue();
        let c = q
            .submit(&[Command::Fence {
                addr: mem.va(),
                value: 1,
            }])
            .unwrap();
        q.wait(c, WAIT).unwrap();
        assert_eq!(
            env.kfd.wait_events(&[&memory], false, 0).unwrap(),
            WaitOutcome::Timeout
        );
        memory.close().unwrap();
    });
}
