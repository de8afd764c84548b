//! Shared virtual memory through the `kfd-svm` API: attributes, GET, prefetch, XNACK, owned
//! buffers, SMI event streams and the timeline export, on the emulated MI300X and, when present,
//! on the hardware.
//!
//! Every assertion is the kernel's contract (`kfd_svm.c`, `kfd_migrate.c`,
//! `kfd_smi_events.c`; `shared/ref/kfd-abi.md` §4.12–4.13), so the same bodies hold on a real
//! MI300X. Steps that need a GPU to touch memory use kfd-emu's GPU view and run on the emulator
//! only.

use kfd_emu::model::Model;
use kfd_ioctl::abi::{self, AllocMemFlags, SmiEventMask, SvmFlags};
use kfd_ioctl::topology::Topology;
use kfd_ioctl::{Errno, GpuId, Kfd, MemoryPolicy};
use kfd_svm::{
    Access, Error, Location, MapOptions, MigrateTrigger, SmiEvent, SmiStream, SvmAttrs, SvmBuffer,
    SvmRangeInfo, Timeline, UnmapTrigger, get_attrs,
};
use kfd_tests::{Target, VaReservation, on_every_target};

const MIB: usize = 1 << 20;
const PAGE: u64 = 4096;
const DEFAULT_FLAGS: SvmFlags = SvmFlags::HOST_ACCESS.union(SvmFlags::COHERENT);

/// Opens KFD and acquires the first SVM-capable GPU, as libhsakmt would.
fn open(target: &Target) -> (Kfd, GpuId) {
    let kfd = Kfd::open().unwrap_or_else(|e| panic!("{}: {e}", target.name()));
    let topology = Topology::read().unwrap_or_else(|e| panic!("{}: {e}", target.name()));
    let node = topology
        .gpus()
        .find(|n| n.capability().svm_api_supported())
        .unwrap_or_else(|| panic!("{}: no SVM-capable GPU", target.name()));
    let gpu = node.gpu_id().expect("a GPU node has a gpu_id");
    kfd.acquire_vm(gpu, node.properties.drm_render_minor as u32)
        .unwrap();
    kfd.set_memory_policy(gpu, &MemoryPolicy::default())
        .unwrap();
    (kfd, gpu)
}

/// Turns XNACK on, or says why this target cannot.
fn xnack_on(kfd: &Kfd, target: &Target) -> bool {
    match kfd.set_xnack_mode(true) {
        Ok(()) => true,
        Err(e) if e.errno() == Some(Errno::PERM) => {
            kfd_skip::skip_part(
                &format!("{}: the XNACK part", target.name()),
                &e.to_string(),
            );
            false
        }
        Err(e) => panic!("{}: {e}", target.name()),
    }
}

/// The events already in the stream. SVM migrations and unmaps happen inside the ioctl (or
/// munmap) that causes them, and the kernel queues their records before returning, so what
/// is pending after the call is all there is.
fn drain(stream: &mut SmiStream) -> Vec<SmiEvent> {
    stream
        .pending()
        .collect::<Result<Vec<_>, _>>()
        .expect("SMI records in the kernel's format")
}

/// The kernel's errno of an SVM error (client-side range checks say EINVAL, like the kernel).
fn errno(result: Result<impl std::fmt::Debug, Error>) -> Errno {
    match result {
        Err(e) => e
            .errno()
            .unwrap_or_else(|| panic!("an error without errno: {e}")),
        Ok(v) => panic!("expected an error, got {v:?}"),
    }
}

/// An anonymous read-write mapping the test owns (not an [`SvmBuffer`]).
struct Anon {
    addr: usize,
    len: usize,
}

impl Anon {
    fn new(len: usize) -> Anon {
        // SAFETY: a fresh anonymous mapping at an address of the kernel's choosing.
        let addr = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            )
        }
        .expect("mmap") as usize;
        Anon { addr, len }
    }

    fn addr(&self) -> u64 {
        self.addr as u64
    }
}

impl Drop for Anon {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made in `new` (or what is left of it).
        let _ = unsafe { rustix::mm::munmap(self.addr as *mut _, self.len) };
    }
}

#[test]
fn attributes_set_in_one_call_read_back_through_get() {
    on_every_target(&["mi300x"], |target| {
        let (kfd, gpu) = open(target);
        let attrs = SvmAttrs::new()
            .preferred_location(Location::Gpu(gpu))
            .access(gpu, Access::Access)
            .set_flags(SvmFlags::GPU_RO | SvmFlags::GPU_EXEC)
            .clear_flags(SvmFlags::COHERENT)
            .granularity(4);
        let mut buf = SvmBuffer::new(&kfd, 4 * MIB, &attrs).unwrap();
        let flags = SvmFlags::HOST_ACCESS | SvmFlags::GPU_RO | SvmFlags::GPU_EXEC;
        let expected = SvmRangeInfo {
            preferred_location: Location::Gpu(gpu),
            prefetch_location: Location::Undefined,
            flags,
            // One range: the flags clear everywhere are the complement of its flags.
            cleared_flags: Some(!flags),
            granularity: 4,
            access: vec![(gpu, Access::Access)],
        };
        assert_eq!(buf.attrs(&[gpu]).unwrap(), expected, "{}", target.name());

        // Every access kind reads back as the type the kernel writes into the query.
        for access in [Access::AccessInPlace, Access::NoAccess, Access::Access] {
            buf.set_attrs(&SvmAttrs::new().access(gpu, access)).unwrap();
            assert_eq!(buf.attrs(&[gpu]).unwrap().access_of(gpu), Some(access));
        }
        buf.set_attrs(
            &SvmAttrs::new()
                .clear_flags(SvmFlags::GPU_RO)
                .set_flags(SvmFlags::COHERENT)
                .preferred_location(Location::System),
        )
        .unwrap();
        let info = buf.attrs(&[gpu]).unwrap();
        assert_eq!(info.flags, DEFAULT_FLAGS | SvmFlags::GPU_EXEC);
        assert_eq!(info.preferred_location, Location::System);
        // The user-side mirror says the same.
        let (set, cleared) = buf.requested().flags();
        assert_eq!(set, SvmFlags::GPU_EXEC | SvmFlags::COHERENT);
        assert_eq!(cleared, SvmFlags::GPU_RO);
        assert_eq!(buf.requested().preferred(), Some(Location::System));
    });
}

#[test]
fn memory_never_set_reports_the_defaults() {
    on_every_target(&["mi300x"], |target| {
        let (kfd, gpu) = open(target);
        let expect_defaults = |info: SvmRangeInfo, access: Access| {
            let defaults = SvmRangeInfo {
                preferred_location: Location::Undefined,
                prefetch_location: Location::Undefined,
                flags: DEFAULT_FLAGS,
                cleared_flags: Some(!DEFAULT_FLAGS),
                granularity: 9,
                access: vec![(gpu, access)],
            };
            assert_eq!(info, defaults, "{}", target.name());
        };
        // XNACK is off by default: no GPU has access to what was never set.
        assert!(!kfd.xnack_mode().unwrap(), "{}", target.name());
        let plain = Anon::new(2 * MIB);
        expect_defaults(
            get_attrs(&kfd, plain.addr(), 2 * MIB as u64, &[gpu]).unwrap(),
            Access::NoAccess,
        );
        // Registering with no attributes creates ranges with the same defaults.
        let registered = SvmBuffer::new(&kfd, 2 * MIB, &SvmAttrs::new()).unwrap();
        expect_defaults(registered.attrs(&[gpu]).unwrap(), Access::NoAccess);
        drop(registered);
        if xnack_on(&kfd, target) {
            expect_defaults(
                get_attrs(&kfd, plain.addr(), 2 * MIB as u64, &[gpu]).unwrap(),
                Access::Access,
            );
            let registered = SvmBuffer::new(&kfd, 2 * MIB, &SvmAttrs::new()).unwrap();
            expect_defaults(registered.attrs(&[gpu]).unwrap(), Access::Access);
        }
    });
}

#[test]
fn get_reports_the_intersection_over_split_ranges() {
    on_every_target(&["mi300x"], |target| {
        let (kfd, gpu) = open(target);
        let buf = SvmBuffer::with_options(
            &kfd,
            8 * MIB,
            &SvmAttrs::new().access(gpu, Access::Access),
            MapOptions {
                huge_aligned: true,
                ..MapOptions::default()
            },
        )
        .unwrap();
        let (a, half) = (buf.addr(), 4 * MIB as u64);
        let first = SvmAttrs::new()
            .preferred_location(Location::Gpu(gpu))
            .set_flags(SvmFlags::GPU_RO);
        let second = SvmAttrs::new()
            .preferred_location(Location::System)
            .access(gpu, Access::AccessInPlace)
            .granularity(3);
        // SAFETY: both halves are the buffer's memory, which the test owns and does not
        // reference while they are registered.
        unsafe {
            first.apply(&kfd, a, half).unwrap();
            second.apply(&kfd, a + half, half).unwrap();
        }
        let whole = get_attrs(&kfd, a, 2 * half, &[gpu]).unwrap();
        assert_eq!(
            whole.preferred_location,
            Location::Undefined,
            "{}",
            target.name()
        );
        assert_eq!(whole.flags, DEFAULT_FLAGS, "AND over the ranges");
        assert_eq!(
            whole.cleared_flags,
            Some(!(DEFAULT_FLAGS | SvmFlags::GPU_RO)),
            "clear on every range"
        );
        assert_eq!(whole.granularity, 3, "the minimum");
        // Access on one range, access-in-place on the other: neither everywhere.
        assert_eq!(whole.access_of(gpu), Some(Access::NoAccess));

        let head = get_attrs(&kfd, a, half, &[gpu]).unwrap();
        assert_eq!(head.preferred_location, Location::Gpu(gpu));
        assert_eq!(head.flags, DEFAULT_FLAGS | SvmFlags::GPU_RO);
        assert_eq!(head.granularity, 9);
        assert_eq!(head.access_of(gpu), Some(Access::Access));
        // A query straddling the split sees both ranges.
        let straddle = get_attrs(&kfd, a + half - PAGE, 2 * PAGE, &[gpu]).unwrap();
        assert_eq!(straddle.preferred_location, Location::Undefined);
        // Setting the second half like the first makes GET agree again, although the kernel
        // keeps the two ranges apart (it never merges).
        // SAFETY: as above.
        unsafe {
            first
                .clone()
                .access(gpu, Access::Access)
                .granularity(9)
                .apply(&kfd, a + half, half)
                .unwrap();
        }
        let whole = get_attrs(&kfd, a, 2 * half, &[gpu]).unwrap();
        assert_eq!(whole.preferred_location, Location::Gpu(gpu));
        assert_eq!(whole.flags, DEFAULT_FLAGS | SvmFlags::GPU_RO);
        assert_eq!(whole.access_of(gpu), Some(Access::Access));
    });
}

#[test]
fn the_kernel_clamps_granularity_to_0x3f() {
    on_every_target(&["mi300x"], |target| {
        let (kfd, gpu) = open(target);
        let buf = SvmBuffer::new(&kfd, 2 * MIB, &SvmAttrs::new()).unwrap();
        let raw = [abi::kfd_ioctl_svm_attribute {
            r#type: abi::KFD_IOCTL_SVM_ATTR_GRANULARITY,
            value: 0xff,
        }];
        // SAFETY: the buffer's own memory, registered already and not referenced.
        unsafe { kfd.svm_set_attr(buf.addr(), buf.len() as u64, &raw) }.unwrap();
        assert_eq!(
            buf.attrs(&[gpu]).unwrap().granularity,
            0x3f,
            "{}",
            target.name()
        );
    });
}

#[test]
fn errors_follow_the_kernel_contract() {
    on_every_target(&["mi300x"], |target| {
        let (kfd, gpu) = open(target);
        let name = target.name();
        let mem = Anon::new(4 * MIB);
        let a = mem.addr();
        let set = |attrs: SvmAttrs, start: u64, size: u64| {
            // SAFETY: every call targets the test's own mapping (or fails before registering).
            unsafe { attrs.apply(&kfd, start, size) }
        };

        // What the client refuses, the kernel refuses with the same errno.
        for (start, size) in [(a + 1, PAGE), (a, PAGE + 1), (a, 0), (0, PAGE)] {
            assert_eq!(
                errno(set(SvmAttrs::new(), start, size)),
                Errno::INVAL,
                "{name}"
            );
            // SAFETY: as above; the kernel refuses before touching anything.
            let raw = unsafe { kfd.svm_set_attr(start, size, &[]) };
            assert_eq!(
                raw.map_err(|e| e.errno()),
                Err(Some(Errno::INVAL)),
                "{name}"
            );
        }

        // A gpu_id the process does not have, as a location or an access target.
        let bad = GpuId(gpu.get() ^ 0x8000);
        let cases: [(SvmAttrs, Errno); 5] = [
            (
                SvmAttrs::new().preferred_location(Location::Gpu(bad)),
                Errno::INVAL,
            ),
            (
                SvmAttrs::new().prefetch_location(Location::Gpu(bad)),
                Errno::INVAL,
            ),
            (SvmAttrs::new().access(bad, Access::Access), Errno::INVAL),
            // PREFETCH_LOC may not be UNDEFINED.
            (
                SvmAttrs::new().prefetch_location(Location::Undefined),
                Errno::INVAL,
            ),
            // ACCESS to gpu_id 0 (system memory is no access target).
            (SvmAttrs::new().access(0, Access::Access), Errno::INVAL),
        ];
        for (attrs, expected) in cases {
            assert_eq!(
                errno(set(attrs.clone(), a, PAGE)),
                expected,
                "{name}: {attrs:?}"
            );
        }
        // The errors name the attribute and the GPU, and say it is not the process's.
        for (attrs, attribute) in [
            (
                SvmAttrs::new().preferred_location(Location::Gpu(bad)),
                "PREFERRED_LOC",
            ),
            (SvmAttrs::new().access(bad, Access::Access), "ACCESS"),
        ] {
            let err = set(attrs, a, PAGE).unwrap_err();
            match &err {
                Error::Kfd(kfd_ioctl::Error::SvmGpu {
                    op,
                    attribute: named,
                    gpu_id,
                    known,
                    ..
                }) => {
                    assert_eq!((*op, *named, *gpu_id), ("SET_ATTR", attribute, bad));
                    assert!(known.contains(&gpu), "{name}: {err}");
                }
                other => panic!("{name}: expected the GPU named, got {other}"),
            }
            assert!(
                err.to_string().contains(&format!(
                    "attribute {attribute} names gpu {bad:#x}, which is not a GPU of this process"
                )),
                "{name}: {err}"
            );
        }
        let get = get_attrs(&kfd, a, PAGE, &[bad]).unwrap_err();
        assert!(
            matches!(&get, Error::Kfd(kfd_ioctl::Error::SvmGpu { op: "GET_ATTR", gpu_id, .. }) if *gpu_id == bad),
            "{name}: {get}"
        );
        // An attribute type the kernel does not know.
        let unknown = SvmAttrs::new().with(kfd_svm::SvmAttr::Unknown {
            attr_type: 8,
            value: 0,
        });
        assert_eq!(errno(set(unknown, a, PAGE)), Errno::INVAL, "{name}");
        // GET: an unknown GPU in an access query.
        assert_eq!(
            errno(get_attrs(&kfd, a, PAGE, &[bad])),
            Errno::INVAL,
            "{name}"
        );

        // A hole in the range: EFAULT for SET and GET.
        // SAFETY: unmapping the middle page of the test's own mapping.
        unsafe { rustix::mm::munmap((a + PAGE) as *mut _, PAGE as usize) }.unwrap();
        assert_eq!(
            errno(set(SvmAttrs::new(), a, 3 * PAGE)),
            Errno::FAULT,
            "{name}"
        );
        assert_eq!(
            errno(get_attrs(&kfd, a, 3 * PAGE, &[gpu])),
            Errno::FAULT,
            "{name}"
        );

        // A buffer object mapped to the GPU at the same address: EADDRINUSE.
        let va = VaReservation::new(4 * MIB, 2 * MIB);
        let bo = kfd
            .alloc_memory_of_gpu(
                gpu,
                va.addr(),
                2 * MIB as u64,
                AllocMemFlags::VRAM | AllocMemFlags::WRITABLE,
            )
            .unwrap();
        kfd.map_memory_to_gpu(&bo, &[gpu]).unwrap();
        assert_eq!(
            errno(set(SvmAttrs::new(), va.addr(), 2 * MIB as u64)),
            Errno::ADDRINUSE,
            "{name}"
        );

        // A CPU mapping of a buffer object is device memory (VM_PFNMAP/MIXEDMAP): EFAULT.
        let gtt = kfd
            .alloc_memory_of_gpu(
                gpu,
                va.addr() + 2 * MIB as u64,
                2 * MIB as u64,
                AllocMemFlags::GTT | AllocMemFlags::WRITABLE,
            )
            .unwrap();
        let cpu = gtt.map_cpu().unwrap();
        assert_eq!(
            errno(set(SvmAttrs::new(), cpu.as_ptr() as u64, 2 * MIB as u64)),
            Errno::FAULT,
            "{name}"
        );
    });
}

#[test]
fn xnack_mode_is_queried_and_set() {
    on_every_target(&["mi300x"], |target| {
        let (kfd, _gpu) = open(target);
        assert!(
            !kfd.xnack_mode().unwrap(),
            "{}: off by default",
            target.name()
        );
        // Setting the current mode is a no-op that succeeds.
        kfd.set_xnack_mode(false).unwrap();
        if xnack_on(&kfd, target) {
            assert!(kfd.xnack_mode().unwrap());
            kfd.set_xnack_mode(false).unwrap();
            assert!(!kfd.xnack_mode().unwrap());
        }
    });
}

/// The migrations in `events`, checked to be START/END pairs of one kind in order, as
/// `(start_page, npages)` with the direction and trigger they all share.
fn migration_pairs(
    events: &[SmiEvent],
    pid: u32,
    from: Location,
    to: Location,
    trigger: MigrateTrigger,
) -> Vec<(u64, u64)> {
    assert!(
        events.len().is_multiple_of(2),
        "START/END pairs: {events:#?}"
    );
    events
        .chunks(2)
        .map(|pair| match pair {
            [
                SmiEvent::MigrateStart {
                    pid: p1,
                    start_page: s1,
                    npages: n1,
                    from: f1,
                    to: t1,
                    trigger: tr1,
                    ..
                },
                SmiEvent::MigrateEnd {
                    pid: p2,
                    start_page: s2,
                    npages: n2,
                    from: f2,
                    to: t2,
                    trigger: tr2,
                    error_code,
                    ..
                },
            ] => {
                assert_eq!((*p1, *p2), (pid, pid));
                assert_eq!((s1, n1), (s2, n2));
                assert_eq!((*f1, *t1, *f2, *t2), (from, to, from, to));
                assert_eq!((*tr1, *tr2), (trigger, trigger));
                assert_eq!(error_code.unwrap_or(0), 0);
                (*s1, *n1)
            }
            other => panic!("not a START/END pair: {other:#?}"),
        })
        .collect()
}

/// Asserts that `pairs` cover `[first_page, first_page + npages)` exactly, in order.
fn assert_covers(pairs: &[(u64, u64)], first_page: u64, npages: u64) {
    let mut next = first_page;
    for &(start, n) in pairs {
        assert_eq!(start, next, "contiguous, in order: {pairs:x?}");
        next += n;
    }
    assert_eq!(next, first_page + npages, "the whole range: {pairs:x?}");
}

#[test]
fn prefetch_migrates_and_the_smi_stream_reports_it() {
    on_every_target(&["mi300x"], |target| {
        let (kfd, gpu) = open(target);
        let pid = std::process::id();
        let mut stream = SmiStream::open(
            &kfd,
            gpu,
            SmiEventMask::MIGRATE_START | SmiEventMask::MIGRATE_END,
        )
        .unwrap();
        let mut buf =
            SvmBuffer::new(&kfd, 4 * MIB, &SvmAttrs::new().access(gpu, Access::Access)).unwrap();
        let pattern: Vec<u8> = (0..buf.len()).map(|i| (i * 7 % 251) as u8).collect();
        buf.copy_in(0, &pattern).unwrap();
        assert!(
            drain(&mut stream).is_empty(),
            "registering migrates nothing"
        );

        let first_page = buf.addr() / PAGE;
        let npages = buf.len() as u64 / PAGE;
        buf.prefetch(Location::Gpu(gpu)).unwrap();
        let to_gpu = drain(&mut stream);
        let pairs = migration_pairs(
            &to_gpu,
            pid,
            Location::System,
            Location::Gpu(gpu),
            MigrateTrigger::Prefetch,
        );
        assert_covers(&pairs, first_page, npages);
        let info = buf.attrs(&[gpu]).unwrap();
        assert_eq!(
            info.prefetch_location,
            Location::Gpu(gpu),
            "{}",
            target.name()
        );

        buf.prefetch(Location::System).unwrap();
        let to_sys = drain(&mut stream);
        let pairs = migration_pairs(
            &to_sys,
            pid,
            Location::Gpu(gpu),
            Location::System,
            MigrateTrigger::Prefetch,
        );
        assert_covers(&pairs, first_page, npages);

        // The bytes survived both trips.
        let mut back = vec![0u8; buf.len()];
        buf.copy_out(0, &mut back).unwrap();
        assert!(
            back == pattern,
            "{}: data changed by migration",
            target.name()
        );

        // A mask without MIGRATE_START delivers only the ends.
        stream.set_mask(SmiEventMask::MIGRATE_END).unwrap();
        buf.prefetch(Location::Gpu(gpu)).unwrap();
        let ends = drain(&mut stream);
        assert!(!ends.is_empty());
        assert!(
            ends.iter()
                .all(|e| matches!(e, SmiEvent::MigrateEnd { .. })),
            "{ends:#?}"
        );
    });
}

#[test]
fn a_shared_mapping_keeps_its_data_when_prefetched() {
    on_every_target(&["mi300x"], |target| {
        let (kfd, gpu) = open(target);
        let options = MapOptions {
            shared: true,
            ..MapOptions::default()
        };
        let attrs = SvmAttrs::new().access(gpu, Access::Access);
        let mut buf = SvmBuffer::with_options(&kfd, 2 * MIB, &attrs, options).unwrap();
        buf.copy_in(4096, b"shared pages stay in system memory")
            .unwrap();
        // HMM cannot migrate shared pages; the prefetch still succeeds and is recorded.
        buf.prefetch(Location::Gpu(gpu)).unwrap();
        assert_eq!(
            buf.attrs(&[gpu]).unwrap().prefetch_location,
            Location::Gpu(gpu),
            "{}",
            target.name()
        );
        let mut back = [0u8; 34];
        buf.copy_out(4096, &mut back).unwrap();
        assert_eq!(&back, b"shared pages stay in system memory");
        if let Target::Emulated { model, .. } = target {
            let mut seen = [0u8; 34];
            model
                .gpu_read(tgid(), gpu.get(), buf.addr() + 4096, &mut seen)
                .expect("the GPU reads shared pages where they are");
            assert_eq!(&seen, b"shared pages stay in system memory");
        }
    });
}

#[test]
fn dropping_a_buffer_removes_its_range() {
    on_every_target(&["mi300x"], |target| {
        let (kfd, gpu) = open(target);
        let pid = std::process::id();
        let mut stream = SmiStream::open(&kfd, gpu, SmiEventMask::UNMAP_FROM_GPU).unwrap();
        let attrs = SvmAttrs::new()
            .preferred_location(Location::Gpu(gpu))
            .access(gpu, Access::Access);
        let mut buf = SvmBuffer::new(&kfd, 2 * MIB, &attrs).unwrap();
        // Prefetching maps the range on the GPU, so the unmap has something to undo.
        buf.prefetch(Location::Gpu(gpu)).unwrap();
        let (addr, len) = (buf.addr(), buf.len());
        drop(buf);
        // New memory at the same address is not the old range: GET sees the defaults. (GET
        // also flushes the kernel's deferred removal of the range.)
        // SAFETY: the address range was just unmapped; MAP_FIXED_NOREPLACE refuses to replace
        // anything that took its place meanwhile.
        let again = unsafe {
            rustix::mm::mmap_anonymous(
                addr as *mut _,
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::FIXED_NOREPLACE,
            )
        }
        .expect("remapping the freed address");
        let info = get_attrs(&kfd, addr, len as u64, &[gpu]).unwrap();
        assert_eq!(
            info.preferred_location,
            Location::Undefined,
            "{}",
            target.name()
        );
        assert_eq!(info.prefetch_location, Location::Undefined);
        assert_eq!(info.access_of(gpu), Some(Access::NoAccess));
        // The unmap took the pages off the GPU, and said why.
        let unmaps = drain(&mut stream);
        let mut covered = 0;
        for event in &unmaps {
            match event {
                SmiEvent::UnmapFromGpu {
                    pid: p,
                    start_page,
                    npages,
                    node,
                    trigger: UnmapTrigger::UnmapFromCpu,
                    ..
                } => {
                    assert_eq!((*p, *node), (pid, gpu.get()));
                    assert!(*start_page >= addr / PAGE);
                    covered += npages;
                }
                other => panic!("{}: unexpected {other:?}", target.name()),
            }
        }
        assert_eq!(covered, len as u64 / PAGE, "{unmaps:#?}");
        // SAFETY: the mapping made above, unused since.
        unsafe { rustix::mm::munmap(again, len) }.unwrap();
    });
}

/// This process's tgid, as kfd-emu's model knows it.
fn tgid() -> i32 {
    std::process::id() as i32
}

/// The GPU view of the emulated target, if this is one.
fn gpu_view(target: &Target) -> Option<&Model> {
    match target {
        Target::Emulated { model, .. } => Some(model),
        Target::Hardware => None,
    }
}

#[test]
fn end_to_end_prefetch_gpu_fault_cpu_read_and_timeline() {
    on_every_target(&["mi300x"], |target| {
        let (kfd, gpu) = open(target);
        let name = target.name();
        if !xnack_on(&kfd, target) {
            return;
        }
        let pid = std::process::id();
        let mut stream = SmiStream::open(
            &kfd,
            gpu,
            SmiEventMask::MIGRATE_START
                | SmiEventMask::MIGRATE_END
                | SmiEventMask::PAGE_FAULT_START
                | SmiEventMask::PAGE_FAULT_END,
        )
        .unwrap();
        let mut timeline = Timeline::new();

        // 64 MiB preferring the GPU, which may access it; 2 MiB granules.
        let attrs = SvmAttrs::new()
            .preferred_location(Location::Gpu(gpu))
            .access(gpu, Access::Access)
            .granularity(9);
        let options = MapOptions {
            huge_aligned: true,
            ..MapOptions::default()
        };
        let buf = SvmBuffer::with_options(&kfd, 64 * MIB, &attrs, options).unwrap();
        let pattern: Vec<u8> = (0..buf.len()).map(|i| (i % 253) as u8).collect();
        buf.copy_in(0, &pattern).unwrap();
        let base = buf.addr();
        let half = 32 * MIB as u64;

        // Prefetch the first half to VRAM.
        // SAFETY: the buffer's own memory; no reference into it is held.
        unsafe { kfd_svm::prefetch(&kfd, base, half, Location::Gpu(gpu)) }.unwrap();
        let events = drain(&mut stream);
        let pairs = migration_pairs(
            &events,
            pid,
            Location::System,
            Location::Gpu(gpu),
            MigrateTrigger::Prefetch,
        );
        assert_covers(&pairs, base / PAGE, half / PAGE);
        timeline.extend(events);

        if let Some(model) = gpu_view(target) {
            // A GPU write to the prefetched half: already mapped, in VRAM, no event.
            model
                .gpu_write(tgid(), gpu.get(), base + 100, b"gpu wrote here")
                .expect("the prefetched half is mapped on the GPU");
            assert_eq!(drain(&mut stream), vec![], "{name}");

            // A GPU write to the other half faults, and the kernel migrates the 2 MiB granule
            // around the fault to the preferred location before mapping it.
            let fault_at = base + half + 8 * MIB as u64 + 4096 + 8;
            model
                .gpu_write(tgid(), gpu.get(), fault_at, b"faulted in")
                .expect("XNACK on: the fault is recovered");
            let events = drain(&mut stream);
            let granule = (fault_at & !(2 * MIB as u64 - 1)) / PAGE;
            assert_eq!(events.len(), 4, "{name}: {events:#?}");
            assert!(
                matches!(
                    events[0],
                    SmiEvent::PageFaultStart { pid: p, addr_page, node, write: true, .. }
                        if p == pid && addr_page == fault_at / PAGE && node == gpu
                ),
                "{events:#?}"
            );
            assert!(
                matches!(
                    events[1],
                    SmiEvent::MigrateStart {
                        pid: p, start_page, npages: 512, from: Location::System, to,
                        prefetch_loc: Location::Undefined, preferred_loc,
                        trigger: MigrateTrigger::PageFaultGpu, ..
                    } if p == pid && start_page == granule && to == Location::Gpu(gpu)
                        && preferred_loc == Location::Gpu(gpu)
                ),
                "{events:#?}"
            );
            assert!(
                matches!(
                    events[2],
                    SmiEvent::MigrateEnd {
                        pid: p, start_page, npages: 512, from: Location::System, to,
                        trigger: MigrateTrigger::PageFaultGpu, error_code, ..
                    } if p == pid && start_page == granule && to == Location::Gpu(gpu)
                        && error_code.unwrap_or(0) == 0
                ),
                "{events:#?}"
            );
            assert!(
                matches!(
                    events[3],
                    SmiEvent::PageFaultEnd { pid: p, addr_page, node, migrated: true, .. }
                        if p == pid && addr_page == fault_at / PAGE && node == gpu
                ),
                "{events:#?}"
            );
            // Timestamps never go backwards within the handling of one fault.
            let times: Vec<i64> = events.iter().filter_map(SmiEvent::ns).collect();
            assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
            timeline.extend(events);

            let mut seen = [0u8; 10];
            model
                .gpu_read(tgid(), gpu.get(), fault_at, &mut seen)
                .unwrap();
            assert_eq!(&seen, b"faulted in");
        }

        // The CPU sees everything: its own pattern, and what the GPU wrote. (On the hardware
        // these reads fault VRAM pages back to system memory; those events are not asserted.)
        let mut back = vec![0u8; buf.len()];
        buf.copy_out(0, &mut back).unwrap();
        let mut expected = pattern.clone();
        if gpu_view(target).is_some() {
            expected[100..114].copy_from_slice(b"gpu wrote here");
            let at = (half + 8 * MIB as u64 + 4096 + 8) as usize;
            expected[at..at + 10].copy_from_slice(b"faulted in");
        }
        assert!(back == expected, "{name}: the CPU view differs");

        // The timeline of it all, as Perfetto would load it.
        let trace = timeline.to_chrome_trace();
        let events = trace["traceEvents"].as_array().unwrap();
        let count = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
        let faulted = gpu_view(target).is_some();
        assert_eq!(count("X"), pairs.len() + usize::from(faulted), "{name}");
        assert_eq!(count("i"), 2 * usize::from(faulted), "{name}");
        let total: u64 = timeline.bytes_migrated().values().sum();
        let expected_bytes = half + if faulted { 2 * MIB as u64 } else { 0 };
        assert_eq!(total, expected_bytes, "{name}");
        let last_counter = events
            .iter()
            .rev()
            .find(|e| e["ph"] == "C")
            .expect("a bytes counter");
        assert_eq!(last_counter["args"]["bytes"].as_u64(), Some(expected_bytes));
    });
}

/// SVM over the caller's own memory, as ROCr takes it: a range that is not page aligned (a
/// `malloc` block) is widened to whole pages (`Runtime::SetSvmAttrib` aligns the start down
/// and the end up), the whole pages get the attributes, and `unregister` gives them back the
/// defaults a range never set has (no preferred location, default flags and granularity,
/// no GPU access with XNACK off), the pages back in system memory.
#[test]
fn the_callers_memory_is_rounded_to_pages_and_unregistered() {
    on_every_target(&["mi300x"], |target| {
        let (kfd, gpu) = open(target);
        let name = target.name();
        let mem = Anon::new(4 * MIB);
        // A "malloc block" of 5000 bytes starting 100 bytes into the second page.
        let start = mem.addr() + PAGE + 100;
        assert_eq!(
            kfd_svm::page_range(start, 5000).unwrap(),
            (mem.addr() + PAGE, 2 * PAGE),
            "{name}"
        );
        let attrs = SvmAttrs::new()
            .preferred_location(Location::Gpu(gpu))
            .access(gpu, Access::Access);
        // SAFETY: the range lies in the test's own mapping, which outlives the registration.
        let (base, size) = unsafe { attrs.apply_rounded(&kfd, start, 5000) }.unwrap();
        assert_eq!((base, size), (mem.addr() + PAGE, 2 * PAGE));
        let set = get_attrs(&kfd, base, size, &[gpu]).unwrap();
        assert_eq!(set.preferred_location, Location::Gpu(gpu), "{name}");
        assert_eq!(set.access_of(gpu), Some(Access::Access), "{name}");
        // The page before the block was not touched.
        let before = get_attrs(&kfd, mem.addr(), PAGE, &[gpu]).unwrap();
        assert_eq!(before.preferred_location, Location::Undefined, "{name}");

        // SAFETY: as above.
        unsafe { kfd_svm::unregister(&kfd, base, size, &[gpu]) }.unwrap();
        let back = get_attrs(&kfd, base, size, &[gpu]).unwrap();
        assert_eq!(
            back,
            SvmRangeInfo {
                preferred_location: Location::Undefined,
                prefetch_location: Location::System,
                flags: DEFAULT_FLAGS,
                cleared_flags: Some(!DEFAULT_FLAGS),
                granularity: 9,
                access: vec![(gpu, Access::NoAccess)],
            },
            "{name}: the defaults, the pages in system memory"
        );
        // Zero and wrapping ranges are refused before any call.
        assert!(kfd_svm::page_range(start, 0).is_err());
        assert!(kfd_svm::page_range(100, 10).is_err(), "page 0");
        assert!(kfd_svm::page_range(u64::MAX - 10, 100).is_err());
    });
}
