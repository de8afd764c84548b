//! The safe queue and event API of `kfd-ioctl` on kfd-emu (attached), as on hardware:
//! `Kfd::create_queue` checks its buffers before the call, a `Queue` destroys itself on drop
//! (its SDMA queue is free again) or through `close`, its ioctls say the kernel's errnos, the
//! doorbell page refuses stores outside it, and events are set, waited for and closed.

use std::sync::Arc;

use kfd_emu::machine::Machine;
use kfd_emu::model::{Model, ModelConfig};
use kfd_ioctl::abi::AllocMemFlags;
use kfd_ioctl::topology::Topology;
use kfd_ioctl::{
    BufferObject, Errno, Error, EventKind, Kfd, QueueBuffer, QueueSpec, QueueType, WaitOutcome,
};

struct Env {
    kfd: Kfd,
    gpu_id: u32,
    gfx_major: u32,
    base: u64,
}

impl Env {
    fn bo(&self, offset: u64, size: u64) -> Arc<BufferObject> {
        let flags = AllocMemFlags::GTT | AllocMemFlags::WRITABLE;
        let bo = self
            .kfd
            .alloc_memory_of_gpu(self.gpu_id, self.base + offset, size, flags)
            .expect("alloc");
        self.kfd.map_memory_to_gpu(&bo, &[self.gpu_id]).expect("map");
        Arc::new(bo)
    }

    /// An SDMA queue spec over a fresh 4 KiB ring and pointer page at `slot`.
    fn spec(&self, slot: u64) -> QueueSpec {
        let ring = self.bo(slot * (1 << 20), 4096);
        let pointers = self.bo(slot * (1 << 20) + 65536, 4096);
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
}

fn with_gpu(machine: &str, f: impl FnOnce(&Env) + Send) {
    let model = Model::new(ModelConfig {
        machine: Machine::preset(machine).expect("preset"),
        ..ModelConfig::default()
    })
    .expect("model");
    kfd_emu::supervisor::run_attached(model, move || {
        let kfd = Kfd::open().expect("open");
        let topology = Topology::read().expect("topology");
        let gpu = topology.gpus().next().expect("a GPU").clone();
        let gpu_id = gpu.gpu_id().expect("gpu_id");
        kfd.acquire_vm(gpu_id, gpu.properties.drm_render_minor as u32)
            .expect("acquire_vm");
        let start = kfd.get_process_apertures().expect("apertures")[0]
            .gpuvm
            .start;
        f(&Env {
            kfd,
            gpu_id,
            gfx_major: gpu.gfx_target_version().expect("gfx").major,
            base: start + (1 << 40),
        });
    })
    .expect("attach");
}

fn errno_of<T: std::fmt::Debug>(r: Result<T, Error>) -> Option<Errno> {
    r.expect_err("an error").errno()
}

#[test]
fn create_queue_checks_its_buffers_before_the_call() {
    with_gpu("mi100", |env| {
        let ok = env.spec(0);
        // The ring must be page aligned and ring_size bytes must fit its BO.
        let mut s = ok.clone();
        s.ring.offset = 256;
        assert!(matches!(
            env.kfd.create_queue(&s),
            Err(Error::InvalidArgument { .. })
        ));
        let mut s = ok.clone();
        s.ring_size = 8192;
        assert!(matches!(
            env.kfd.create_queue(&s),
            Err(Error::InvalidArgument { .. })
        ));
        // Pointers 8-aligned, inside their BO.
        let mut s = ok.clone();
        s.write_pointer.offset = 4092;
        assert!(matches!(
            env.kfd.create_queue(&s),
            Err(Error::InvalidArgument { .. })
        ));
        // A compute queue without its EOP and CWSR buffers.
        let mut s = ok.clone();
        s.queue_type = QueueType::ComputeAql;
        assert!(matches!(
            env.kfd.create_queue(&s),
            Err(Error::InvalidArgument { .. })
        ));
        // The kernel's own checks: a priority above 15 is EINVAL.
        let mut s = ok.clone();
        s.priority = 16;
        assert_eq!(errno_of(env.kfd.create_queue(&s)), Some(Errno::INVAL));
        let q = env.kfd.create_queue(&ok).expect("a queue");
        assert_eq!(q.queue_type(), QueueType::Sdma);
        assert_eq!(q.ring_size(), 4096);
        q.close().expect("destroyed");
    });
}

#[test]
fn a_dropped_queue_gives_its_sdma_slot_back() {
    // MI100: 16 PCIe SDMA queues in all.
    with_gpu("mi100", |env| {
        let specs: Vec<QueueSpec> = (0..17).map(|i| env.spec(i)).collect();
        let queues: Vec<_> = specs[..16]
            .iter()
            .map(|s| env.kfd.create_queue(s).expect("a queue"))
            .collect();
        assert_eq!(
            errno_of(env.kfd.create_queue(&specs[16])),
            Some(Errno::NOMEM)
        );
        drop(queues);
        let again: Vec<_> = specs[..16]
            .iter()
            .map(|s| env.kfd.create_queue(s).expect("the slots are free again"))
            .collect();
        assert_eq!(again.len(), 16);
    });
}

#[test]
fn queue_ioctls_say_the_kernels_errnos() {
    with_gpu("mi100", |env| {
        let q = env.kfd.create_queue(&env.spec(0)).expect("a queue");
        q.update_queue(50, 3).expect("update");
        assert_eq!(errno_of(q.update_queue(101, 3)), Some(Errno::INVAL));
        q.set_cu_mask(&[u32::MAX; 4]).expect("CU mask");
        assert!(matches!(
            q.set_cu_mask(&[]),
            Err(Error::InvalidArgument { .. })
        ));
        // GWS are for compute queues.
        assert_eq!(errno_of(q.alloc_queue_gws(1)), Some(Errno::INVAL));
        // The queue's doorbell is in the doorbell page, and the page refuses other stores.
        let doorbells = env
            .kfd
            .map_doorbells(env.gpu_id, env.gfx_major, env.base + (100 << 20))
            .expect("doorbells");
        assert_eq!(doorbells.doorbell_size(), 8);
        let at = q.doorbell_in_page(&doorbells);
        assert!(at < doorbells.len() && at % 8 == 0);
        doorbells.ring(at, 0).expect("ring");
        assert!(matches!(
            doorbells.ring(doorbells.len(), 0),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(matches!(
            doorbells.ring(4, 0),
            Err(Error::InvalidArgument { .. })
        ));
        q.close().expect("close");
    });
}

#[test]
fn events_are_set_waited_for_reset_and_closed() {
    with_gpu("mi300x", |env| {
        let e = env.kfd.create_event(EventKind::Signal, false).expect("event");
        assert!(e.slot().is_some());
        assert_eq!(
            env.kfd.wait_events(&[&e], false, 0).unwrap(),
            WaitOutcome::Timeout
        );
        e.set().unwrap();
        assert!(matches!(
            env.kfd.wait_events(&[&e], true, 1000).unwrap(),
            WaitOutcome::Complete(_)
        ));
        // Not auto-reset: still set until reset.
        assert!(matches!(
            env.kfd.wait_events(&[&e], false, 0).unwrap(),
            WaitOutcome::Complete(_)
        ));
        e.reset().unwrap();
        assert_eq!(
            env.kfd.wait_events(&[&e], false, 0).unwrap(),
            WaitOutcome::Timeout
        );
        // A memory event cannot be set from the CPU.
        let m = env.kfd.create_event(EventKind::Memory, false).unwrap();
        assert_eq!(errno_of(m.set()), Some(Errno::INVAL));
        assert!(matches!(
            env.kfd.wait_events(&[], false, 0),
            Err(Error::InvalidArgument { .. })
        ));
        e.close().unwrap();
        m.close().unwrap();
    });
}
