//! Mirrored rings on the GPU: what each GPU sees at the ring's GPU addresses (through the
//! emulator's GPU-side view), access modes turned into mappings and VM faults, and teardown
//! after a failure part way through construction.
//!
//! The GPU-view checks need kfd-emu's model; on hardware the same bodies build and tear down
//! the rings and check the CPU side only (printing what they skip).

use std::sync::Arc;

use kfd_emu::machine::Machine;
use kfd_emu::model::{FailRule, GpuFault, GpuFaultReason, Model, ModelConfig};
use kfd_ioctl::topology::Topology;
use kfd_ioctl::{BufferObject, Kfd};
use kfd_ring::{
    AccessMode, DeviceRing, Error, GpuAccess, GpuHostRing, GpuView, Granularity, HostMirror,
    MemoryPool, Mirrored, Right,
};
use kfd_tests::{Target, on_every_target};

/// Opens KFD and acquires every GPU; returns the GPU ids, xGMI hive peers first grouped by
/// the topology's order.
fn open(target: &Target) -> (Kfd, Topology, Vec<u32>) {
    let kfd = Kfd::open().unwrap_or_else(|e| panic!("{}: {e}", target.name()));
    let topo = Topology::read().unwrap_or_else(|e| panic!("{}: {e}", target.name()));
    let mut gpus = Vec::new();
    for node in topo.gpus() {
        let Some(gpu_id) = node.gpu_id() else {
            continue;
        };
        kfd.acquire_vm(gpu_id, node.properties.drm_render_minor as u32)
            .unwrap_or_else(|e| panic!("{}: {e}", target.name()));
        gpus.push(gpu_id.get());
    }
    assert!(!gpus.is_empty(), "{}: no GPU", target.name());
    (kfd, topo, gpus)
}

/// The GPU-side view of this process on an emulated target.
struct GpuSide {
    model: Arc<Model>,
    tgid: i32,
}

impl GpuSide {
    fn of(target: &Target) -> Option<GpuSide> {
        match target {
            Target::Emulated { model, .. } => Some(GpuSide {
                model: model.clone(),
                tgid: std::process::id() as i32,
            }),
            Target::Hardware => {
                eprintln!("hardware: no GPU-side view; checking the CPU side only");
                None
            }
        }
    }

    fn read(&self, gpu: u32, va: u64, len: usize) -> Result<Vec<u8>, GpuFault> {
        let mut buf = vec![0u8; len];
        self.model.gpu_read(self.tgid, gpu, va, &mut buf)?;
        Ok(buf)
    }

    fn byte(&self, gpu: u32, va: u64) -> u8 {
        self.read(gpu, va, 1)
            .unwrap_or_else(|e| panic!("GPU {gpu:#x} reading {va:#x}: {e}"))[0]
    }

    fn write(&self, gpu: u32, va: u64, data: &[u8]) -> Result<(), GpuFault> {
        self.model.gpu_write(self.tgid, gpu, va, data)
    }
}

/// `len` bytes that differ at every position of a ring (no period shorter than 251).
fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i / 251) as u8 ^ salt)
        .collect()
}

/// The aliasing check at GPU address `base` of a ring of `cap` bytes whose contents are
/// `fill`: `p[-1] == p[cap-1]`, `p[cap] == p[0]`, `p[cap+1] == p[1]`, and a whole-capacity
/// read from the middle of the base view wraps into the next view.
fn assert_gpu_aliases(side: &GpuSide, gpu: u32, base: u64, cap: usize, fill: &[u8]) {
    let c = cap as u64;
    assert_eq!(
        side.byte(gpu, base - 1),
        fill[cap - 1],
        "GPU {gpu:#x}: p[-1]"
    );
    assert_eq!(side.byte(gpu, base + c), fill[0], "GPU {gpu:#x}: p[cap]");
    assert_eq!(
        side.byte(gpu, base + c + 1),
        fill[1],
        "GPU {gpu:#x}: p[cap+1]"
    );
    assert_eq!(side.byte(gpu, base - c), fill[0], "GPU {gpu:#x}: p[-cap]");
    let from = cap / 2 + 3;
    let whole = side.read(gpu, base + from as u64, cap).unwrap();
    let want: Vec<u8> = (0..cap).map(|i| fill[(from + i) % cap]).collect();
    assert!(
        whole == want,
        "GPU {gpu:#x}: a read across the wrap point is one run"
    );
}

fn fault_reason(result: Result<impl Sized, GpuFault>) -> Option<GpuFaultReason> {
    result.err().map(|f| f.reason)
}

#[test]
fn userptr_host_ring_aliases_at_the_same_gpu_addresses() {
    on_every_target(&["mi300x", "mi210x8"], |target| {
        let (kfd, _topo, gpus) = open(target);
        let access = AccessMode::Shared.rights(gpus[0], &gpus[1..]);
        let mirror = HostMirror::new(64 << 10).unwrap();
        let ring = GpuHostRing::userptr(&kfd, mirror, &access, Granularity::Fine)
            .unwrap_or_else(|e| panic!("{}: {e}", target.name()));
        let cap = ring.capacity();
        assert_eq!(
            ring.gpu_base(),
            ring.base().as_ptr() as u64,
            "GPU VA = CPU address"
        );
        assert_eq!(ring.buffer_objects().len(), 3, "one USERPTR BO per view");
        let fill = pattern(cap, 0x5a);
        ring.write(0, &fill).unwrap();
        let Some(side) = GpuSide::of(target) else {
            return;
        };
        for &gpu in &gpus {
            assert_gpu_aliases(&side, gpu, ring.gpu_base(), cap, &fill);
        }
        // A GPU write into the next view is the CPU's byte at the start of the base view.
        let last = *gpus.last().unwrap();
        side.write(last, ring.gpu_base() + cap as u64 + 5, b"gpu")
            .unwrap();
        let mut back = [0u8; 3];
        ring.read(5, &mut back).unwrap();
        assert_eq!(&back, b"gpu");
        let base = ring.gpu_base();
        drop(ring);
        assert_eq!(
            fault_reason(side.read(gpus[0], base, 1)),
            Some(GpuFaultReason::NotMapped),
            "teardown unmapped the GPU views"
        );
    });
}

#[test]
fn svm_host_ring_aliases_at_the_same_gpu_addresses() {
    on_every_target(&["mi300x", "mi210x8"], |target| {
        let (kfd, _topo, gpus) = open(target);
        let access = AccessMode::Shared.rights(gpus[0], &gpus[1..]);
        let mirror = HostMirror::new(64 << 10).unwrap();
        let ring = GpuHostRing::svm(&kfd, mirror, &access, &gpus, Granularity::Fine)
            .unwrap_or_else(|e| panic!("{}: {e}", target.name()));
        let cap = ring.capacity();
        let fill = pattern(cap, 0x11);
        ring.write(0, &fill).unwrap();
        let Some(side) = GpuSide::of(target) else {
            return;
        };
        for &gpu in &gpus {
            assert_gpu_aliases(&side, gpu, ring.gpu_base(), cap, &fill);
        }
        drop(ring);
        // Readers only: the range is GPU_RO, so a write faults; a GPU left out has no access.
        if gpus.len() >= 2 {
            let readers = [GpuAccess {
                gpu_id: gpus[0],
                right: Right::Read,
            }];
            let mirror = HostMirror::new(4096).unwrap();
            let ring = GpuHostRing::svm(&kfd, mirror, &readers, &gpus, Granularity::Coarse)
                .unwrap_or_else(|e| panic!("{}: {e}", target.name()));
            let base = ring.gpu_base();
            assert_eq!(fault_reason(side.read(gpus[0], base, 1)), None);
            assert_eq!(
                fault_reason(side.write(gpus[0], base, b"w")),
                Some(GpuFaultReason::ReadOnly)
            );
            assert!(side.read(gpus[1], base, 1).is_err(), "NO_ACCESS GPU reads");
        }
    });
}

#[test]
fn svm_cannot_give_one_gpu_read_only_and_another_read_write() {
    on_every_target(&["mi210x8"], |target| {
        let (kfd, _topo, gpus) = open(target);
        let access = AccessMode::ExclusiveProducer.rights(gpus[0], &gpus[1..2]);
        let err = GpuHostRing::svm(
            &kfd,
            HostMirror::new(4096).unwrap(),
            &access,
            &gpus,
            Granularity::Fine,
        )
        .unwrap_err();
        assert!(matches!(err, Error::Access { .. }), "{err}");
    });
}

#[test]
fn device_ring_aliases_on_the_gpu_and_through_the_cpu_views() {
    on_every_target(&["mi300x", "mi210x8"], |target| {
        let (kfd, topo, gpus) = open(target);
        let owner = gpus[0];
        let pool = MemoryPool::find(&topo, owner, Granularity::Coarse).unwrap();
        eprintln!("{}: chose {pool}", target.name());
        let before = kfd.available_memory(owner).unwrap();
        let access = AccessMode::Exclusive.rights(owner, &[]);
        let ring = DeviceRing::new(&kfd, &pool, 1 << 20, &access, pool.host_accessible)
            .unwrap_or_else(|e| panic!("{}: {e}", target.name()));
        let cap = ring.capacity();
        assert_eq!(cap, 2 << 20, "1 MiB rounds up to the 2 MiB VRAM granule");
        assert_eq!(ring.gpu_base() % 64, 0);
        assert_eq!(
            ring.buffer_objects().count(),
            3,
            "the original and two imports"
        );
        let vas: Vec<u64> = ring.buffer_objects().map(BufferObject::va).collect();
        let b = ring.gpu_base();
        assert_eq!(vas, [b, b - cap as u64, b + cap as u64]);
        let side = GpuSide::of(target);
        let fill = pattern(cap, 0xc3);
        match ring.cpu().ok() {
            Some(cpu) => {
                assert_eq!(
                    cpu.base().as_ptr() as u64,
                    ring.gpu_base(),
                    "CPU VA = GPU VA"
                );
                cpu.write(0, &fill).unwrap();
                let p = cpu.base().as_ptr();
                // SAFETY: [base - cap, base + 2 cap) is mapped while `ring` lives, and no
                // one else touches it during the test.
                unsafe {
                    assert_eq!(*p.offset(-1), fill[cap - 1], "CPU p[-1]");
                    assert_eq!(*p.add(cap), fill[0], "CPU p[cap]");
                    assert_eq!(*p.add(cap + 1), fill[1], "CPU p[cap+1]");
                }
            }
            None => {
                let side = side
                    .as_ref()
                    .expect("a pool without host access is emulated here");
                side.write(owner, ring.gpu_base(), &fill).unwrap();
            }
        }
        if let Some(side) = &side {
            assert_gpu_aliases(side, owner, ring.gpu_base(), cap, &fill);
        }
        assert!(kfd.available_memory(owner).unwrap() + cap as u64 <= before);
        drop(ring);
        match &side {
            // kfd-emu releases an exported BO's memory when the exporting process exits, not
            // when the last dma-buf fd closes (it does not see close), so the VRAM comes back
            // only on hardware here.
            None => assert_eq!(kfd.available_memory(owner).unwrap(), before, "VRAM is back"),
            Some(_) => eprintln!(
                "{}: not checking that the VRAM is back (kfd-emu keeps an exported BO's \
                 memory until the exporter exits)",
                target.name()
            ),
        }
        if let Some(side) = &side {
            for va in [b - cap as u64, b, b + cap as u64] {
                assert_eq!(
                    fault_reason(side.read(owner, va, 1)),
                    Some(GpuFaultReason::NotMapped),
                    "{va:#x} is unmapped after teardown"
                );
            }
        }
    });
}

#[test]
fn spsc_records_through_a_device_ring_are_contiguous_for_the_gpu_too() {
    on_every_target(&["mi300x"], |target| {
        let (kfd, topo, gpus) = open(target);
        let pool = MemoryPool::find(&topo, gpus[0], Granularity::Fine).unwrap();
        if !pool.host_accessible {
            kfd_skip::skip_part(&target.name(), &format!("{pool} has no CPU views"));
            return;
        }
        let access = AccessMode::Exclusive.rights(gpus[0], &[]);
        let ring = DeviceRing::new(&kfd, &pool, 1, &access, true).unwrap();
        let cap = ring.capacity();
        let (mut tx, mut rx) = kfd_ring::SpscRing::new(ring.cpu().unwrap())
            .unwrap()
            .split()
            .unwrap();
        // The ring holds the only CPU view: no second ring over the same bytes.
        assert!(matches!(ring.cpu(), Err(Error::CpuViewTaken)));
        // Move the positions to 24 bytes before the end, then send a record across it.
        tx.push(&vec![0; cap - 32]).unwrap();
        rx.pop_with(|_| ()).unwrap();
        let record = pattern(5000, 0x77);
        let slot = tx.reserve(record.len()).unwrap();
        let offset = slot.ptr_guard().as_ptr() as u64 - ring.gpu_base();
        assert!(
            offset < cap as u64 && offset + 5000 > cap as u64,
            "the record wraps"
        );
        slot.copy_from(&record);
        tx.commit();
        let mut got = Vec::new();
        assert!(rx.pop_into(&mut got).unwrap());
        assert!(got == record, "the CPU reads the wrapped record whole");
        // The GPU reads the same record as one run at the same address.
        if let Some(side) = GpuSide::of(target) {
            let got = side.read(gpus[0], ring.gpu_base() + offset, 5000).unwrap();
            assert!(got == record, "the GPU sees the wrapped record whole");
        }
    });
}

/// Regression: `DeviceCpuView` was `Copy`, so two `SpscRing`s over copies of one view handed
/// out the same bytes twice. Now one view exists at a time, and it is not `Copy` or `Clone`
/// (a `compile_fail` doctest on `DeviceCpuView` checks that).
#[test]
fn a_device_ring_hands_out_one_cpu_view_at_a_time() {
    on_every_target(&["mi300x"], |target| {
        let (kfd, topo, gpus) = open(target);
        let pool = MemoryPool::find(&topo, gpus[0], Granularity::Fine).unwrap();
        let access = AccessMode::Exclusive.rights(gpus[0], &[]);
        if !pool.host_accessible {
            kfd_skip::skip_part(&target.name(), &format!("{pool} has no CPU views"));
            return;
        }
        let ring = DeviceRing::new(&kfd, &pool, 1, &access, true).unwrap();
        let first = ring.cpu().unwrap();
        assert!(matches!(ring.cpu(), Err(Error::CpuViewTaken)));
        let spsc = kfd_ring::SpscRing::new(first).unwrap();
        assert!(
            matches!(ring.cpu(), Err(Error::CpuViewTaken)),
            "the ring holds the view"
        );
        drop(spsc);
        let again = ring.cpu().unwrap();
        assert_eq!(again.capacity(), ring.capacity());
        drop(again);
        let no_views = DeviceRing::new(&kfd, &pool, 1, &access, false).unwrap();
        assert!(matches!(no_views.cpu(), Err(Error::NoCpuViews)));
    });
}

/// The GPUs of the owner's xGMI hive (VRAM reaches peers there), the owner first, and one
/// GPU outside the hive.
fn hive_and_outsider(topo: &Topology, gpus: &[u32]) -> (Vec<u32>, u32) {
    let owner = gpus[0];
    let hive = topo.node_by_gpu_id(owner).and_then(|n| n.hive_id());
    let (same, other): (Vec<u32>, Vec<u32>) = gpus
        .iter()
        .partition(|&&g| topo.node_by_gpu_id(g).and_then(|n| n.hive_id()) == hive);
    assert!(same.len() >= 3, "the owner's hive has peers");
    (same, other[0])
}

#[test]
fn host_ring_access_modes_become_mappings_and_vm_faults() {
    on_every_target(&["mi210x8"], |target| {
        let (kfd, _topo, gpus) = open(target);
        let (owner, peer, outsider) = (gpus[0], gpus[1], gpus[2]);
        for mode in [
            AccessMode::Shared,
            AccessMode::Exclusive,
            AccessMode::ExclusiveConsumer,
            AccessMode::ExclusiveProducer,
        ] {
            let access = mode.rights(owner, &[peer]);
            let ring = GpuHostRing::userptr(
                &kfd,
                HostMirror::new(4096).unwrap(),
                &access,
                Granularity::Coarse,
            )
            .unwrap_or_else(|e| panic!("{}: {mode:?}: {e}", target.name()));
            let Some(side) = GpuSide::of(target) else {
                continue;
            };
            let cap = ring.capacity() as u64;
            let right_of = |gpu| access.iter().find(|a| a.gpu_id == gpu).map(|a| a.right);
            for gpu in [owner, peer, outsider] {
                for va in [ring.gpu_base() - 1, ring.gpu_base(), ring.gpu_base() + cap] {
                    let read = fault_reason(side.read(gpu, va, 1));
                    let write = fault_reason(side.write(gpu, va, b"w"));
                    let what = format!("{mode:?}: GPU {gpu:#x} at {va:#x}");
                    match right_of(gpu) {
                        None => {
                            assert_eq!(read, Some(GpuFaultReason::NotMapped), "{what} read");
                            assert_eq!(write, Some(GpuFaultReason::NotMapped), "{what} write");
                        }
                        Some(Right::Read) => {
                            assert_eq!(read, None, "{what} read");
                            assert_eq!(write, Some(GpuFaultReason::ReadOnly), "{what} write");
                        }
                        Some(Right::ReadWrite) => {
                            assert_eq!((read, write), (None, None), "{what}");
                        }
                    }
                }
            }
        }
    });
}

#[test]
fn device_ring_access_modes_become_mappings_and_vm_faults() {
    on_every_target(&["mi210x8"], |target| {
        let (kfd, topo, gpus) = open(target);
        let (hive, outsider) = hive_and_outsider(&topo, &gpus);
        let (owner, peers) = (hive[0], &hive[1..3]);
        let pool = MemoryPool::find(&topo, owner, Granularity::Fine).unwrap();
        for mode in [
            AccessMode::Shared,
            AccessMode::Exclusive,
            AccessMode::ExclusiveConsumer,
            AccessMode::ExclusiveProducer,
        ] {
            let access = mode.rights(owner, peers);
            let ring = DeviceRing::new(&kfd, &pool, 1, &access, false)
                .unwrap_or_else(|e| panic!("{}: {mode:?}: {e}", target.name()));
            let Some(side) = GpuSide::of(target) else {
                continue;
            };
            let cap = ring.capacity() as u64;
            let base = ring.gpu_base();
            for gpu in [owner, peers[0], peers[1], outsider] {
                let what = format!("{mode:?}: GPU {gpu:#x}");
                let read = |va| fault_reason(side.read(gpu, va, 1));
                let write = |va| fault_reason(side.write(gpu, va, b"w"));
                match ring.gpu_view(gpu) {
                    None => {
                        for va in [base - 1, base, base + cap] {
                            assert_eq!(read(va), Some(GpuFaultReason::NotMapped), "{what}");
                            assert_eq!(write(va), Some(GpuFaultReason::NotMapped), "{what}");
                        }
                    }
                    Some((Right::ReadWrite, view)) => {
                        assert_eq!(view, GpuView::Mirrored, "{what}");
                        for va in [base - 1, base, base + cap] {
                            assert_eq!((read(va), write(va)), (None, None), "{what} {va:#x}");
                        }
                    }
                    Some((Right::Read, view)) => {
                        assert_eq!(view, GpuView::BaseOnly, "{what}");
                        assert_eq!(read(base), None, "{what} reads the base");
                        assert_eq!(write(base), Some(GpuFaultReason::ReadOnly), "{what}");
                        // No writable alias is mapped for a reader.
                        for va in [base - 1, base + cap] {
                            assert_eq!(read(va), Some(GpuFaultReason::NotMapped), "{what}");
                            assert_eq!(write(va), Some(GpuFaultReason::NotMapped), "{what}");
                        }
                    }
                }
            }
            // What writers write at the aliases, readers read at the base.
            let writer = access.iter().find(|a| a.right == Right::ReadWrite).unwrap();
            side.write(writer.gpu_id, base + cap + 8, b"alias").unwrap();
            for a in &access {
                assert_eq!(side.read(a.gpu_id, base + 8, 5).unwrap(), b"alias");
            }
        }
    });
}

/// The handles of a ring's buffer objects.
fn handles<'a>(bos: impl IntoIterator<Item = &'a BufferObject>) -> Vec<u64> {
    bos.into_iter().map(BufferObject::handle).collect()
}

/// Runs `body` on a fresh mi210x8 model that fails as `fail` says.
fn with_model<T: Send>(fail: &[&str], body: impl FnOnce(&Target) -> T + Send) -> T {
    let model = Model::new(ModelConfig {
        machine: Machine::preset("mi210x8").unwrap(),
        fail: fail
            .iter()
            .map(|r| r.parse::<FailRule>().unwrap())
            .collect(),
        ..ModelConfig::default()
    })
    .unwrap();
    let target = Target::Emulated {
        machine: "mi210x8",
        model: model.clone(),
    };
    kfd_emu::supervisor::run_attached(model, || body(&target)).unwrap()
}

/// Builds the rings of the failure tests, in the order given: a device-local ring (owner
/// RW, one hive peer reading) and a USERPTR host ring (the same rights); returns the handles
/// of their buffer objects, device ring first.
fn build_rings(
    kfd: &Kfd,
    topo: &Topology,
    gpus: &[u32],
    device_first: bool,
) -> Result<Vec<u64>, Error> {
    let (hive, _) = hive_and_outsider(topo, gpus);
    let access = AccessMode::ExclusiveProducer.rights(hive[0], &hive[1..2]);
    let pool = MemoryPool::find(topo, hive[0], Granularity::Coarse).unwrap();
    let device = || DeviceRing::new(kfd, &pool, 1, &access, true);
    let host = || GpuHostRing::userptr(kfd, HostMirror::new(1)?, &access, Granularity::Fine);
    let (device, host) = if device_first {
        let d = device()?;
        (d, host()?)
    } else {
        let h = host()?;
        (device()?, h)
    };
    Ok(handles(
        device.buffer_objects().chain(host.buffer_objects()),
    ))
}

#[test]
fn a_failure_part_way_through_construction_leaves_no_buffer_object_behind() {
    for device_first in [false, true] {
        let clean = with_model(&[], |target| {
            let (kfd, topo, gpus) = open(target);
            build_rings(&kfd, &topo, &gpus, device_first).unwrap()
        });
        let rules: &[&str] = if device_first {
            // The device ring: no memory, no export, no import, no mapping of an import.
            &[
                "ALLOC_MEMORY_OF_GPU:ENOMEM:1",
                "EXPORT_DMABUF:ENOMEM:1",
                "IMPORT_DMABUF:ENOMEM:2",
                "MAP_MEMORY_TO_GPU:ENOMEM:1",
            ]
        } else {
            // The host ring: no USERPTR BO, or one that cannot be mapped.
            &["ALLOC_MEMORY_OF_GPU:EFAULT:1", "MAP_MEMORY_TO_GPU:ENOMEM:2"]
        };
        for rule in rules {
            let failures = with_model(&[rule], |target| {
                let (kfd, topo, gpus) = open(target);
                let mut failures = 0;
                let rings = loop {
                    // Each failed attempt uses up one injected failure; the count runs out.
                    match build_rings(&kfd, &topo, &gpus, device_first) {
                        Err(err) => {
                            assert!(matches!(err, Error::Kfd { .. }), "{rule}: {err}");
                            failures += 1;
                        }
                        Ok(rings) => break rings,
                    }
                };
                // Had a failed attempt left a buffer object behind (allocated, imported or
                // still mapped, which FREE refuses), its id would still be taken and the
                // rings built afterwards would get other handles than in a clean model.
                assert_eq!(rings, clean, "{rule}: the handles of a clean run");
                failures
            });
            let want: u32 = rule.rsplit(':').next().unwrap().parse().unwrap();
            assert_eq!(failures, want, "{rule}: every injected failure was hit");
        }
    }
}
