//! After a GPU VM fault the process's queues on that GPU stay evicted, through raw ioctls.
//!
//! The kernel's VM-fault interrupt (`event_interrupt_wq_v9` in `kfd_int_process_v9.c`) runs
//! `kfd_dqm_evict_pasid`, which evicts the queues of the faulting GPU's pdd
//! (`evict_process_queues_cpsch` raises `qpd->evicted`), then `kfd_signal_vm_fault_event`.
//! Nothing gives that eviction back (`restore_process_queues_cpsch` is only called by the
//! restore paths of `kfd_process_evict_queues`), and `create_queue_cpsch` creates every later
//! queue of the pdd with `is_evicted = !!qpd->evicted`: inactive, never mapped.
//!
//! What is proved, on mi210x8 (8 GPUs):
//! * An SDMA copy from an unmapped address faults (the memory event is set) and its queue
//!   stops at the packet.
//! * A queue the process creates on that GPU afterwards runs nothing: not after UPDATE_QUEUE
//!   makes its properties active, not after every queue there is destroyed and a new one made.
//! * Meanwhile the process's queue on another GPU (the eviction is per pdd) and another
//!   process's queue on the faulting GPU run their fences: the engines were running while
//!   the evicted queue's fence, written first, stayed unwritten.

mod fork_support;
mod model_support;

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use fork_support::wait_pid;
use kfd_emu::backend::Backend;
use kfd_emu::machine::Machine;
use kfd_emu::model::ModelConfig;
use kfd_ioctl::abi::*;
use model_support::{Emu, TestCaller, create, data, injected, va, wait};

/// How long a test waits for something that should happen at once before it fails.
const PATIENCE: Duration = Duration::from_secs(20);
const GTT_RW: u32 = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
/// `SDMA_OP_COPY` / `SDMA_SUBOP_COPY_LINEAR`, `SDMA_OP_FENCE` (`vega10_sdma_pkt_open.h`).
const SDMA_COPY_LINEAR: u32 = 1;
const SDMA_FENCE: u32 = 5;

/// A GTT BO of `size` bytes at `va` on GPU `gpu_id`, mapped there.
fn mapped(emu: &Emu, gpu_id: u32, va: u64, size: u64) {
    let (h, _) = emu.alloc(gpu_id, va, size, GTT_RW).expect("alloc");
    assert_eq!(emu.map(h, &[gpu_id]).0, Ok(0));
}

/// An SDMA queue on `gpu_id` with a 4 KiB ring at `ring`, the read pointer at `pointers` and
/// the write pointer 8 bytes later (both BOs mapped there first); its id.
fn sdma_queue(emu: &Emu, gpu_id: u32, ring: u64, pointers: u64) -> u32 {
    let mut a = kfd_ioctl_create_queue_args {
        ring_base_address: ring,
        write_pointer_address: pointers + 8,
        read_pointer_address: pointers,
        ring_size: 4096,
        gpu_id,
        queue_type: KFD_IOC_QUEUE_TYPE_SDMA,
        queue_percentage: 100,
        queue_priority: 7,
        ..Default::default()
    };
    emu.ioctl(AMDKFD_IOC_CREATE_QUEUE, &mut a)
        .expect("CREATE_QUEUE");
    a.queue_id
}

/// One SDMA queue with its ring, pointers and a target page, all mapped on `gpu_id` at the
/// `n`th group of [`va`]s.
struct Sdma {
    gpu_id: u32,
    ring: u64,
    pointers: u64,
    target: u64,
    id: u32,
}

impl Sdma {
    fn new(emu: &Emu, gpu_id: u32, n: u64) -> Sdma {
        let (ring, pointers, target) = (va(3 * n), va(3 * n + 1), va(3 * n + 2));
        for at in [ring, pointers, target] {
            mapped(emu, gpu_id, at, 4096);
        }
        let id = sdma_queue(emu, gpu_id, ring, pointers);
        Sdma {
            gpu_id,
            ring,
            pointers,
            target,
            id,
        }
    }

    /// Writes `dwords` at the ring's start and the write pointer after them (no doorbell: the
    /// engine polls the write pointer, `RB_WPTR_POLL`).
    fn submit(&self, emu: &Emu, dwords: &[u32]) {
        let bytes: Vec<u8> = dwords.iter().flat_map(|d| d.to_le_bytes()).collect();
        let pid = emu.caller.tgid;
        emu.model
            .gpu_write(pid, self.gpu_id, self.ring, &bytes)
            .expect("ring write");
        emu.model
            .gpu_write(
                pid,
                self.gpu_id,
                self.pointers + 8,
                &(bytes.len() as u64).to_le_bytes(),
            )
            .expect("wptr write");
    }

    fn read(&self, emu: &Emu, at: u64) -> u64 {
        let mut b = [0u8; 8];
        emu.model
            .gpu_read(emu.caller.tgid, self.gpu_id, at, &mut b)
            .expect("GPU read");
        u64::from_le_bytes(b)
    }

    /// The read pointer the engine wrote back.
    fn consumed(&self, emu: &Emu) -> u64 {
        self.read(emu, self.pointers)
    }

    /// The target page's first dword.
    fn fenced(&self, emu: &Emu) -> u32 {
        self.read(emu, self.target) as u32
    }

    fn destroy(&self, emu: &Emu) {
        let mut a = kfd_ioctl_destroy_queue_args {
            queue_id: self.id,
            pad: 0,
        };
        assert_eq!(emu.ioctl(AMDKFD_IOC_DESTROY_QUEUE, &mut a), Ok(0));
    }
}

fn fence(dst: u64, value: u32) -> [u32; 4] {
    [SDMA_FENCE, dst as u32, (dst >> 32) as u32, value]
}

fn copy_linear(src: u64, dst: u64, bytes: u32) -> [u32; 7] {
    [
        SDMA_COPY_LINEAR,
        bytes - 1,
        0,
        src as u32,
        (src >> 32) as u32,
        dst as u32,
        (dst >> 32) as u32,
    ]
}

/// Polls `cond` until it holds or [`PATIENCE`] passes.
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    cond()
}

/// A second KFD process (a forked child that only waits) on `first`'s model, with its VM on
/// GPU index 0.
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
fn a_vm_fault_keeps_the_process_evicted_on_its_gpu_only() {
    let mut emu = Emu::new(ModelConfig {
        machine: Machine::preset("mi210x8").expect("preset"),
        kfd_minor: KFD_IOCTL_MINOR_VERSION,
        ..ModelConfig::default()
    });
    emu.acquire_all();
    let gpus = emu.gpu_ids();
    let (faulting_gpu, other_gpu) = (gpus[0], gpus[1]);
    let memory = create(&emu, KFD_IOC_EVENT_MEMORY, false);

    // The fault: a copy from an address nothing maps on the GPU.
    let faulting = Sdma::new(&emu, faulting_gpu, 1);
    let unmapped = va(100);
    faulting.submit(&emu, &copy_linear(unmapped, faulting.target, 64));
    let (r, result) = wait(&emu, &mut [data(memory.event_id)], true, 20_000);
    assert_eq!(r, Ok(0));
    assert_eq!(
        result, KFD_IOC_WAIT_RESULT_COMPLETE,
        "the memory event is set"
    );
    assert_eq!(
        faulting.consumed(&emu),
        0,
        "it stopped at the faulting packet"
    );

    // A queue created afterwards on the GPU: its fence, written first, never runs.
    let later = Sdma::new(&emu, faulting_gpu, 2);
    later.submit(&emu, &fence(later.target, 1));
    // The process's queue on another GPU runs (the eviction is the faulting GPU's pdd's).
    let elsewhere = Sdma::new(&emu, other_gpu, 3);
    elsewhere.submit(&emu, &fence(elsewhere.target, 2));
    assert!(
        eventually(|| elsewhere.fenced(&emu) == 2),
        "the queue on another GPU never ran"
    );
    // Another process's queue on the faulting GPU runs.
    let other = OtherProcess::start(&emu);
    let theirs = Sdma::new(&other.emu, faulting_gpu, 4);
    theirs.submit(&other.emu, &fence(theirs.target, 3));
    assert!(
        eventually(|| theirs.fenced(&other.emu) == 3),
        "another process's queue on the GPU never ran"
    );
    assert_eq!(
        later.fenced(&emu),
        0,
        "the queue created after the fault ran"
    );
    assert_eq!(later.consumed(&emu), 0);

    // UPDATE_QUEUE recomputes QUEUE_IS_ACTIVE with is_evicted still set: still nothing.
    let mut u = kfd_ioctl_update_queue_args {
        ring_base_address: later.ring,
        queue_id: later.id,
        ring_size: 4096,
        queue_percentage: 100,
        queue_priority: 7,
    };
    assert_eq!(emu.ioctl(AMDKFD_IOC_UPDATE_QUEUE, &mut u), Ok(0));
    let (mine, theirs_so_far) = (fence(elsewhere.target, 5), fence(theirs.target, 6));
    elsewhere.submit(&emu, &[fence(elsewhere.target, 2), mine].concat());
    theirs.submit(
        &other.emu,
        &[fence(theirs.target, 3), theirs_so_far].concat(),
    );
    assert!(
        eventually(|| elsewhere.fenced(&emu) == 5 && theirs.fenced(&other.emu) == 6),
        "the other queues stopped running"
    );
    assert_eq!(later.fenced(&emu), 0, "an updated evicted queue ran");
    assert_eq!(later.consumed(&emu), 0);

    // qpd->evicted outlives the queues: with every queue of the GPU gone, a new one is
    // created evicted too.
    later.destroy(&emu);
    faulting.destroy(&emu);
    let again = Sdma::new(&emu, faulting_gpu, 5);
    again.submit(&emu, &fence(again.target, 4));
    elsewhere.submit(
        &emu,
        &[fence(elsewhere.target, 2), mine, fence(elsewhere.target, 7)].concat(),
    );
    theirs.submit(
        &other.emu,
        &[
            fence(theirs.target, 3),
            theirs_so_far,
            fence(theirs.target, 8),
        ]
        .concat(),
    );
    assert!(
        eventually(|| elsewhere.fenced(&emu) == 7 && theirs.fenced(&other.emu) == 8),
        "the other queues stopped running"
    );
    assert_eq!(again.fenced(&emu), 0, "a queue made after all went ran");
    assert_eq!(again.consumed(&emu), 0);
    again.destroy(&emu);
    elsewhere.destroy(&emu);
    theirs.destroy(&other.emu);
}
