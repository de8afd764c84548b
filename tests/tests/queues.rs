//! User-mode queues end to end: `kfd-ioctl`'s `Queue` and events and `kfd-queue`'s SDMA
//! queues, on kfd-emu's machines and on the hardware when there is one.
//!
//! What is proved: `Kfd::create_queue` checks its buffers, a dropped `Queue` frees its SDMA
//! slot, the queue ioctls say the kernel's errnos; bytes the copy engine moves between GTT,
//! VRAM, USERPTR and SVM memory are what the CPU (and, emulated, the GPU view) reads; fill,
//! fence, atomic, timestamp and poll-memory commands do what their packets say; a Signal
//! command wakes WAIT_EVENTS while the ring wraps; a copy to an unmapped or read-only address
//! is a VM fault (SMI record, memory event) and then a stopped queue, with the process's
//! other queues on the GPU and every queue made there later dead; SDMA queues run out at
//! the topology's count, and xGMI queues need xGMI engines.

use std::sync::Arc;
use std::time::Duration;

use kfd_emu::model::Model;
use kfd_ioctl::abi::{
    AllocMemFlags, KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE, KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
    KFD_IOCTL_SVM_LOCATION_SYSMEM, SmiEventMask, kfd_ioctl_svm_attribute,
};
use kfd_ioctl::smi::Record;
use kfd_ioctl::topology::{Node, Topology};
use kfd_ioctl::{
    BufferObject, Errno, Error as KfdError, EventKind, Kfd, QueueBuffer, QueueSpec, QueueType,
    WaitOutcome,
};
use kfd_queue::packet::{AtomicOp, PollFunc};
use kfd_queue::{Command, Error, QueueContext, SdmaEngine, SdmaQueue};
use kfd_tests::{Target, VaReservation, on_every_target};

/// One gfx9 (SDMA 4.x), one gfx94x (4.4.2), one gfx908 with xGMI engines, one gfx11 (6.x).
const MACHINES: &[&str] = &["radeon-vii", "mi300x", "mi100", "rx7900xtx"];
const WAIT: Duration = Duration::from_secs(10);
const GTT: AllocMemFlags = AllocMemFlags::GTT.union(AllocMemFlags::WRITABLE);
const VRAM: AllocMemFlags = AllocMemFlags::VRAM
    .union(AllocMemFlags::WRITABLE)
    .union(AllocMemFlags::PUBLIC);

/// This process on the first GPU of a target.
struct Env {
    name: String,
    kfd: Kfd,
    node: Node,
    gpu_id: kfd_ioctl::GpuId,
    context: Arc<QueueContext>,
    /// GPU addresses for the test's buffer objects, reserved in the CPU address space.
    va: VaReservation,
    /// The emulator, for the GPU view; `None` on hardware.
    model: Option<Arc<Model>>,
}

fn open(target: &Target) -> Env {
    let name = target.name();
    let kfd = Kfd::open().unwrap_or_else(|e| panic!("{name}: {e}"));
    let topology = Topology::read().unwrap_or_else(|e| panic!("{name}: {e}"));
    let node = topology.gpus().next().expect("a GPU").clone();
    let gpu_id = node.gpu_id().expect("gpu_id");
    kfd.acquire_vm(gpu_id, node.properties.drm_render_minor as u32)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let context = QueueContext::new(&kfd, &topology).unwrap_or_else(|e| panic!("{name}: {e}"));
    let model = match target {
        Target::Emulated { model, .. } => Some(model.clone()),
        Target::Hardware => None,
    };
    Env {
        name,
        kfd,
        node,
        gpu_id,
        context,
        va: VaReservation::new(1 << 30, 2 << 20),
        model,
    }
}

impl Env {
    /// A BO of `size` bytes at `offset` in the test's range, mapped on the GPU.
    fn bo(&self, offset: u64, size: u64, flags: AllocMemFlags) -> BufferObject {
        let bo = self
            .kfd
            .alloc_memory_of_gpu(self.gpu_id, self.va.addr() + offset, size, flags)
            .unwrap_or_else(|e| panic!("{}: {e}", self.name));
        self.kfd
            .map_memory_to_gpu(&bo, &[self.gpu_id])
            .unwrap_or_else(|e| panic!("{}: {e}", self.name));
        bo
    }

    /// Checks that the GPU reads `want` at `va` (emulated targets only: the model's view).
    fn assert_gpu_sees(&self, va: u64, want: &[u8]) {
        let Some(model) = &self.model else { return };
        let mut buf = vec![0u8; want.len()];
        model
            .gpu_read(std::process::id() as i32, self.gpu_id.get(), va, &mut buf)
            .unwrap_or_else(|e| panic!("{}: {e}", self.name));
        assert!(buf == want, "{}: the GPU view at {va:#x}", self.name);
    }

    fn queue(&self) -> SdmaQueue {
        SdmaQueue::new(&self.context, self.gpu_id, SdmaEngine::Pcie, 4096)
            .unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }

    /// An SDMA queue spec over a fresh 4 KiB ring and pointer page at `slot`.
    fn spec(&self, slot: u64) -> QueueSpec {
        let ring = Arc::new(self.bo(slot << 20, 4096, GTT));
        let pointers = Arc::new(self.bo((slot << 20) + 65536, 4096, GTT));
        QueueSpec {
            gpu_id: self.gpu_id,
            queue_type: QueueType::Sdma,
            percentage: 100,
            priority: 7,
            ring: QueueBuffer::start_of(ring),
            ring_size: 4096,
            read_pointer: QueueBuffer::start_of(pointers.clone()),
            write_pointer: QueueBuffer {
                bo: pointers,
                offset: 8,
            },
            compute: None,
        }
    }

    /// The GPU's user SDMA queues: (PCIe engines, xGMI engines, queues per engine).
    fn sdma_engines(&self) -> (u64, u64, u64) {
        let p = &self.node.properties;
        (
            p.num_sdma_engines.unwrap_or(0),
            p.num_sdma_xgmi_engines.unwrap_or(0),
            p.num_sdma_queues_per_engine.unwrap_or(0),
        )
    }
}

/// The queue's read pointer reaches its write pointer (within [`WAIT`]). A completion fence
/// precedes the trap packet each submission ends with: the engine, on hardware too, writes
/// the read pointer past the trap a moment after the fence a wait saw.
fn assert_consumed(q: &SdmaQueue) {
    let deadline = std::time::Instant::now() + WAIT;
    while q.read_pointer().unwrap() != q.write_pointer() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(q.read_pointer().unwrap(), q.write_pointer());
}

/// A pattern that tells offsets apart.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

fn errno_of<T: std::fmt::Debug>(r: Result<T, KfdError>) -> Option<Errno> {
    r.expect_err("an error").errno()
}

fn invalid<T: std::fmt::Debug>(r: Result<T, KfdError>) -> bool {
    matches!(r, Err(KfdError::InvalidArgument { .. }))
}

#[test]
fn create_queue_checks_its_buffers_and_a_dropped_queue_frees_its_slot() {
    on_every_target(MACHINES, |target| {
        let env = open(target);
        let ok = env.spec(0);
        // The ring page aligned, ring_size bytes in its BO; the pointers 8-aligned in theirs;
        // a compute queue with its EOP and CWSR buffers: checked before the call.
        let mut s = ok.clone();
        s.ring.offset = 256;
        assert!(invalid(env.kfd.create_queue(&s)));
        let mut s = ok.clone();
        s.ring_size = 8192;
        assert!(invalid(env.kfd.create_queue(&s)));
        let mut s = ok.clone();
        s.write_pointer.offset = 4092;
        assert!(invalid(env.kfd.create_queue(&s)));
        let mut s = ok.clone();
        s.queue_type = QueueType::ComputeAql;
        assert!(invalid(env.kfd.create_queue(&s)));
        // The kernel's own: a priority above KFD_MAX_QUEUE_PRIORITY.
        let mut s = ok.clone();
        s.priority = 16;
        assert_eq!(errno_of(env.kfd.create_queue(&s)), Some(Errno::INVAL));
        // Every PCIe SDMA queue, then ENOMEM; dropping them frees the slots.
        let (pcie, _, per_engine) = env.sdma_engines();
        let total = pcie * per_engine;
        let specs: Vec<QueueSpec> = (0..=total).map(|i| env.spec(i + 1)).collect();
        let mut queues = Vec::new();
        let last = specs.iter().find_map(|s| match env.kfd.create_queue(s) {
            Ok(q) => {
                queues.push(q);
                None
            }
            Err(e) => Some(e),
        });
        let last = last.unwrap_or_else(|| panic!("{}: more than {total} queues", env.name));
        assert_eq!(last.errno(), Some(Errno::NOMEM), "{}", env.name);
        if env.model.is_some() {
            assert_eq!(queues.len() as u64, total, "{}", env.name);
        }
        let n = queues.len();
        drop(queues);
        for s in &specs[..n] {
            let q = env.kfd.create_queue(s);
            let q = q.unwrap_or_else(|e| panic!("{}: the slot is free again: {e}", env.name));
            q.close().unwrap();
        }
    });
}

#[test]
fn queue_ioctls_say_the_kernels_errnos() {
    on_every_target(MACHINES, |target| {
        let env = open(target);
        let q = env.kfd.create_queue(&env.spec(0)).expect("a queue");
        q.update_queue(50, 3).expect("update");
        assert_eq!(errno_of(q.update_queue(101, 3)), Some(Errno::INVAL));
        q.set_cu_mask(&[u32::MAX; 4]).expect("CU mask");
        assert!(invalid(q.set_cu_mask(&[])));
        // GWS are for compute queues (or the GPU has none).
        let gws = errno_of(q.alloc_queue_gws(1));
        assert!(matches!(gws, Some(Errno::INVAL | Errno::NODEV)), "{gws:?}");
        // The queue's doorbell is in the doorbell page; the page refuses other stores.
        let gfx = env.node.gfx_target_version().expect("gfx").major;
        let doorbells = env
            .kfd
            .map_doorbells(env.gpu_id, gfx, env.va.addr() + (900 << 20))
            .expect("doorbells");
        assert_eq!(doorbells.doorbell_size(), 8);
        let at = q.doorbell_in_page(&doorbells);
        assert!(at < doorbells.len() && at.is_multiple_of(8));
        assert!(invalid(doorbells.ring(doorbells.len(), 0)));
        assert!(invalid(doorbells.ring(4, 0)));
        q.close().expect("close");
    });
}

#[test]
fn events_are_set_waited_for_reset_and_closed() {
    on_every_target(&["mi300x"], |target| {
        let env = open(target);
        let e = env.kfd.create_event(EventKind::Signal, false).unwrap();
        assert!(e.slot().is_some());
        assert_eq!(
            env.kfd.wait_events(&[&e], false, 0).unwrap(),
            WaitOutcome::Timeout
        );
        e.set().unwrap();
        let complete = |r| matches!(r, WaitOutcome::Complete(_));
        assert!(complete(env.kfd.wait_events(&[&e], true, 1000).unwrap()));
        // Not auto-reset: set until reset.
        assert!(complete(env.kfd.wait_events(&[&e], false, 0).unwrap()));
        e.reset().unwrap();
        assert_eq!(
            env.kfd.wait_events(&[&e], false, 0).unwrap(),
            WaitOutcome::Timeout
        );
        // A memory event cannot be set from the CPU.
        let m = env.kfd.create_event(EventKind::Memory, false).unwrap();
        assert_eq!(errno_of(m.set()), Some(Errno::INVAL));
        assert!(invalid(env.kfd.wait_events(&[], false, 0)));
        e.close().unwrap();
        m.close().unwrap();
    });
}

#[test]
fn copies_between_gtt_and_vram_are_seen_by_the_cpu_and_the_gpu() {
    on_every_target(MACHINES, |target| {
        let env = open(target);
        // 9 MiB: three COPY_LINEAR packets of at most copy_max_bytes (4 MiB) each.
        const LEN: usize = 9 << 20;
        let host = env.bo(0, 16 << 20, GTT);
        let vram = env.bo(16 << 20, 32 << 20, VRAM);
        let back = env.bo(48 << 20, 16 << 20, GTT);
        let data = pattern(LEN, 7);
        host.map_cpu().unwrap().write_slice(&data, 0).unwrap();
        let mut q = env.queue();
        // Host → device, device → device, device → host (at an odd offset).
        let c = q.copy(vram.va(), host.va(), LEN as u64).unwrap();
        q.wait(c, WAIT).unwrap();
        let c = q
            .copy(vram.va() + (16 << 20), vram.va(), LEN as u64)
            .unwrap();
        q.wait(c, WAIT).unwrap();
        let c = q
            .copy(back.va() + 1, vram.va() + (16 << 20), LEN as u64)
            .unwrap();
        q.wait(c, WAIT).unwrap();
        let mut out = vec![0u8; LEN + 2];
        back.map_cpu().unwrap().read_slice(&mut out, 0).unwrap();
        assert!(out[1..=LEN] == data[..], "{}: device → host", env.name);
        assert_eq!((out[0], out[LEN + 1]), (0, 0), "nothing beyond the copy");
        let mut seen = vec![0u8; LEN];
        vram.map_cpu()
            .unwrap()
            .read_slice(&mut seen, 16 << 20)
            .unwrap();
        assert!(seen == data, "{}: the CPU sees the VRAM copy", env.name);
        env.assert_gpu_sees(vram.va(), &data);
        assert_consumed(&q);
    });
}

#[test]
fn userptr_and_svm_memory_are_copied_through_too() {
    on_every_target(&["mi300x", "radeon-vii"], |target| {
        let env = open(target);
        let layout = std::alloc::Layout::from_size_align(64 << 10, 4096).unwrap();
        // SAFETY: a non-zero size; freed at the end, after every BO and range over it.
        let user = unsafe { std::alloc::alloc_zeroed(layout) };
        // SAFETY: as above.
        let svm = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!user.is_null() && !svm.is_null());
        let (user_va, svm_va) = (user as u64, svm as u64);
        let data = pattern(16 << 10, 9);
        // SAFETY: `svm` is this test's 64 KiB allocation; nothing else uses it yet.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), svm, data.len()) };
        // SAFETY: `user` lives until after the BO is freed below; the CPU reads it only with
        // volatile reads once the GPU writes it.
        let userptr = unsafe {
            env.kfd.alloc_userptr(
                env.gpu_id,
                user_va,
                user_va,
                64 << 10,
                AllocMemFlags::WRITABLE,
            )
        }
        .unwrap_or_else(|e| panic!("{}: {e}", env.name));
        env.kfd.map_memory_to_gpu(&userptr, &[env.gpu_id]).unwrap();
        let attrs = [
            kfd_ioctl_svm_attribute {
                r#type: KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
                value: KFD_IOCTL_SVM_LOCATION_SYSMEM,
            },
            kfd_ioctl_svm_attribute {
                r#type: KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE,
                value: env.gpu_id.get(),
            },
        ];
        // SAFETY: the range is this test's allocation, live for the rest of the test.
        unsafe { env.kfd.svm_set_attr(svm_va, 64 << 10, &attrs) }
            .unwrap_or_else(|e| panic!("{}: {e}", env.name));
        let mut q = env.queue();
        let c = q.copy(user_va + 4096, svm_va, data.len() as u64).unwrap();
        q.wait(c, WAIT).unwrap();
        let seen: Vec<u8> = (0..data.len())
            // SAFETY: inside `user`; volatile, as the GPU wrote it.
            .map(|i| unsafe { user.add(4096 + i).read_volatile() })
            .collect();
        assert!(seen == data, "{}: SVM → USERPTR", env.name);
        env.assert_gpu_sees(user_va + 4096, &data);
        drop(q);
        env.kfd.free_memory_of_gpu(userptr).expect("free");
        // SAFETY: allocated above with `layout`; no BO or mapping refers to them any more
        // (the SVM range goes with the memory's unmapping, as the kernel's does).
        unsafe {
            std::alloc::dealloc(user, layout);
            std::alloc::dealloc(svm, layout);
        }
    });
}

#[test]
fn fill_fence_atomic_and_timestamp_do_what_their_packets_say() {
    on_every_target(MACHINES, |target| {
        let env = open(target);
        let mem = env.bo(0, 1 << 20, GTT);
        let cpu = mem.map_cpu().unwrap();
        cpu.write_slice(&40u64.to_le_bytes(), 0x100).unwrap();
        cpu.write_slice(&5u64.to_le_bytes(), 0x108).unwrap();
        let mut q = env.queue();
        let va = mem.va();
        let atomic = |op, at, src, cmp| Command::Atomic {
            op,
            addr: va + at,
            src,
            cmp,
        };
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
                atomic(AtomicOp::Add64, 0x100, 2, 0),
                atomic(AtomicOp::CompareSwap64, 0x108, 99, 5),
                atomic(AtomicOp::CompareSwap64, 0x100, 7, 0),
                Command::Timestamp { addr: va + 0x200 },
                Command::Timestamp { addr: va + 0x208 },
            ])
            .unwrap();
        q.wait(c, WAIT).unwrap();
        let read = |at: usize, n: usize| {
            let mut b = vec![0u8; n];
            cpu.read_slice(&mut b, at).unwrap();
            b
        };
        let fill = read(0x1000, 0x2004);
        assert!(
            fill[..0x2000]
                .chunks(4)
                .all(|d| d == 0xA5A5_0001u32.to_le_bytes())
        );
        assert_eq!(
            fill[0x2000..],
            [0; 4],
            "{}: the fill stops at its size",
            env.name
        );
        assert_eq!(read(0x40, 4), 0x1234_5678u32.to_le_bytes());
        let u64_at = |at| u64::from_le_bytes(read(at, 8).try_into().unwrap());
        assert_eq!(
            u64_at(0x100),
            42,
            "add, then a compare-swap that did not match"
        );
        assert_eq!(u64_at(0x108), 99, "a compare-swap that matched");
        let (t0, t1) = (u64_at(0x200), u64_at(0x208));
        assert!(
            t0 > 0 && t1 >= t0,
            "{}: timestamps {t0} then {t1}",
            env.name
        );
    });
}

#[test]
fn poll_memory_holds_the_queue_until_the_value_arrives() {
    on_every_target(MACHINES, |target| {
        let env = open(target);
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
        match q.wait(c, Duration::from_millis(100)) {
            Err(Error::Timeout(_)) => {}
            other => panic!("{}: expected a timeout, got {other:?}", env.name),
        }
        let mut fence = [0u8; 4];
        cpu.read_slice(&mut fence, 8).unwrap();
        assert_eq!(fence, [0; 4], "nothing after the poll ran");
        // Bits outside the mask do not count.
        cpu.write_slice(&0x0000_0101u32.to_le_bytes(), 0).unwrap();
        q.wait(c, WAIT).unwrap();
        cpu.read_slice(&mut fence, 8).unwrap();
        assert_eq!(u32::from_le_bytes(fence), 77);
    });
}

#[test]
fn a_signal_command_wakes_wait_events_while_the_ring_wraps() {
    on_every_target(MACHINES, |target| {
        let env = open(target);
        let mut q = env.queue();
        let (event, _) = q.signal_event().unwrap();
        assert_eq!(
            env.kfd.wait_events(&[&event], false, 0).unwrap(),
            WaitOutcome::Timeout
        );
        let mut last = None;
        for _ in 0..300 {
            last = Some(q.submit(&[Command::Signal(&event)]).unwrap());
            let woke = env.kfd.wait_events(&[&event], false, 10_000).unwrap();
            assert!(matches!(woke, WaitOutcome::Complete(_)), "{}", env.name);
        }
        q.wait(last.unwrap(), WAIT).unwrap();
        assert!(
            q.write_pointer() > 4 * q.ring_size() as u64,
            "the ring wrapped"
        );
        assert_consumed(&q);
    });
}

#[test]
fn a_copy_to_an_unmapped_address_is_a_vm_fault_then_a_stopped_queue() {
    on_every_target(MACHINES, |target| {
        let env = open(target);
        let mut smi = env.kfd.smi_events(env.gpu_id).unwrap();
        smi.set_mask(SmiEventMask::VMFAULT).unwrap();
        let src = env.bo(0, 1 << 20, GTT);
        let unmapped = env.va.addr() + (512 << 20);
        let mut q = env.queue();
        let mut other = env.queue();
        let before = q.write_pointer();
        let c = q.copy(unmapped + 0x123, src.va(), 4096).unwrap();
        // First the fault: the memory event with the faulting page.
        match q.wait(c, WAIT) {
            Err(Error::VmFault(f)) => {
                assert_eq!(f.gpu_id, env.gpu_id);
                assert_eq!(f.va, unmapped, "{}: the faulting page", env.name);
                assert!(f.not_present && !f.read_only);
            }
            other => panic!("{}: expected a VM fault, got {other:?}", env.name),
        }
        let mut faults = 0;
        while let Some(line) = smi.read_line().unwrap() {
            if let Ok(Record::VmFault { .. }) = Record::parse(&line) {
                faults += 1;
            }
        }
        assert!(faults >= 1, "{}: an SMI VMFAULT record", env.name);
        // Then the queue error: it stopped at the faulting packet, and is dead: it takes no
        // more work and says so, naming the fault (kfd_dqm_evict_pasid evicted the process's
        // queues on the GPU and nothing restores them).
        assert_eq!(q.read_pointer().unwrap(), before);
        assert_eq!(q.dead().map(|f| f.va), Some(unmapped));
        let dead = q
            .submit(&[Command::Fence {
                addr: src.va(),
                value: 1,
            }])
            .unwrap_err();
        assert!(
            matches!(dead, Error::QueueDead(f) if f.va == unmapped),
            "{}: {dead}",
            env.name
        );
        let text = dead.to_string();
        assert!(
            text.contains("is dead") && text.contains("new process"),
            "says it is dead and what to do: {text}"
        );
        assert!(matches!(q.wait(c, WAIT), Err(Error::QueueDead(_))));
        assert_eq!(q.read_pointer().unwrap(), before);
        // The process's other queues on the GPU were evicted with it (kfd_dqm_evict_pasid).
        let fence = other
            .submit(&[Command::Fence {
                addr: src.va(),
                value: 2,
            }])
            .unwrap();
        assert!(matches!(other.wait(fence, WAIT), Err(Error::VmFault(_))));
        assert_eq!(other.read_pointer().unwrap(), 0);
        // A queue made on the GPU afterwards is created evicted (create_queue_cpsch with
        // qpd->evicted raised for good) and never runs: it is dead from the start, naming
        // the fault.
        let mut later = env.queue();
        assert_eq!(later.dead().map(|f| f.va), Some(unmapped), "{}", env.name);
        let refused = later
            .submit(&[Command::Fence {
                addr: src.va(),
                value: 3,
            }])
            .unwrap_err();
        assert!(
            matches!(refused, Error::QueueDead(f) if f.va == unmapped),
            "{}: {refused}",
            env.name
        );
        assert_eq!(later.read_pointer().unwrap(), 0);
    });
}

/// A queue made after a VM fault that no queue's wait has reported yet is dead from the
/// start too: the context's own memory event saw the fault (kfd_signal_vm_fault_event sets
/// every memory event of the process), and the kernel creates the queue evicted.
#[test]
fn a_queue_made_after_a_fault_nobody_waited_for_is_dead() {
    on_every_target(&["mi300x"], |target| {
        let env = open(target);
        let src = env.bo(0, 4096, GTT);
        let unmapped = env.va.addr() + (512 << 20);
        let watch = env.kfd.create_event(EventKind::Memory, false).unwrap();
        let mut q = env.queue();
        let c = q.copy(unmapped, src.va(), 4096).unwrap();
        // The fault, seen through an event of the test's own, not the queue's wait.
        match env.kfd.wait_events(&[&watch], false, 10_000).unwrap() {
            WaitOutcome::Complete(f) => {
                assert_eq!(f[0].map(|f| f.va), Some(unmapped), "{}", env.name)
            }
            WaitOutcome::Timeout => panic!("{}: no VM fault", env.name),
        }
        let mut later = env.queue();
        assert_eq!(later.dead().map(|f| f.va), Some(unmapped), "{}", env.name);
        assert!(matches!(
            later.submit(&[Command::Fence {
                addr: src.va(),
                value: 1
            }]),
            Err(Error::QueueDead(_))
        ));
        // The faulting queue's own wait still reports the fault itself first.
        assert!(q.dead().is_none());
        assert!(!q.is_done(c).unwrap());
        assert!(matches!(q.wait(c, WAIT), Err(Error::VmFault(_))));
    });
}

#[test]
fn a_write_to_read_only_memory_faults_as_read_only() {
    on_every_target(&["mi300x"], |target| {
        let env = open(target);
        let src = env.bo(0, 4096, GTT);
        let read_only = env.bo(1 << 20, 4096, AllocMemFlags::GTT);
        let mut q = env.queue();
        let c = q.copy(read_only.va(), src.va(), 64).unwrap();
        match q.wait(c, WAIT) {
            Err(Error::VmFault(f)) => assert!(f.read_only, "{f:?}"),
            other => panic!("{}: expected a VM fault, got {other:?}", env.name),
        }
        env.assert_gpu_sees(read_only.va(), &[0; 64]);
    });
}

#[test]
fn xgmi_queues_need_xgmi_engines_and_engine_ids_are_bounded() {
    on_every_target(&["mi100", "rx7900xtx"], |target| {
        let env = open(target);
        let (pcie, xgmi, _) = env.sdma_engines();
        let x = SdmaQueue::new(&env.context, env.gpu_id, SdmaEngine::Xgmi, 4096);
        if xgmi == 0 {
            // allocate_sdma_queue: no xGMI engine, no queue.
            let err = x.expect_err("no xGMI engine");
            assert!(
                matches!(&err, Error::Kfd(e) if e.errno() == Some(Errno::NOMEM)),
                "{}: {err}",
                env.name
            );
        } else {
            let mut x = x.unwrap_or_else(|e| panic!("{}: {e}", env.name));
            let mem = env.bo(0, 4096, GTT);
            let c = x
                .submit(&[Command::Fence {
                    addr: mem.va(),
                    value: 3,
                }])
                .unwrap();
            x.wait(c, WAIT).unwrap();
        }
        if env.kfd.version().minor >= 17 {
            let last = u32::try_from(pcie + xgmi).unwrap();
            SdmaQueue::new(&env.context, env.gpu_id, SdmaEngine::Id(last - 1), 4096)
                .unwrap_or_else(|e| panic!("{}: {e}", env.name));
            // The kernel's EINVAL, caught before the call with the engine count.
            let past = SdmaQueue::new(&env.context, env.gpu_id, SdmaEngine::Id(last), 4096);
            assert!(
                matches!(&past, Err(Error::NoSuchEngine { engine, engines, gpu_id })
                    if *engine == last && *engines == last && *gpu_id == env.gpu_id),
                "{}: {past:?}",
                env.name
            );
        }
    });
}

#[test]
fn a_doorbell_write_alone_starts_the_engine() {
    on_every_target(&["mi300x", "radeon-vii"], |target| {
        let env = open(target);
        let spec = env.spec(0);
        let ring = spec.ring.bo.clone();
        let q = env.kfd.create_queue(&spec).expect("a queue");
        let gfx = env.node.gfx_target_version().expect("gfx").major;
        let doorbells = env
            .kfd
            .map_doorbells(env.gpu_id, gfx, env.va.addr() + (900 << 20))
            .expect("doorbells");
        let target_bo = env.bo(2 << 20, 4096, GTT);
        let fence = kfd_queue::packet::fence(target_bo.va(), 0x0D00_BE11);
        let bytes: Vec<u8> = fence.iter().flat_map(|d| d.to_le_bytes()).collect();
        ring.map_cpu().unwrap().write_slice(&bytes, 0).unwrap();
        // The write pointer in memory stays 0: only the doorbell says there is work.
        doorbells
            .ring(q.doorbell_in_page(&doorbells), bytes.len() as u64)
            .unwrap();
        let idle = env.kfd.create_event(EventKind::Signal, true).unwrap();
        let cpu = target_bo.map_cpu().unwrap();
        let landed = (0..5000).any(|_| {
            // A short WAIT_EVENTS (on kfd-emu it also kicks the engines).
            let _ = env.kfd.wait_events(&[&idle], false, 1);
            let mut v = [0u8; 4];
            cpu.read_slice(&mut v, 0).unwrap();
            u32::from_le_bytes(v) == 0x0D00_BE11
        });
        assert!(landed, "{}: the fence did not land", env.name);
        q.close().unwrap();
    });
}

/// A queue made on the doorbell of a destroyed one starts from write pointer 0, as the MQD the
/// kernel initialises for it says (`init_mqd`: `cp_hqd_pq_wptr` and the SDMA RLC's
/// `rb_wptr` are 0): the last value the old queue's producer wrote to the doorbell is not the
/// new queue's. The old queue runs 40 fences; the new one's single fence lands, and its read
/// pointer is at the end of that fence, not 40 fences on.
#[test]
fn a_new_queue_on_an_old_queues_doorbell_starts_from_zero() {
    on_every_target(&["mi300x", "radeon-vii"], |target| {
        let env = open(target);
        let gfx = env.node.gfx_target_version().expect("gfx").major;
        let doorbells = env
            .kfd
            .map_doorbells(env.gpu_id, gfx, env.va.addr() + (900 << 20))
            .expect("doorbells");
        let target_bo = env.bo(2 << 20, 4096, GTT);
        let cpu = target_bo.map_cpu().unwrap();
        let idle = env.kfd.create_event(EventKind::Signal, true).unwrap();
        let landed = |value: u32| {
            (0..5000).any(|_| {
                let _ = env.kfd.wait_events(&[&idle], false, 1);
                let mut v = [0u8; 4];
                cpu.read_slice(&mut v, 0).unwrap();
                u32::from_le_bytes(v) == value
            })
        };
        let mut slots = Vec::new();
        for (round, fences) in [(0u64, 40u32), (1, 1)] {
            let spec = env.spec(round);
            let ring = spec.ring.bo.clone();
            let pointers = spec.read_pointer.bo.clone();
            let q = env.kfd.create_queue(&spec).expect("a queue");
            slots.push(q.doorbell_in_page(&doorbells));
            let bytes: Vec<u8> = (0..fences)
                .flat_map(|i| {
                    kfd_queue::packet::fence(target_bo.va(), 0x5100 + round as u32 * 0x100 + i)
                })
                .flat_map(|d| d.to_le_bytes())
                .collect();
            ring.map_cpu().unwrap().write_slice(&bytes, 0).unwrap();
            doorbells
                .ring(q.doorbell_in_page(&doorbells), bytes.len() as u64)
                .unwrap();
            let last = 0x5100 + round as u32 * 0x100 + fences - 1;
            assert!(
                landed(last),
                "{}: round {round}: the fences did not land",
                env.name
            );
            let mut rptr = [0u8; 8];
            let deadline = std::time::Instant::now() + WAIT;
            loop {
                pointers
                    .map_cpu()
                    .unwrap()
                    .read_slice(&mut rptr, 0)
                    .unwrap();
                if u64::from_le_bytes(rptr) == bytes.len() as u64
                    || std::time::Instant::now() > deadline
                {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(
                u64::from_le_bytes(rptr),
                bytes.len() as u64,
                "{}: round {round}",
                env.name
            );
            q.close().unwrap();
        }
        assert_eq!(slots[0], slots[1], "{}: the same doorbell", env.name);
    });
}

#[test]
fn a_submission_larger_than_the_engines_read_window_completes() {
    on_every_target(&["mi300x"], |target| {
        let env = open(target);
        let mem = env.bo(0, 4096, GTT);
        let mut q = SdmaQueue::new(&env.context, env.gpu_id, SdmaEngine::Pcie, 256 << 10)
            .unwrap_or_else(|e| panic!("{}: {e}", env.name));
        // 10000 fences of 16 bytes: 160 KB of packets in one submission.
        let fences: Vec<Command> = (0..10_000u32)
            .map(|i| Command::Fence {
                addr: mem.va() + 4 * u64::from(i % 1024),
                value: i,
            })
            .collect();
        let c = q.submit(&fences).unwrap();
        q.wait(c, WAIT).unwrap();
        let mut last = [0u8; 4];
        mem.map_cpu()
            .unwrap()
            .read_slice(&mut last, 4 * (9_999 % 1024))
            .unwrap();
        assert_eq!(u32::from_le_bytes(last), 9_999, "{}", env.name);
        assert_consumed(&q);
    });
}

/// `amd_signal_t`: kind, value, event mailbox, event id.
fn write_signal(cpu: &kfd_ioctl::CpuMapping<'_>, at: usize, value: i64, mailbox: u64, id: u32) {
    let mut s = [0u8; 64];
    s[0..8].copy_from_slice(&1i64.to_le_bytes()); // AMD_SIGNAL_KIND_USER
    s[8..16].copy_from_slice(&value.to_le_bytes());
    s[16..24].copy_from_slice(&mailbox.to_le_bytes());
    s[24..28].copy_from_slice(&id.to_le_bytes());
    cpu.write_slice(&s, at).unwrap();
}

fn signal_value(cpu: &kfd_ioctl::CpuMapping<'_>, at: usize) -> i64 {
    let mut v = [0u8; 8];
    cpu.read_slice(&mut v, at + 8).unwrap();
    i64::from_le_bytes(v)
}

/// A barrier packet (`hsa_barrier_and_packet_t` / `_or_`): `kind` 3 (AND) or 5 (OR), the
/// barrier bit, system-scope fences; dependencies and completion signal by address.
/// An AQL queue's spec: a 64-packet ring at 0, `amd_queue_t`'s read and write dispatch ids in
/// a buffer at 1 MiB, the EOP buffer at 2 MiB and the save area at 4 MiB of the test's range.
fn aql_spec(env: &Env) -> (QueueSpec, Arc<BufferObject>, Arc<BufferObject>) {
    let sizes = kfd_ioctl::QueueSizes::for_node(&env.node).expect("CWSR sizes");
    let ring = Arc::new(env.bo(0, 4096, GTT));
    let pointers = Arc::new(env.bo(1 << 20, 4096, GTT));
    let eop = Arc::new(env.bo(2 << 20, sizes.eop_buffer_size, GTT));
    let ctx_save = Arc::new(env.bo(4 << 20, sizes.total_ctx_save_size(), GTT));
    let spec = QueueSpec {
        gpu_id: env.gpu_id,
        queue_type: QueueType::ComputeAql,
        percentage: 100,
        priority: 7,
        ring: QueueBuffer::start_of(ring.clone()),
        ring_size: 4096,
        // amd_queue_t's read_dispatch_id and write_dispatch_id: packet indices.
        read_pointer: QueueBuffer::start_of(pointers.clone()),
        write_pointer: QueueBuffer {
            bo: pointers.clone(),
            offset: 8,
        },
        compute: Some(kfd_ioctl::ComputeBuffers {
            eop: QueueBuffer::start_of(eop),
            ctx_save: QueueBuffer::start_of(ctx_save),
            sizes,
        }),
    };
    (spec, ring, pointers)
}

/// ROCr 5.2.3's PM4-in-AQL packet (`AqlQueue::ExecutePM4`): header VENDOR_SPECIFIC (0),
/// `ven_hdr` 1 (`AMD_AQL_FORMAT_PM4_IB`), the IB jump, `dw_cnt_remain` 0xA, the completion
/// signal.
fn pm4_ib_packet(jump: &[u32; 4], completion: u64) -> [u8; 64] {
    let mut p = [0u8; 64];
    p[2..4].copy_from_slice(&1u16.to_le_bytes());
    for (i, d) in jump.iter().enumerate() {
        p[4 + 4 * i..8 + 4 * i].copy_from_slice(&d.to_le_bytes());
    }
    p[20..24].copy_from_slice(&0xAu32.to_le_bytes());
    p[56..64].copy_from_slice(&completion.to_le_bytes());
    p
}

/// Hostile PM4-in-AQL packets cost only their own queue: an IB that chains to itself stops
/// the queue at the IB nesting limit instead of spinning on it forever, and an IB at an
/// address nothing maps (above the 47-bit user space) is a VM fault that reaches the memory
/// event; neither completes its signal, and both queues are destroyed.
#[test]
fn hostile_aql_pm4_ib_packets_stop_or_fault_their_queue() {
    on_every_target(&["mi300x"], |target| {
        let env = open(target);
        if env.model.is_none() {
            kfd_skip::skip_part(
                "hostile PM4 IBs",
                "a self-chaining IB would spin a real CP and a fault stops the process's queues",
            );
            return;
        }
        let gfx = env.node.gfx_target_version().expect("gfx").major;
        let doorbells = env
            .kfd
            .map_doorbells(env.gpu_id, gfx, env.va.addr() + (900 << 20))
            .expect("doorbells");
        let signals = env.bo(3 << 20, 4096, GTT);
        let sig = signals.map_cpu().unwrap();
        let ib = env.bo(200 << 20, 4096, GTT);
        let self_chain = kfd_queue::pm4::indirect_buffer(ib.va(), 4, true).unwrap();
        let bytes: Vec<u8> = self_chain.iter().flat_map(|d| d.to_le_bytes()).collect();
        ib.map_cpu().unwrap().write_slice(&bytes, 0).unwrap();
        let unmapped = kfd_queue::pm4::indirect_buffer(0x8000_0000_0000, 1024, false).unwrap();
        let fault = env.kfd.create_event(EventKind::Memory, false).unwrap();
        for (what, jump) in [("self-chaining", self_chain), ("unmapped", unmapped)] {
            let (spec, ring, pointers) = aql_spec(&env);
            let q = env.kfd.create_queue(&spec).expect("a queue");
            write_signal(&sig, 0, 1, 0, 0);
            let p = pm4_ib_packet(&jump, signals.va());
            let ring_cpu = ring.map_cpu().unwrap();
            let ptr_cpu = pointers.map_cpu().unwrap();
            ring_cpu.write_slice(&p[2..], 2).unwrap();
            ring_cpu.write_slice(&p[..2], 0).unwrap();
            ptr_cpu.write_slice(&1u64.to_le_bytes(), 8).unwrap();
            doorbells.ring(q.doorbell_in_page(&doorbells), 0).unwrap();
            if what == "unmapped" {
                let woke = env.kfd.wait_events(&[&fault], false, 10_000).unwrap();
                assert!(
                    matches!(woke, WaitOutcome::Complete(_)),
                    "{}: {what}: the VM fault's memory event",
                    env.name
                );
            } else {
                // Long enough for the engine to have spun on it many times over.
                let idle = env.kfd.create_event(EventKind::Signal, true).unwrap();
                for _ in 0..20 {
                    let _ = env.kfd.wait_events(&[&idle], false, 5);
                }
            }
            let mut value = [0u8; 8];
            sig.read_slice(&mut value, 8).unwrap();
            assert_eq!(
                i64::from_le_bytes(value),
                1,
                "{}: {what}: completion untouched",
                env.name
            );
            let mut read_index = [0u8; 8];
            ptr_cpu.read_slice(&mut read_index, 0).unwrap();
            assert_eq!(
                u64::from_le_bytes(read_index),
                0,
                "{}: {what}: not consumed",
                env.name
            );
            q.close().unwrap();
        }
    });
}

fn barrier(kind: u16, deps: &[u64], completion: u64) -> [u8; 64] {
    let mut p = [0u8; 64];
    let header = kind | 1 << 8 | 2 << 9 | 2 << 11;
    p[0..2].copy_from_slice(&header.to_le_bytes());
    for (i, d) in deps.iter().enumerate() {
        p[8 + 8 * i..16 + 8 * i].copy_from_slice(&d.to_le_bytes());
    }
    p[56..64].copy_from_slice(&completion.to_le_bytes());
    p
}

#[test]
fn aql_barriers_wait_for_their_dependencies_and_complete_their_signals() {
    on_every_target(&["mi100", "radeon-vii"], |target| {
        let env = open(target);
        let (spec, ring, pointers) = aql_spec(&env);
        let signals = env.bo(3 << 20, 4096, GTT);
        let q = env
            .kfd
            .create_queue(&spec)
            .unwrap_or_else(|e| panic!("{}: {e}", env.name));
        let gfx = env.node.gfx_target_version().expect("gfx").major;
        let doorbells = env
            .kfd
            .map_doorbells(env.gpu_id, gfx, env.va.addr() + (900 << 20))
            .expect("doorbells");
        let (event, slot) = env.context.signal_event(env.gpu_id).unwrap();
        let sig = signals.map_cpu().unwrap();
        let ring_cpu = ring.map_cpu().unwrap();
        let ptr_cpu = pointers.map_cpu().unwrap();
        let s = |i: u64| signals.va() + 64 * i;
        // Signal 0: a dependency at 1; 1 and 2: completions at 1 with the event's mailbox.
        write_signal(&sig, 0, 1, 0, 0);
        write_signal(&sig, 64, 1, slot, event.id());
        write_signal(&sig, 128, 1, slot, event.id());
        write_signal(&sig, 192, 1, 0, 0);
        let publish = |index: u64, packet: [u8; 64]| {
            // Body first, header last, then the write index and the doorbell.
            let at = (index as usize % 64) * 64;
            ring_cpu.write_slice(&packet[2..], at + 2).unwrap();
            ring_cpu.write_slice(&packet[..2], at).unwrap();
            ptr_cpu.write_slice(&(index + 1).to_le_bytes(), 8).unwrap();
            doorbells
                .ring(q.doorbell_in_page(&doorbells), index)
                .unwrap();
        };
        let read_index = || {
            let mut v = [0u8; 8];
            ptr_cpu.read_slice(&mut v, 0).unwrap();
            u64::from_le_bytes(v)
        };
        // BARRIER_AND on signal 0 (still 1): nothing completes.
        publish(0, barrier(3, &[s(0)], s(1)));
        assert_eq!(
            env.kfd.wait_events(&[&event], false, 100).unwrap(),
            WaitOutcome::Timeout,
            "{}",
            env.name
        );
        assert_eq!(signal_value(&sig, 64), 1);
        assert_eq!(read_index(), 0);
        // The dependency reaches 0: the barrier completes, its signal drops, the event fires.
        sig.write_slice(&0i64.to_le_bytes(), 8).unwrap();
        let woke = env.kfd.wait_events(&[&event], false, 10_000).unwrap();
        assert!(matches!(woke, WaitOutcome::Complete(_)), "{}", env.name);
        assert_eq!(signal_value(&sig, 64), 0);
        // BARRIER_OR: one of its dependencies (signal 3 at 1, signal 0 at 0) suffices.
        publish(1, barrier(5, &[s(3), s(0)], s(2)));
        let woke = env.kfd.wait_events(&[&event], false, 10_000).unwrap();
        assert!(matches!(woke, WaitOutcome::Complete(_)), "{}", env.name);
        assert_eq!(signal_value(&sig, 128), 0);
        let deadline = std::time::Instant::now() + WAIT;
        while read_index() != 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "{}: read index",
                env.name
            );
            let _ = env.kfd.wait_events(&[&event], false, 1);
        }
        if env.model.is_some() {
            // No ISA here: a kernel dispatch stops the queue; what follows never completes.
            write_signal(&sig, 256, 1, slot, event.id());
            let mut dispatch = [0u8; 64];
            dispatch[0..2].copy_from_slice(&(2u16 | 1 << 8).to_le_bytes());
            publish(2, dispatch);
            publish(3, barrier(3, &[], s(4)));
            assert_eq!(
                env.kfd.wait_events(&[&event], false, 200).unwrap(),
                WaitOutcome::Timeout
            );
            assert_eq!(signal_value(&sig, 256), 1, "never completed");
            assert_eq!(read_index(), 2, "stopped at the dispatch");
        }
        q.close().unwrap();
    });
}

#[test]
fn aql_queue_barriers_respect_dependency_order_and_signal_completion() {
    use kfd_queue::{AqlQueue, Signal};
    on_every_target(&["mi100", "radeon-vii"], |target| {
        let env = open(target);
        let mut q = AqlQueue::new(&env.context, env.gpu_id, 64)
            .unwrap_or_else(|e| panic!("{}: {e}", env.name));
        let signal = |v| Signal::new(&env.context, env.gpu_id, v).unwrap();
        let (gate, first, second, either) = (signal(1), signal(1), signal(1), signal(1));
        // first waits for the gate; second waits for first: a chain.
        q.barrier_and(&[&gate], Some(&first)).unwrap();
        q.barrier_and(&[&first], Some(&second)).unwrap();
        assert!(matches!(
            second.wait_zero(Duration::from_millis(100)),
            Err(Error::Timeout(_))
        ));
        assert_eq!((first.value().unwrap(), q.read_index().unwrap()), (1, 0));
        gate.store(0).unwrap();
        second.wait_zero(WAIT).unwrap();
        assert_eq!(first.value().unwrap(), 0, "{}: in order", env.name);
        // An OR needs one of its dependencies: the gate (0) and one still at 1.
        let never = signal(1);
        q.barrier_or(&[&never, &gate], Some(&either)).unwrap();
        either.wait_zero(WAIT).unwrap();
        assert_eq!(never.value().unwrap(), 1);
        let deadline = std::time::Instant::now() + WAIT;
        while q.read_index().unwrap() != q.write_index() {
            assert!(
                std::time::Instant::now() < deadline,
                "{}: read index",
                env.name
            );
            std::thread::yield_now();
        }
        // More than five dependencies do not fit a barrier packet.
        let six: Vec<&Signal> = vec![&gate; 6];
        assert!(matches!(q.barrier_and(&six, None), Err(Error::Command(_))));
    });
}

/// Garbage in a ring is what the engine reads, never a crash of the emulator: every ring of
/// random dwords behind a header no SDMA generation defines stops its queue, and the queue
/// made before them still works afterwards. Random dwords that decode as real packets write
/// wherever their fields say and fault: a VM fault evicts all of the process's queues on the
/// GPU (`kfd_dqm_evict_pasid`), so they could not show the engine going on; hostile fields of
/// real packets are `packets.rs`'s `hostile_counts_stop_or_spin_only_their_own_queue`.
/// Emulated only: on a GPU, random packets could write anywhere the process maps.
#[test]
fn random_ring_contents_stop_their_queue_and_the_engine_goes_on() {
    on_every_target(&["mi300x"], |target| {
        let env = open(target);
        if env.model.is_none() {
            kfd_skip::skip_part(
                "random packets",
                "they are not sent to real hardware, where they could write anywhere",
            );
            return;
        }
        // The SDMA queue first: its context's signal page must be the process's first.
        let mut sdma = env.queue();
        let gfx = env.node.gfx_target_version().expect("gfx").major;
        let doorbells = env
            .kfd
            .map_doorbells(env.gpu_id, gfx, env.va.addr() + (900 << 20))
            .expect("doorbells");
        let idle = env.kfd.create_event(EventKind::Signal, true).unwrap();
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for round in 0..16u64 {
            let spec = env.spec(round);
            let ring = spec.ring.bo.clone();
            let q = env.kfd.create_queue(&spec).expect("a queue");
            let mut words: Vec<u8> = (0..1024)
                .flat_map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed as u32).to_le_bytes()
                })
                .collect();
            // The first header's opcode: 0xFF is no SDMA opcode (`SDMA_OP_*` end at 17).
            words[0] = 0xFF;
            ring.map_cpu().unwrap().write_slice(&words, 0).unwrap();
            doorbells
                .ring(q.doorbell_in_page(&doorbells), 4096)
                .unwrap();
            // Let the engines at it (WAIT_EVENTS runs them first).
            for _ in 0..5 {
                let _ = env.kfd.wait_events(&[&idle], false, 1);
            }
            q.close().unwrap();
        }
        // The engines are alive: another queue still runs.
        let mem = env.bo(64 << 20, 4096, GTT);
        let c = sdma
            .submit(&[Command::Fence {
                addr: mem.va(),
                value: 5,
            }])
            .unwrap();
        sdma.wait(c, WAIT).unwrap();
    });
}

/// Under kfd-emu's model clock an SDMA copy takes what the timing model says it takes: the
/// engine's TIMESTAMP packets on both sides of a host → VRAM copy differ by exactly the
/// model's cost of that copy over the GPU's host link (the GPU counter runs at 100 MHz, so to
/// the 10 ns tick), and a copy within VRAM is timed over no host link. Emulator only: the
/// hardware's own timing is what it is.
#[test]
fn under_the_model_clock_an_sdma_copy_takes_the_timing_models_time() {
    use kfd_emu::machine::Machine;
    use kfd_emu::model::{ClockMode, ModelConfig};
    // One COPY_LINEAR packet each (the model charges its setup per packet).
    const LEN: u64 = 1 << 20;
    for machine in ["mi300x", "radeon-vii"] {
        let model = Model::new(ModelConfig {
            machine: Machine::preset(machine).expect("preset"),
            clock: ClockMode::Model,
            ..ModelConfig::default()
        })
        .expect("model");
        let target = Target::Emulated {
            machine,
            model: model.clone(),
        };
        let (host_to_vram, vram_to_vram) = kfd_emu::supervisor::run_attached(model.clone(), || {
            let env = open(&target);
            let host = env.bo(0, LEN, GTT);
            let vram = env.bo(16 << 20, 2 * LEN, VRAM);
            let stamps = env.bo(48 << 20, 4096, GTT);
            let mut q = env.queue();
            let ts = |at: u64| Command::Timestamp {
                addr: stamps.va() + at,
            };
            let copy = |dst, src| Command::Copy {
                dst,
                src,
                bytes: LEN,
            };
            let c = q
                .submit(&[
                    ts(0),
                    copy(vram.va(), host.va()),
                    ts(8),
                    copy(vram.va() + LEN, vram.va()),
                    ts(16),
                ])
                .unwrap();
            q.wait(c, WAIT).unwrap();
            let mut raw = [0u8; 24];
            stamps.map_cpu().unwrap().read_slice(&mut raw, 0).unwrap();
            let t: Vec<u64> = raw
                .chunks(8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
                .collect();
            (t[1] - t[0], t[2] - t[1])
        })
        .expect("attach");
        let costs = model.costs();
        let ticks = |ns: u64| ns / 10;
        let want_in = costs.sdma_copy_ns(0, None, Some(0), LEN);
        let want_local = costs.sdma_copy_ns(0, Some(0), Some(0), LEN);
        // Whole ticks of a clock that started at an arbitrary ns: within one tick.
        assert!(
            host_to_vram.abs_diff(ticks(want_in)) <= 1,
            "{machine}: host → VRAM took {host_to_vram} ticks, the model says {want_in} ns"
        );
        assert!(
            vram_to_vram.abs_diff(ticks(want_local)) <= 1,
            "{machine}: VRAM → VRAM took {vram_to_vram} ticks, the model says {want_local} ns"
        );
        assert!(want_in > want_local, "{machine}: the host link costs more");
    }
}

/// ROCr's PM4-in-AQL packet (`AqlQueue::ExecutePM4` on gfx9 and later, which
/// `GpuAgent::InvalidateCodeCaches` sends whenever a code object is loaded): a vendor-specific
/// AQL packet of format `AMD_AQL_FORMAT_PM4_IB` whose dwords 1-4 are an INDIRECT_BUFFER
/// command. The packet processor runs the IB (here a WRITE_DATA and an ACQUIRE_MEM, as ROCr's
/// cache invalidation is), consumes the packet and decrements its completion signal, whose
/// event it raises; a vendor packet of another format is still refused (`model_aql_errors`).
#[test]
fn an_aql_pm4_ib_packet_runs_its_indirect_buffer() {
    on_every_target(&["radeon-vii", "mi210x8", "mi300x"], |target| {
        let env = open(target);
        let (spec, ring, pointers) = aql_spec(&env);
        let signals = env.bo(3 << 20, 4096, GTT);
        let ib = env.bo(200 << 20, 4096, GTT);
        let data = env.bo(201 << 20, 4096, GTT);
        let q = env
            .kfd
            .create_queue(&spec)
            .unwrap_or_else(|e| panic!("{}: {e}", env.name));
        let gfx = env.node.gfx_target_version().expect("gfx").major;
        let generation = kfd_queue::pm4::Pm4Generation::Gfx9;
        let doorbells = env
            .kfd
            .map_doorbells(env.gpu_id, gfx, env.va.addr() + (900 << 20))
            .expect("doorbells");
        let (event, slot) = env.context.signal_event(env.gpu_id).unwrap();
        let sig = signals.map_cpu().unwrap();
        write_signal(&sig, 0, 1, slot, event.id());
        let mut commands = kfd_queue::pm4::write_data(data.va() + 8, &[0xC0DE_0001, 0xC0DE_0002])
            .expect("a WRITE_DATA");
        commands.extend(kfd_queue::pm4::acquire_mem(generation));
        let bytes: Vec<u8> = commands.iter().flat_map(|d| d.to_le_bytes()).collect();
        ib.map_cpu().unwrap().write_slice(&bytes, 0).unwrap();
        let jump = kfd_queue::pm4::indirect_buffer(ib.va(), commands.len() as u32, false)
            .expect("an INDIRECT_BUFFER");
        let p = pm4_ib_packet(&jump, signals.va());
        let ring_cpu = ring.map_cpu().unwrap();
        let ptr_cpu = pointers.map_cpu().unwrap();
        ring_cpu.write_slice(&p[2..], 2).unwrap();
        ring_cpu.write_slice(&p[..2], 0).unwrap();
        ptr_cpu.write_slice(&1u64.to_le_bytes(), 8).unwrap();
        doorbells.ring(q.doorbell_in_page(&doorbells), 0).unwrap();
        let woke = env.kfd.wait_events(&[&event], false, 10_000).unwrap();
        assert!(
            matches!(woke, WaitOutcome::Complete(_)),
            "{}: the completion signal's event",
            env.name
        );
        let mut written = [0u8; 8];
        data.map_cpu().unwrap().read_slice(&mut written, 8).unwrap();
        assert_eq!(
            written,
            [0x01, 0x00, 0xDE, 0xC0, 0x02, 0x00, 0xDE, 0xC0],
            "{}: the IB's WRITE_DATA",
            env.name
        );
        let mut value = [0u8; 8];
        sig.read_slice(&mut value, 8).unwrap();
        assert_eq!(i64::from_le_bytes(value), 0, "{}", env.name);
        let mut read_index = [0u8; 8];
        ptr_cpu.read_slice(&mut read_index, 0).unwrap();
        assert_eq!(u64::from_le_bytes(read_index), 1, "{}", env.name);
        q.close().unwrap();
    });
}

/// Queue errors name what is wrong: a GPU that is not in the topology (not "has no SDMA
/// engine"), an engine id past the GPU's (with the count), a submission larger than the ring
/// (with the sizes).
#[test]
fn queue_errors_name_the_gpu_the_engine_and_the_sizes() {
    on_every_target(&["mi300x"], |target| {
        let env = open(target);
        let unknown = SdmaQueue::new(&env.context, 0xdead, SdmaEngine::Pcie, 4096).unwrap_err();
        assert!(
            matches!(&unknown, Error::UnknownGpu { gpu_id, known } if *gpu_id == 0xdead && known.contains(&env.gpu_id)),
            "{}: {unknown}",
            env.name
        );
        assert_eq!(
            unknown.to_string(),
            format!(
                "gpu 0xdead is not a GPU of this queue context (its GPUs: {})",
                env.context
                    .gpu_ids()
                    .iter()
                    .map(|g| format!("{g:#x}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        );
        let engines = {
            let (pcie, xgmi, _) = env.sdma_engines();
            u32::try_from(pcie + xgmi).unwrap()
        };
        let no_engine =
            SdmaQueue::new(&env.context, env.gpu_id, SdmaEngine::Id(99), 4096).unwrap_err();
        assert_eq!(
            no_engine.to_string(),
            format!(
                "gpu {:#x} has {engines} SDMA engines (ids 0 to {}); engine 99 does not exist",
                env.gpu_id,
                engines - 1
            )
        );
        let mut q = env.queue();
        let words = vec![0u32; 2048];
        let mem = env.bo(0, 16 << 10, GTT);
        let full = q
            .submit(&[Command::Write {
                addr: mem.va(),
                data: &words,
            }])
            .unwrap_err();
        assert!(
            matches!(full, Error::RingFull { ring: 4096, free: 4096, needed } if needed > 8192),
            "{}: {full}",
            env.name
        );
        assert!(full.to_string().contains("make the ring larger"), "{full}");
    });
}

/// `Duration::MAX` means wait forever: `Instant::now() + Duration::MAX` overflows, and the
/// waits used to panic on it, even with the signal already at 0.
#[test]
fn duration_max_waits_forever_without_panicking() {
    use kfd_queue::Signal;
    on_every_target(&["mi300x"], |target| {
        let env = open(target);
        let signal = Signal::new(&env.context, env.gpu_id, 0).unwrap();
        signal.wait_zero(Duration::MAX).unwrap();
        let mut q = env.queue();
        let mem = env.bo(0, 4096, GTT);
        let c = q
            .submit(&[Command::Fence {
                addr: mem.va(),
                value: 7,
            }])
            .unwrap();
        q.wait(c, Duration::MAX)
            .unwrap_or_else(|e| panic!("{}: {e}", env.name));
    });
}

/// A copy larger than the ring holds in packets is split into submissions, as `copy`
/// documents: 580 MiB on a 4 KiB ring is 145 COPY_LINEARs of 4 MiB, and a 4 KiB ring takes
/// 144 with a submission's fence and signal. The bytes at both ends and across the split
/// arrive.
#[test]
fn a_copy_larger_than_the_ring_is_split_into_submissions() {
    on_every_target(&["mi300x"], |target| {
        let env = open(target);
        let size: u64 = 580 << 20;
        let src = env.bo(0, size, VRAM);
        let far = VaReservation::new(size as usize, 2 << 20);
        let dst = env
            .kfd
            .alloc_memory_of_gpu(env.gpu_id, far.addr(), size, VRAM)
            .unwrap();
        env.kfd.map_memory_to_gpu(&dst, &[env.gpu_id]).unwrap();
        let marks = [0, (576 << 20) - 64, size - 64];
        let cpu_src = src.map_cpu().unwrap();
        let cpu_dst = dst.map_cpu().unwrap();
        for (i, &at) in marks.iter().enumerate() {
            cpu_src
                .write_slice(&pattern(64, i as u8), at as usize)
                .unwrap();
        }
        let mut q = env.queue();
        let c = q.copy(dst.va(), src.va(), size).unwrap();
        q.wait(c, WAIT)
            .unwrap_or_else(|e| panic!("{}: {e}", env.name));
        // Two submissions, each ending with its fence and signal (40 bytes).
        assert_eq!(q.write_pointer(), 145 * 28 + 2 * 40, "{}", env.name);
        for (i, &at) in marks.iter().enumerate() {
            let mut got = [0u8; 64];
            cpu_dst.read_slice(&mut got, at as usize).unwrap();
            assert_eq!(
                got.as_slice(),
                pattern(64, i as u8),
                "{} at {at:#x}",
                env.name
            );
        }
    });
}
