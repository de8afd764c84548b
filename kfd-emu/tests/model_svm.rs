//! AMDKFD_IOC_SVM's rules (kfd-abi.md §4.13, `kfd_svm.c`) through the product's `Kfd` on a
//! thread attached to the model, over memory the test maps itself — the calls and the
//! expectations are those of a real MI300X.

mod model_support;
mod model_svm_support;

use std::sync::Arc;

use kfd_emu::model::{Model, ModelConfig};
use kfd_ioctl::Errno;
use kfd_ioctl::abi::*;
use model_support::Emu;
use model_svm_support::*;
use rustix::mm::{MapFlags, ProtFlags};

const UNDEFINED: u32 = KFD_IOCTL_SVM_LOCATION_UNDEFINED;
const DEFAULT_FLAGS: u32 = KFD_IOCTL_SVM_FLAG_HOST_ACCESS | KFD_IOCTL_SVM_FLAG_COHERENT;
const VRAM_RW: AllocMemFlags = AllocMemFlags::VRAM
    .union(AllocMemFlags::WRITABLE)
    .union(AllocMemFlags::PUBLIC);

#[test]
fn set_attr_checks_come_in_the_kernels_order() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let mem = Anon::new(2 * MIB);
        let a = mem.addr;
        // A VMA of a stand-in file is device memory (VM_IO | VM_PFNMAP on real hardware).
        let bo = kfd
            .alloc_memory_of_gpu(g, 0x6000_0000_0000, 2 * MIB, VRAM_RW)
            .expect("alloc");
        let cpu = bo.map_cpu().expect("mmap the render node");
        let device = cpu.as_ptr() as u64;
        let cases: Vec<(&str, u64, u64, Vec<kfd_ioctl_svm_attribute>, Errno)> = vec![
            ("start not page aligned", a + 8, PAGE, vec![], Errno::INVAL),
            ("size not page aligned", a, PAGE + 1, vec![], Errno::INVAL),
            ("size zero", a, 0, vec![], Errno::INVAL),
            ("start zero", 0, PAGE, vec![], Errno::INVAL),
            (
                "unknown attribute type",
                a,
                PAGE,
                vec![attr(8, 0)],
                Errno::INVAL,
            ),
            (
                "preferred on no GPU",
                a,
                PAGE,
                vec![preferred(1)],
                Errno::INVAL,
            ),
            (
                "prefetch UNDEFINED",
                a,
                PAGE,
                vec![prefetch(UNDEFINED)],
                Errno::INVAL,
            ),
            ("access to gpu_id 0", a, PAGE, vec![access(0)], Errno::INVAL),
            (
                "in place on no GPU",
                a,
                PAGE,
                vec![in_place(2)],
                Errno::INVAL,
            ),
            (
                "no access on no GPU",
                a,
                PAGE,
                vec![no_access(3)],
                Errno::INVAL,
            ),
            (
                "a bad attribute after good ones",
                a,
                PAGE,
                vec![preferred(g), granularity(3), attr(0x100, 0)],
                Errno::INVAL,
            ),
            (
                "attributes are checked before memory",
                0x10_0000,
                PAGE,
                vec![attr(9, 0)],
                Errno::INVAL,
            ),
            (
                "a hole after the mapping",
                a,
                2 * MIB + PAGE,
                vec![],
                Errno::FAULT,
            ),
            ("nothing mapped", 0x10_0000, PAGE, vec![], Errno::FAULT),
            ("device memory", device, PAGE, vec![], Errno::FAULT),
        ];
        for (what, start, size, attrs, errno) in cases {
            assert_eq!(svm_set(&kfd, start, size, &attrs), Err(errno), "{what}");
        }
        assert!(
            view.svm_ranges(pid()).is_empty(),
            "a failed SET made no range"
        );
        assert_eq!(svm_set(&kfd, a, 2 * MIB, &[preferred(g)]), Ok(()));
    })
    .expect("attach");
}

#[test]
fn mapped_gpu_addresses_are_in_use_and_unmapped_ones_are_not() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        // libhsakmt's layout: the GPU VA of a BO equals a CPU address the process reserved.
        let mem = Anon::new(4 * MIB);
        let bo = kfd
            .alloc_memory_of_gpu(g, mem.addr, 2 * MIB, VRAM_RW)
            .expect("alloc at the CPU address");
        assert_eq!(
            svm_set(&kfd, mem.addr, 4 * MIB, &[]),
            Ok(()),
            "allocated but not mapped: not in use"
        );
        let other = Anon::new(4 * MIB);
        let mapped = kfd
            .alloc_memory_of_gpu(g, other.page(256), 2 * MIB, VRAM_RW)
            .expect("alloc");
        kfd.map_memory_to_gpu(&mapped, &gpus).expect("map");
        assert_eq!(
            svm_set(&kfd, other.addr, PAGE, &[]),
            Ok(()),
            "next to the mapping"
        );
        assert_eq!(
            svm_set(&kfd, other.addr, 4 * MIB, &[]),
            Err(Errno::ADDRINUSE)
        );
        let mut q = [attr(KFD_IOCTL_SVM_ATTR_GRANULARITY, 0)];
        assert_eq!(
            svm_get(&kfd, other.page(300), PAGE, &mut q),
            Err(Errno::ADDRINUSE),
            "GET checks the same"
        );
        // A USERPTR BO mapped at its own CPU address.
        let host = Anon::new(2 * MIB);
        let flags = AllocMemFlags::USERPTR | AllocMemFlags::WRITABLE;
        // SAFETY: `host` outlives the BO, which is freed (dropped) first.
        let user =
            unsafe { kfd.alloc_userptr(g, host.addr, host.addr, 2 * MIB, flags) }.expect("userptr");
        kfd.map_memory_to_gpu(&user, &gpus).expect("map");
        assert_eq!(
            svm_set(&kfd, host.page(3), PAGE, &[]),
            Err(Errno::ADDRINUSE)
        );
        drop((bo, mapped, user));
        assert_eq!(svm_set(&kfd, other.addr, 4 * MIB, &[]), Ok(()), "unmapped");
    })
    .expect("attach");
}

#[test]
fn alloc_refuses_addresses_of_svm_ranges() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let mem = Anon::new(4 * MIB);
        svm_set(&kfd, mem.page(512), 2 * MIB, &[]).expect("register the second half");
        let alloc = |va, flags| {
            kfd.alloc_memory_of_gpu(g, va, 2 * MIB, flags)
                .map(drop)
                .map_err(|e| e.errno())
        };
        assert_eq!(alloc(mem.page(256), VRAM_RW), Err(Some(Errno::ADDRINUSE)));
        assert_eq!(alloc(mem.addr, VRAM_RW), Ok(()), "just below the range");
        assert_eq!(
            alloc(0, VRAM_RW),
            Ok(()),
            "VRAM without a VA is not checked"
        );
        // A USERPTR's CPU range counts too, whatever its GPU address.
        let flags = AllocMemFlags::USERPTR | AllocMemFlags::WRITABLE;
        // SAFETY: the memory belongs to `mem`, which outlives the attempt (which fails).
        let user = unsafe { kfd.alloc_userptr(g, 0x6000_0000_0000, mem.page(600), PAGE, flags) };
        assert_eq!(user.err().and_then(|e| e.errno()), Some(Errno::ADDRINUSE));
        // munmap ends the range; the next ALLOC sees it (the deferred work is flushed first).
        mem.unmap(512, 512);
        assert_eq!(alloc(mem.page(512), VRAM_RW), Ok(()));
        assert!(view.svm_ranges(pid()).is_empty());
    })
    .expect("attach");
}

#[test]
fn get_attr_checks_memory_before_types() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let mem = Anon::new(2 * MIB);
        let a = mem.addr;
        let cases = [
            (
                "ACCESS_IN_PLACE as a query",
                a,
                KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE,
                Errno::INVAL,
            ),
            (
                "NO_ACCESS as a query",
                a,
                KFD_IOCTL_SVM_ATTR_NO_ACCESS,
                Errno::INVAL,
            ),
            ("unknown type", a, 8, Errno::INVAL),
            ("a hole before the type check", 0x10_0000, 8, Errno::FAULT),
        ];
        for (what, start, kind, errno) in cases {
            let mut q = [attr(kind, gpus[0])];
            assert_eq!(svm_get(&kfd, start, PAGE, &mut q), Err(errno), "{what}");
        }
        // An ACCESS query of an unknown GPU fails after the earlier ones were filled, and
        // those reach the caller.
        let mut q = [preferred(0x1234), access(0x7), granularity(0)];
        assert_eq!(svm_get(&kfd, a, PAGE, &mut q), Err(Errno::INVAL));
        assert_eq!(q[0].value, UNDEFINED, "filled before the failure");
        assert_eq!(q[2].value, 0, "not reached");
    })
    .expect("attach");
}

#[test]
fn memory_never_set_reports_the_defaults() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let mem = Anon::new(2 * MIB);
        let mut q = [
            preferred(0),
            prefetch(0),
            set_flags(0),
            clr_flags(0),
            granularity(0),
            access(g),
        ];
        svm_get(&kfd, mem.addr, 2 * MIB, &mut q).expect("GET");
        let values: Vec<u32> = q.iter().map(|a| a.value).collect();
        assert_eq!(
            values,
            [UNDEFINED, UNDEFINED, DEFAULT_FLAGS, !DEFAULT_FLAGS, 9, g]
        );
        assert_eq!(
            q[5].r#type, KFD_IOCTL_SVM_ATTR_NO_ACCESS,
            "XNACK off: no GPU"
        );
        kfd.set_xnack_mode(true).expect("MI300X can turn XNACK on");
        let (kind, _) = svm_get_one(&kfd, mem.addr, PAGE, KFD_IOCTL_SVM_ATTR_ACCESS, g);
        assert_eq!(kind, KFD_IOCTL_SVM_ATTR_ACCESS, "XNACK on: every GPU");
        // Ranges made with XNACK on get the same default.
        svm_set(&kfd, mem.addr, PAGE, &[]).expect("register");
        kfd.set_xnack_mode(false).expect("off again");
        let (kind, _) = svm_get_one(&kfd, mem.addr, PAGE, KFD_IOCTL_SVM_ATTR_ACCESS, g);
        assert_eq!(kind, KFD_IOCTL_SVM_ATTR_ACCESS, "kept by the range");
    })
    .expect("attach");
}

#[test]
fn ranges_split_on_set_and_never_merge() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let mem = Anon::new(2 * MIB);
        let ranges = || -> Vec<(u64, u64)> {
            view.svm_ranges(pid())
                .iter()
                .map(|r| ((r.start - mem.addr) / PAGE, r.size / PAGE))
                .collect()
        };
        svm_set(&kfd, mem.addr, 8 * PAGE, &[preferred(g)]).expect("set");
        assert_eq!(ranges(), [(0, 8)]);
        svm_set(&kfd, mem.page(2), 2 * PAGE, &[granularity(3)]).expect("split");
        assert_eq!(ranges(), [(0, 2), (2, 2), (4, 4)]);
        let r = view.svm_ranges(pid());
        assert!(
            r.iter().all(|r| r.preferred_loc == g),
            "the pieces keep the old attributes"
        );
        assert_eq!(
            r.iter().map(|r| r.granularity).collect::<Vec<_>>(),
            [9, 3, 9]
        );
        // Equal attributes again: still three ranges, which GET hides.
        svm_set(&kfd, mem.page(2), 2 * PAGE, &[granularity(9)]).expect("set");
        assert_eq!(ranges(), [(0, 2), (2, 2), (4, 4)]);
        let gran = svm_get_one(&kfd, mem.addr, 8 * PAGE, KFD_IOCTL_SVM_ATTR_GRANULARITY, 0);
        assert_eq!(gran.1, 9);
        // A SET across a range and a gap: the gap becomes a new range of its own.
        svm_set(&kfd, mem.page(6), 4 * PAGE, &[preferred(0)]).expect("set");
        assert_eq!(ranges(), [(0, 2), (2, 2), (4, 2), (6, 2), (8, 2)]);
        let r = view.svm_ranges(pid());
        assert_eq!(r[3].preferred_loc, 0);
        assert_eq!(r[4].preferred_loc, 0);
        assert_eq!(
            r[4].granularity, 9,
            "the new range starts from the defaults"
        );
    })
    .expect("attach");
}

#[test]
fn new_ranges_are_cut_at_the_largest_range_size() {
    // Radeon VII: 16 GiB of VRAM (a little less: 130944 pages per 1/32), so ranges of at
    // most rounddown_pow_of_two(130944) pages = 256 MiB, cut at 256 MiB boundaries.
    let model = model("radeon-vii");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, _) = open_all(&view);
        let mem = Anon::with(
            1 << 30,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::PRIVATE,
        );
        svm_set(&kfd, mem.addr, 1 << 30, &[]).expect("register 1 GiB");
        let ranges = view.svm_ranges(pid());
        let vram = view.machine().gpus()[0].vram_size;
        assert_eq!((vram >> 17).clamp(512, 1 << 18).ilog2(), 16);
        let max = 256 * MIB;
        for r in &ranges {
            assert!(r.size <= max, "{r:?}");
            let end = r.start + r.size;
            assert!(
                end == mem.addr + (1 << 30) || end.is_multiple_of(max),
                "each ends at a 256 MiB boundary or at the end: {r:?}"
            );
        }
        let expected = if mem.addr.is_multiple_of(max) { 4 } else { 5 };
        assert_eq!(ranges.len(), expected);
    })
    .expect("attach");
}

#[test]
fn get_attr_aggregates_over_the_ranges_it_touches() {
    let model = model("mi210x8");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, g) = open_all(&view);
        let mem = Anon::new(2 * MIB);
        let (a, b) = (mem.addr, mem.page(4));
        svm_set(
            &kfd,
            a,
            4 * PAGE,
            &[
                preferred(g[0]),
                prefetch(0),
                set_flags(KFD_IOCTL_SVM_FLAG_GPU_RO),
                granularity(5),
                access(g[0]),
                in_place(g[1]),
                access(g[2]),
            ],
        )
        .expect("range A");
        svm_set(
            &kfd,
            b,
            4 * PAGE,
            &[
                preferred(0),
                prefetch(0),
                set_flags(KFD_IOCTL_SVM_FLAG_GPU_EXEC),
                clr_flags(KFD_IOCTL_SVM_FLAG_COHERENT),
                granularity(7),
                access(g[0]),
                in_place(g[1]),
                no_access(g[2]),
            ],
        )
        .expect("range B");
        let whole = 12 * PAGE; // A, B and a gap of four pages, which is ignored
        let one = |kind, value| svm_get_one(&kfd, a, whole, kind, value);
        assert_eq!(
            one(KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, 0).1,
            UNDEFINED,
            "differ"
        );
        assert_eq!(one(KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, 0).1, 0, "the same");
        let a_flags = DEFAULT_FLAGS | KFD_IOCTL_SVM_FLAG_GPU_RO;
        let b_flags = KFD_IOCTL_SVM_FLAG_HOST_ACCESS | KFD_IOCTL_SVM_FLAG_GPU_EXEC;
        assert_eq!(one(KFD_IOCTL_SVM_ATTR_SET_FLAGS, 0).1, a_flags & b_flags);
        assert_eq!(one(KFD_IOCTL_SVM_ATTR_CLR_FLAGS, 0).1, !(a_flags | b_flags));
        assert_eq!(one(KFD_IOCTL_SVM_ATTR_GRANULARITY, 0).1, 5, "the minimum");
        let kinds: Vec<u32> = [g[0], g[1], g[2], g[3]]
            .iter()
            .map(|&gpu| one(KFD_IOCTL_SVM_ATTR_ACCESS, gpu).0)
            .collect();
        assert_eq!(
            kinds,
            [
                KFD_IOCTL_SVM_ATTR_ACCESS,
                KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE,
                KFD_IOCTL_SVM_ATTR_NO_ACCESS,
                KFD_IOCTL_SVM_ATTR_NO_ACCESS,
            ],
            "the access type of every range, rewritten into the query"
        );
        // Half of the query over B, half over the gap: B's values.
        let half = |kind| svm_get_one(&kfd, mem.page(6), 4 * PAGE, kind, 0).1;
        assert_eq!(half(KFD_IOCTL_SVM_ATTR_PREFERRED_LOC), 0);
        assert_eq!(half(KFD_IOCTL_SVM_ATTR_GRANULARITY), 7);
        assert_eq!(half(KFD_IOCTL_SVM_ATTR_SET_FLAGS), b_flags);
        // Only the gap: the defaults.
        assert_eq!(
            svm_get_one(
                &kfd,
                mem.page(8),
                4 * PAGE,
                KFD_IOCTL_SVM_ATTR_GRANULARITY,
                0
            )
            .1,
            9
        );
        // Attributes apply in array order: the last word on a GPU wins.
        svm_set(
            &kfd,
            a,
            PAGE,
            &[
                access(g[3]),
                no_access(g[3]),
                no_access(g[4]),
                in_place(g[4]),
            ],
        )
        .expect("set");
        let kind = |gpu| svm_get_one(&kfd, a, PAGE, KFD_IOCTL_SVM_ATTR_ACCESS, gpu).0;
        assert_eq!(kind(g[3]), KFD_IOCTL_SVM_ATTR_NO_ACCESS);
        assert_eq!(kind(g[4]), KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE);
        // A location that is UNDEFINED in one range is UNDEFINED over both.
        svm_set(&kfd, a, 4 * PAGE, &[preferred(UNDEFINED)]).expect("set");
        svm_set(&kfd, b, 4 * PAGE, &[preferred(g[0])]).expect("set");
        assert_eq!(one(KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, 0).1, UNDEFINED);
        assert_eq!(
            svm_get_one(&kfd, b, 4 * PAGE, KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, 0).1,
            g[0]
        );
    })
    .expect("attach");
}

#[test]
fn granularity_is_clamped_to_0x3f() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, _) = open_all(&view);
        let mem = Anon::new(2 * MIB);
        for (set, got) in [(0, 0), (0x3F, 0x3F), (0x40, 0x3F), (u32::MAX, 0x3F)] {
            svm_set(&kfd, mem.addr, PAGE, &[granularity(set)]).expect("set");
            let q = svm_get_one(&kfd, mem.addr, PAGE, KFD_IOCTL_SVM_ATTR_GRANULARITY, 0);
            assert_eq!(q.1, got, "granularity {set:#x}");
        }
    })
    .expect("attach");
}

#[test]
fn a_gpu_without_the_svm_capability_is_no_target() {
    let model = Model::new(ModelConfig {
        machine: without_svm("mi210x8", 1),
        ..ModelConfig::default()
    })
    .expect("model");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, g) = open_all(&view);
        let mem = Anon::new(2 * MIB);
        for attrs in [
            [preferred(g[1])],
            [prefetch(g[1])],
            [access(g[1])],
            [in_place(g[1])],
            [no_access(g[1])],
        ] {
            assert_eq!(svm_set(&kfd, mem.addr, PAGE, &attrs), Err(Errno::INVAL));
        }
        assert_eq!(
            svm_set(&kfd, mem.addr, PAGE, &[preferred(g[0]), access(g[0])]),
            Ok(())
        );
        let kind = |gpu| svm_get_one(&kfd, mem.addr, PAGE, KFD_IOCTL_SVM_ATTR_ACCESS, gpu).0;
        assert_eq!(kind(g[0]), KFD_IOCTL_SVM_ATTR_ACCESS);
        assert_eq!(
            kind(g[1]),
            KFD_IOCTL_SVM_ATTR_NO_ACCESS,
            "known, but never supported"
        );
    })
    .expect("attach");
}

#[test]
fn cleared_flags_are_queryable_from_1_6() {
    let mem = Anon::new(2 * MIB);
    for (minor, expected) in [(5, Err(Errno::INVAL)), (6, Ok(!DEFAULT_FLAGS))] {
        let emu = Emu::new(ModelConfig {
            kfd_minor: minor,
            ..ModelConfig::default()
        });
        let mut q = [clr_flags(0)];
        let kfd = std::os::fd::AsFd::as_fd(&emu.kfd);
        let got = raw_svm(
            &emu.model,
            &emu.caller,
            kfd,
            mem.addr,
            PAGE,
            KFD_IOCTL_SVM_OP_GET_ATTR,
            &mut q,
        )
        .map(|_| q[0].value);
        assert_eq!(got, expected, "KFD 1.{minor}");
    }
}

#[test]
fn an_unknown_op_returns_a_positive_einval() {
    // svm_ioctl's `default: r = EINVAL;` lacks the minus: the ioctl returns 22.
    let emu = Emu::machine("mi300x");
    let mem = Anon::new(2 * MIB);
    let mut attrs = [preferred(0)];
    let kfd = std::os::fd::AsFd::as_fd(&emu.kfd);
    let call =
        |start, attrs: &mut [_]| raw_svm(&emu.model, &emu.caller, kfd, start, PAGE, 2, attrs);
    assert_eq!(call(mem.addr, &mut attrs), Ok(22));
    assert_eq!(
        call(mem.addr + 1, &mut attrs),
        Err(Errno::INVAL),
        "alignment first"
    );
    assert!(emu.model.svm_ranges(pid()).is_empty());
}

#[test]
fn xnack_off_reserves_system_memory_for_the_ranges() {
    let model = model("mi300x");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, _) = open_all(&view);
        // More address space than the machine has memory (what the kernel's limits are sized
        // from), never touched.
        let ram = view.machine().system_memory();
        assert!(ram > 0, "the preset's CPU node has memory");
        let huge = (2 * ram + (1 << 30)).next_multiple_of(2 * MIB);
        let mem = Anon::with(huge, ProtFlags::empty(), MapFlags::PRIVATE);
        assert_eq!(
            svm_set(&kfd, mem.addr, huge, &[]),
            Err(Errno::NOMEM),
            "XNACK off: the ranges count as system memory"
        );
        assert!(view.svm_ranges(pid()).is_empty(), "nothing was made");
        kfd.set_xnack_mode(true).expect("on");
        assert_eq!(svm_set(&kfd, mem.addr, huge, &[]), Ok(()), "XNACK on: free");
        let err = kfd.set_xnack_mode(false).expect_err("cannot reserve it");
        assert_eq!(err.errno(), Some(Errno::NOMEM));
        assert!(kfd.xnack_mode().expect("query"), "still on");
        // Small ranges switch back and forth.
        drop(mem);
        let small = Anon::new(2 * MIB);
        svm_set(&kfd, small.addr, 2 * MIB, &[]).expect("register");
        kfd.set_xnack_mode(false)
            .expect("off: the unmapped ranges are gone, this one fits");
        assert!(!kfd.xnack_mode().expect("query"));
    })
    .expect("attach");
}

/// What an installed SVM observer hears: each successful SET_ATTR (a registration, then a
/// change of registered memory; a refused call not at all), with the model clock's time and
/// the caller's XNACK mode, and each SET_XNACK_MODE's resulting mode. A second observer is
/// refused.
#[test]
fn an_svm_observer_hears_every_successful_set_attr_and_the_xnack_mode() {
    use kfd_emu::model::{SvmObserver, SvmSetAttr};
    use std::sync::Mutex;

    #[derive(Default)]
    struct Heard {
        calls: Mutex<Vec<SvmSetAttr>>,
        xnack: Mutex<Vec<(i32, bool)>>,
    }
    impl SvmObserver for Heard {
        fn set_attr(&self, call: &SvmSetAttr) {
            self.calls.lock().unwrap().push(call.clone());
        }
        fn xnack(&self, tgid: i32, on: bool) {
            self.xnack.lock().unwrap().push((tgid, on));
        }
    }
    let model = model("mi300x");
    let heard = Arc::new(Heard::default());
    assert!(
        model
            .observe_svm(Arc::clone(&heard) as Arc<dyn SvmObserver>)
            .is_ok()
    );
    assert!(model.observe_svm(Arc::new(Heard::default())).is_err());
    let view = Arc::clone(&model);
    let (a, g, tgid) = kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        kfd.set_xnack_mode(true).expect("XNACK on");
        let mem = Anon::new(4 * MIB);
        let a = mem.addr;
        // SAFETY: `mem` is this thread's own mapping; nothing holds a reference into it.
        unsafe {
            kfd.svm_set_attr(a, 4 * MIB, &[granularity(0)])
                .expect("register");
            kfd.svm_set_attr(a, 2 * MIB, &[in_place(g)])
                .expect("in place");
            let refused = kfd.svm_set_attr(a, 2 * MIB, &[preferred(1)]);
            assert_eq!(refused.map_err(|e| e.errno()), Err(Some(Errno::INVAL)));
        }
        drop(mem);
        (a, g, pid())
    })
    .expect("attach");
    let calls = heard.calls.lock().unwrap();
    let shape: Vec<_> = calls
        .iter()
        .map(|c| {
            (
                c.tgid,
                c.start,
                c.size,
                c.registers,
                c.xnack,
                c.attrs
                    .iter()
                    .map(|x| (x.r#type, x.value))
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            (
                tgid,
                a,
                4 * MIB,
                true,
                true,
                vec![(KFD_IOCTL_SVM_ATTR_GRANULARITY, 0)]
            ),
            (
                tgid,
                a,
                2 * MIB,
                false,
                true,
                vec![(KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE, g)]
            ),
        ]
    );
    assert!(calls[0].time_ns <= calls[1].time_ns);
    assert_eq!(*heard.xnack.lock().unwrap(), [(tgid, true)]);
}
