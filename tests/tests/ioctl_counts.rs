//! How many ioctls each operation of the safe API issues — a property of the library, the
//! same on any machine — counted by wrapping kfd-emu's model.

use std::sync::Arc;

use kfd_emu::counting::Counting;
use kfd_emu::machine::Machine;
use kfd_emu::model::{Model, ModelConfig};
use kfd_ioctl::abi::AllocMemFlags;
use kfd_ioctl::topology::Topology;
use kfd_ioctl::{GpuId, Kfd, MemoryPolicy};
use kfd_svm::{Access, Location, SvmAttrs, get_attrs};
use kfd_tests::VaReservation;

const MIB: u64 = 1 << 20;

fn counting(machine: &str) -> Arc<Counting<Model>> {
    let model = Model::new(ModelConfig {
        machine: Machine::preset(machine).expect("preset"),
        ..ModelConfig::default()
    })
    .expect("model");
    Counting::new(model)
}

/// Runs `op` and returns the ioctls it issued, by name.
fn issued(emu: &Counting<Model>, op: impl FnOnce()) -> Vec<(&'static str, u64)> {
    let before = emu.counts();
    op();
    emu.counts().since(&before)
}

#[test]
fn each_memory_operation_issues_the_ioctls_it_names() {
    let emu = counting("mi210x8");
    let backend = emu.clone();
    kfd_emu::supervisor::run_attached(backend, || {
        let mut kfd = None;
        assert_eq!(
            issued(&emu, || kfd = Some(Kfd::open().unwrap())),
            [("GET_VERSION", 1)],
            "open reads the version once"
        );
        let kfd = kfd.unwrap();
        assert_eq!(
            issued(&emu, || assert_eq!(kfd.version().major, 1)),
            [],
            "and caches it"
        );

        let topo = Topology::read().unwrap();
        let gpus: Vec<(GpuId, u32)> = topo
            .gpus()
            .filter_map(|n| Some((n.gpu_id()?, n.properties.drm_render_minor as u32)))
            .collect();
        let ids: Vec<GpuId> = gpus.iter().map(|g| g.0).collect();
        assert_eq!(ids.len(), 8);
        let (g0, minor0) = gpus[0];
        assert_eq!(
            issued(&emu, || kfd.acquire_vm(g0, minor0).unwrap()),
            [("ACQUIRE_VM", 1)]
        );
        assert_eq!(
            issued(&emu, || kfd.acquire_vm(g0, minor0).unwrap()),
            [],
            "once per GPU"
        );
        for &(g, minor) in &gpus[1..] {
            kfd.acquire_vm(g, minor).unwrap();
        }
        assert_eq!(
            issued(&emu, || kfd
                .set_memory_policy(g0, &MemoryPolicy::default())
                .unwrap()),
            [("SET_MEMORY_POLICY", 1)]
        );
        assert_eq!(
            issued(&emu, || assert_eq!(
                kfd.get_process_apertures().unwrap().len(),
                8
            )),
            [("GET_PROCESS_APERTURES_NEW", 2)],
            "a count query, then the fill"
        );

        let va = VaReservation::new((8 * MIB) as usize, (2 * MIB) as usize);
        let flags = AllocMemFlags::GTT | AllocMemFlags::WRITABLE;
        let mut bo = None;
        assert_eq!(
            issued(&emu, || bo = Some(
                kfd.alloc_memory_of_gpu(g0, va.addr(), 2 * MIB, flags)
                    .unwrap()
            )),
            [("ALLOC_MEMORY_OF_GPU", 1)]
        );
        let bo = bo.unwrap();
        assert_eq!(
            issued(&emu, || kfd.map_memory_to_gpu(&bo, &ids).unwrap()),
            [("MAP_MEMORY_TO_GPU", 1)],
            "one ioctl for the whole device list"
        );
        assert_eq!(
            issued(&emu, || drop(bo.map_cpu().unwrap())),
            [],
            "mmap is no ioctl"
        );

        let mut dmabuf = None;
        assert_eq!(
            issued(&emu, || dmabuf =
                Some(kfd.export_dmabuf(&bo, true).unwrap())),
            [("EXPORT_DMABUF", 1)]
        );
        let dmabuf = dmabuf.unwrap();
        let mut import = None;
        assert_eq!(
            issued(&emu, || {
                import = Some(
                    kfd.import_dmabuf(
                        std::os::fd::AsFd::as_fd(&dmabuf),
                        ids[1],
                        va.addr() + 4 * MIB,
                    )
                    .unwrap(),
                )
            }),
            [("GET_DMABUF_INFO", 1), ("IMPORT_DMABUF", 1)],
            "the size comes from GET_DMABUF_INFO"
        );
        assert_eq!(
            issued(&emu, || drop(import)),
            [("FREE_MEMORY_OF_GPU", 1)],
            "an unmapped BO is freed without an unmap"
        );
        assert_eq!(
            issued(&emu, || drop(bo)),
            [("FREE_MEMORY_OF_GPU", 1), ("UNMAP_MEMORY_FROM_GPU", 1)],
            "dropping a mapped BO: one unmap over all its GPUs, one free"
        );
        assert_eq!(
            issued(&emu, || assert!(kfd.available_memory(g0).unwrap() > 0)),
            [("AVAILABLE_MEMORY", 1)]
        );
    })
    .expect("attach");
}

#[test]
fn an_svm_attribute_set_or_query_is_one_ioctl_whatever_it_carries() {
    let emu = counting("mi210x8");
    let backend = emu.clone();
    kfd_emu::supervisor::run_attached(backend, || {
        let kfd = Kfd::open().unwrap();
        let topo = Topology::read().unwrap();
        let mut ids = Vec::new();
        for n in topo.gpus() {
            let g = n.gpu_id().unwrap();
            kfd.acquire_vm(g, n.properties.drm_render_minor as u32)
                .unwrap();
            ids.push(g);
        }
        let mem = VaReservation::new((2 * MIB) as usize, (2 * MIB) as usize);
        // A reservation is PROT_NONE; SVM needs readable memory: map it.
        // SAFETY: remaps the reservation this test owns with fresh anonymous memory.
        unsafe {
            rustix::mm::mmap_anonymous(
                mem.addr() as *mut _,
                (2 * MIB) as usize,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::FIXED,
            )
        }
        .unwrap();
        let mut attrs = SvmAttrs::new()
            .preferred_location(Location::Gpu(ids[0]))
            .granularity(4);
        for &g in &ids {
            attrs = attrs.access(g, Access::Access);
        }
        assert_eq!(attrs.len(), 10);
        let set = issued(&emu, || {
            // SAFETY: the range is this test's own memory, touched by no Rust reference.
            unsafe { attrs.apply(&kfd, mem.addr(), 2 * MIB) }.unwrap()
        });
        assert_eq!(set, [("SVM", 1)], "ten attributes, one SET_ATTR");
        let get = issued(&emu, || {
            let info = get_attrs(&kfd, mem.addr(), 2 * MIB, &ids).unwrap();
            assert_eq!(info.preferred_location, Location::Gpu(ids[0]));
        });
        assert_eq!(
            get,
            [("SVM", 1)],
            "everything and eight access queries, one GET_ATTR"
        );
    })
    .expect("attach");
}
