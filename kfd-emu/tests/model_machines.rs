//! The machines users have, as the kernel treats them: the MI300A APU (`apu_prefer_gtt`), a
//! dGPU behind a small BAR, and the XNACK rules of every preset. Each test names the kernel
//! function it follows and the condition in it (`amdgpu_amdkfd_gpuvm.c`, `kfd_chardev.c`,
//! `kfd_crat.c`, `kfd_process.c`, `kfd_svm.c`, `amdgpu_gmc.c`).

mod model_support;
mod model_svm_support;

use std::os::fd::AsFd;
use std::sync::Arc;

use kfd_emu::machine::Machine;
use kfd_emu::model::ModelConfig;
use kfd_ioctl::abi::*;
use kfd_ioctl::topology::{HeapType, Topology};
use model_support::*;
use model_svm_support::{Anon, MIB, PAGE, drain, model, open_all, pid, prefetch, svm_set};
use rustix::io::Errno;

/// VRAM | WRITABLE without PUBLIC: VRAM the CPU was not promised.
const VRAM_DEVICE: u32 = KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;

/// The `flags` GET_DMABUF_INFO reports for BO `handle` (exported for the purpose).
fn dmabuf_flags(emu: &Emu, handle: u64) -> u32 {
    let mut export = kfd_ioctl_export_dmabuf_args {
        handle,
        flags: libc::O_CLOEXEC as u32,
        dmabuf_fd: 0,
    };
    emu.ioctl(AMDKFD_IOC_EXPORT_DMABUF, &mut export)
        .expect("export");
    let _closed_on_return = own_fd(export.dmabuf_fd);
    let mut info = kfd_ioctl_get_dmabuf_info_args {
        dmabuf_fd: export.dmabuf_fd,
        ..Default::default()
    };
    emu.ioctl(AMDKFD_IOC_GET_DMABUF_INFO, &mut info)
        .expect("info");
    info.flags
}

// --- The MI300A: an APU whose "VRAM" is system memory -----------------------------------

#[test]
fn the_mi300a_is_an_apu_with_public_vram_and_svm() {
    // amdgpu_amdkfd_get_local_mem_info on an apu_prefer_gtt APU: all of its memory is public
    // (kfd_create_vcrat_image_gpu reports it FB_PUBLIC), so kfd_dev_is_large_bar holds; the
    // captured capability has HSA_CAP_SVMAPI_SUPPORTED and COHERENTHOSTACCESS.
    let machine = Machine::preset("mi300a").expect("preset");
    let gpu = &machine.gpus()[0];
    assert!(gpu.apu && gpu.large_bar && gpu.svm_capable);
    assert_eq!(gpu.target.to_string(), "gfx942");
    let node = machine.node_of(gpu).expect("node");
    assert_eq!(
        node.properties.cpu_cores_count, 0,
        "the CPU cores are node 0"
    );
    assert!(node.capability().coherent_host_access());
    assert!(
        node.mem_banks
            .iter()
            .all(|b| b.heap() == HeapType::FrameBufferPublic)
    );
    // Every other preset is a dGPU.
    for (name, _) in Machine::presets() {
        let m = Machine::preset(name).expect("preset");
        assert_eq!(m.gpus().iter().any(|g| g.apu), *name == "mi300a", "{name}");
    }
}

#[test]
fn apu_vram_is_a_gtt_bo_counted_in_pages() {
    // amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu: `if (adev->apu_prefer_gtt)` a VRAM request is
    // a GTT BO with no CPU_ACCESS_REQUIRED flag, so amdgpu_amdkfd_get_dmabuf_info reports GTT
    // without PUBLIC; amdgpu_amdkfd_reserve_mem_limit adds the bytes themselves (not 2 MiB
    // steps) to vram_used_aligned and charges system and TTM memory, and
    // amdgpu_amdkfd_get_available_memory takes min3 of the three, page aligned.
    for (name, step, want_flags) in [
        ("mi300a", PAGE, KFD_IOC_ALLOC_MEM_FLAGS_GTT),
        (
            "mi300x",
            2 * MIB,
            KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC,
        ),
    ] {
        let mut emu = Emu::machine(name);
        emu.acquire_all();
        let gpu = emu.gpu();
        let start = emu.available(gpu);
        assert_eq!(start % PAGE, 0, "{name}");
        let (h, _) = emu.alloc(gpu, va(1), PAGE, VRAM_RW).expect("alloc");
        assert_eq!(emu.available(gpu), start - step, "{name}: one page of VRAM");
        emu.free(h).expect("free");
        assert_eq!(emu.available(gpu), start, "{name}: FREE gives it back");
        // (A dma-buf keeps its BO past FREE: the domain is looked at on another BO.)
        let (h, _) = emu.alloc(gpu, va(2), PAGE, VRAM_RW).expect("alloc");
        assert_eq!(dmabuf_flags(&emu, h), want_flags, "{name}: the BO's domain");
    }
}

#[test]
fn apu_available_memory_is_exactly_what_alloc_can_take() {
    // On an apu_prefer_gtt APU AVAILABLE_MEMORY is min3(system left, TTM left, VRAM left) in
    // pages, and amdgpu_amdkfd_reserve_mem_limit checks each of the three: an allocation of
    // what is available fits, one page more does not (ENOMEM), and then nothing is left.
    let mut emu = Emu::machine("mi300a");
    emu.acquire_all();
    let gpu = emu.gpu();
    let available = emu.available(gpu);
    assert!(available > 0);
    assert_eq!(
        emu.alloc(gpu, va(1), available + PAGE, VRAM_DEVICE),
        Err(Errno::NOMEM)
    );
    let (h, _) = emu
        .alloc(gpu, va(1), available, VRAM_DEVICE)
        .expect("all of it");
    assert_eq!(emu.available(gpu), 0);
    assert_eq!(emu.alloc(gpu, va(2), PAGE, VRAM_DEVICE), Err(Errno::NOMEM));
    // GTT draws on the same TTM memory: the TTM limit (`ttm_tt_pages_limit`, half of the
    // machine's RAM, all four sockets') less what the VRAM BO took is what is left of it.
    let gtt = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let ttm_left = emu.model.machine().system_memory() / 2 - available;
    assert_eq!(
        emu.alloc(gpu, va(2), ttm_left + PAGE, gtt),
        Err(Errno::NOMEM)
    );
    let (g, _) = emu
        .alloc(gpu, va(2), ttm_left, gtt)
        .expect("the rest of TTM");
    emu.free(g).expect("free");
    emu.free(h).expect("free");
    assert_eq!(emu.available(gpu), available);
}

#[test]
fn apu_vram_is_cpu_visible_with_or_without_public() {
    // The APU's VRAM BO is system memory (GTT) with alloc_flags 0: amdgpu_gem_object_mmap has
    // no NO_CPU_ACCESS to refuse, and the CPU sees what it wrote through a second mapping.
    let mut emu = Emu::machine("mi300a");
    emu.acquire_all();
    let gpu = emu.gpu();
    let render = emu.renders[0].as_fd();
    for (n, flags) in [(1, VRAM_RW), (2, VRAM_DEVICE)] {
        let (h, offset) = emu.alloc(gpu, va(n), 2 * PAGE, flags).expect("alloc");
        let mut a = emu.cpu_map(render, offset, 2 * PAGE as usize).expect("map");
        a.bytes()[PAGE as usize..][..6].copy_from_slice(b"on APU");
        let mut b = emu.cpu_map(render, offset, 2 * PAGE as usize).expect("map");
        assert_eq!(
            &b.bytes()[PAGE as usize..][..6],
            b"on APU",
            "flags {flags:#x}"
        );
        drop((a, b));
        emu.free(h).expect("free");
    }
}

#[test]
fn svm_on_the_apu_stays_in_system_memory() {
    // kfd_svm.c: svm_range_best_prefetch_location sets best_loc 0 when the prefetch GPU is an
    // apu_prefer_gtt APU, and svm_range_best_restore_location returns 0 for a fault on one: no
    // migration (no MIGRATE records), the pages stay where the CPU has them, the GPU maps them.
    let model = model("mi300a");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let smi = kfd.smi_events(g).expect("SMI_EVENTS");
        smi.set_mask(
            SmiEventMask::MIGRATE_START
                | SmiEventMask::MIGRATE_END
                | SmiEventMask::PAGE_FAULT_START
                | SmiEventMask::PAGE_FAULT_END,
        )
        .expect("mask");
        let mut smi = smi;
        let pid = pid();
        let mem = Anon::new(4 * MIB);
        mem.write(PAGE, b"CPU data");
        svm_set(&kfd, mem.addr, 2 * MIB, &[prefetch(g)]).expect("prefetch to the APU");
        assert_eq!(drain(&mut smi), Vec::<String>::new(), "no migration");
        let r = view.svm_ranges(pid);
        assert_eq!((r.len(), r[0].actual_loc, r[0].prefetch_loc), (1, 0, g));
        assert_eq!(view.svm_vram_usage(g), 0);

        // XNACK on (the MI300A has per-process XNACK): a fault on never-registered memory
        // is restored in place.
        kfd.set_xnack_mode(true).expect("XNACK on");
        let mut seen = [0u8; 8];
        view.gpu_read(pid, g, mem.page(512 + 1), &mut seen)
            .expect("the fault is handled");
        mem.write((512 + 1) * PAGE, b"CPU late");
        view.gpu_read(pid, g, mem.page(512 + 1), &mut seen)
            .expect("mapped");
        assert_eq!(&seen, b"CPU late", "the GPU reads the CPU's pages");
        let records = drain(&mut smi);
        assert!(
            records
                .iter()
                .all(|r| !r.starts_with('5') && !r.starts_with('6')),
            "no MIGRATE records: {records:?}"
        );
        assert!(
            records
                .iter()
                .any(|r| r.starts_with('8') && r.ends_with(" U")),
            "the fault ends with an update in place: {records:?}"
        );
        assert!(view.svm_ranges(pid).iter().all(|r| r.actual_loc == 0));
        assert_eq!(view.svm_vram_usage(g), 0);
    })
    .expect("attach");
}

// --- A dGPU behind a small BAR ---------------------------------------------------------------

#[test]
fn the_small_bar_preset_reports_its_vram_private() {
    // kfd_create_vcrat_image_gpu: `local_mem_size_private != 0` → one HSA_MEM_HEAP_TYPE_FB_PRIVATE
    // bank of public + private, the whole VRAM; kfd_dev_is_large_bar is then false.
    let machine = Machine::preset("rx9070xt-small-bar").expect("preset");
    let gpu = &machine.gpus()[0];
    assert!(!gpu.large_bar && !gpu.apu);
    assert_eq!(gpu.target.to_string(), "gfx1201");
    assert_eq!(gpu.vram_size, 17_095_983_104, "the captured card's 16 GiB");
    let node = machine.node_of(gpu).expect("node");
    assert_eq!(node.mem_banks.len(), 1);
    assert_eq!(node.mem_banks[0].heap(), HeapType::FrameBufferPrivate);
}

#[test]
fn small_bar_refuses_public_vram_before_the_bind() {
    // kfd_ioctl_alloc_memory_of_gpu: `(flags & PUBLIC) && (flags & VRAM) &&
    // !kfd_dev_is_large_bar(dev)` → -EINVAL, checked after the pdd lookup and before
    // kfd_bind_process_to_device (so even without ACQUIRE_VM, where the bind says ENODEV).
    let mut emu = Emu::machine("rx9070xt-small-bar");
    let gpu = emu.gpu();
    assert_eq!(emu.alloc(gpu, va(1), PAGE, VRAM_RW), Err(Errno::INVAL));
    assert_eq!(
        emu.alloc(gpu, va(1), PAGE, VRAM_DEVICE),
        Err(Errno::NODEV),
        "no ACQUIRE_VM"
    );
    emu.acquire_all();
    assert_eq!(emu.alloc(gpu, va(1), PAGE, VRAM_RW), Err(Errno::INVAL));
    // PUBLIC only matters for VRAM; a large BAR takes it.
    let gtt_public = KFD_IOC_ALLOC_MEM_FLAGS_GTT
        | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
        | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
    let (g, _) = emu.alloc(gpu, va(2), PAGE, gtt_public).expect("GTT|PUBLIC");
    emu.free(g).expect("free");
    let mut large = Emu::machine("mi300x");
    large.acquire_all();
    let (h, _) = large
        .alloc(large.gpu(), va(1), PAGE, VRAM_RW)
        .expect("large BAR");
    large.free(h).expect("free");
}

#[test]
fn small_bar_vram_without_public_is_allocated_mapped_and_counted_in_2_mib_steps() {
    // The VRAM BO without PUBLIC has no NO_CPU_ACCESS flag (amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu:
    // `PUBLIC ? CPU_ACCESS_REQUIRED : 0`), so amdgpu_gem_object_mmap maps it (the kernel moves
    // it where the CPU reaches it on fault); amdgpu_amdkfd_get_available_memory is the dGPU
    // one: 2 MiB steps, and GTT does not change it.
    let mut emu = Emu::machine("rx9070xt-small-bar");
    emu.acquire_all();
    let gpu = emu.gpu();
    let render = emu.renders[0].as_fd();
    let start = emu.available(gpu);
    assert_eq!(start % (2 * MIB), 0);
    let (h, offset) = emu.alloc(gpu, va(1), PAGE, VRAM_DEVICE).expect("alloc");
    assert_eq!(emu.available(gpu), start - 2 * MIB);
    let mut m = emu.cpu_map(render, offset, PAGE as usize).expect("map");
    m.bytes()[..4].copy_from_slice(b"bar!");
    drop(m);
    let gtt = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let (g, _) = emu.alloc(gpu, va(2), 4 * MIB, gtt).expect("GTT");
    assert_eq!(emu.available(gpu), start - 2 * MIB, "GTT is not VRAM");
    emu.free(g).expect("free");
    emu.free(h).expect("free");
    assert_eq!(emu.available(gpu), start);
    let (h, _) = emu.alloc(gpu, va(3), PAGE, VRAM_DEVICE).expect("alloc");
    assert_eq!(
        dmabuf_flags(&emu, h),
        KFD_IOC_ALLOC_MEM_FLAGS_VRAM,
        "VRAM, no PUBLIC"
    );
}

// --- XNACK, per family -------------------------------------------------------------------------

/// `(default mode, may a process turn it on)` of a machine, through SET_XNACK_MODE.
fn xnack_seen(machine: Machine) -> (bool, bool) {
    let emu = Emu::new(ModelConfig {
        machine,
        ..ModelConfig::default()
    });
    let mut q = kfd_ioctl_set_xnack_mode_args { xnack_enabled: -1 };
    emu.ioctl(AMDKFD_IOC_SET_XNACK_MODE, &mut q).expect("query");
    let default = q.xnack_enabled == 1;
    // Setting the mode it has always works.
    let mut same = kfd_ioctl_set_xnack_mode_args {
        xnack_enabled: q.xnack_enabled,
    };
    assert_eq!(emu.ioctl(AMDKFD_IOC_SET_XNACK_MODE, &mut same), Ok(0));
    if default {
        // Off is always possible (the fallback every GPU runs).
        let mut off = kfd_ioctl_set_xnack_mode_args { xnack_enabled: 0 };
        assert_eq!(emu.ioctl(AMDKFD_IOC_SET_XNACK_MODE, &mut off), Ok(0));
    }
    let mut on = kfd_ioctl_set_xnack_mode_args { xnack_enabled: 1 };
    let can = match emu.ioctl(AMDKFD_IOC_SET_XNACK_MODE, &mut on) {
        Ok(_) => true,
        Err(e) => {
            assert_eq!(
                e,
                Errno::PERM,
                "refused as kfd_ioctl_set_xnack_mode refuses"
            );
            false
        }
    };
    let mut q = kfd_ioctl_set_xnack_mode_args { xnack_enabled: -1 };
    emu.ioctl(AMDKFD_IOC_SET_XNACK_MODE, &mut q).expect("query");
    assert_eq!(
        q.xnack_enabled,
        i32::from(can),
        "the mode after the attempt"
    );
    (default, can)
}

#[test]
fn xnack_follows_kfd_process_xnack_mode_on_every_preset() {
    // kfd_process_xnack_mode(p, supported) over the process's GPUs: GFX9+ only; with
    // `supported`, KFD_SUPPORT_XNACK_PER_PROCESS GPUs (GC 9.4.2, 9.4.3, 9.4.4, 9.5.0, 12.1.0)
    // pass; GC >= 10.1.1 fails; a GPU booted with noretry (amdgpu_gmc_noretry_set: GC 9.0.1,
    // 9.4.0–9.5.0, >= 10.3.0) fails. The default of a new process is the test without
    // `supported`; SET_XNACK_MODE(1) is EPERM when the test with it fails.
    let table = [
        ("mi300x", false, true),              // GC 9.4.3, per process
        ("mi210x8", false, true),             // GC 9.4.2, per process
        ("mi100", false, false),              // GC 9.4.1, noretry
        ("radeon-vii", false, false),         // GC 9.4.0, noretry
        ("rx7900xtx", false, false),          // GC 11.0.0
        ("mi300a", false, true),              // GC 9.4.3 APU, per process
        ("rx9070xt-small-bar", false, false), // GC 12.0.1
    ];
    let mut names: Vec<&str> = Machine::presets().iter().map(|(n, _)| *n).collect();
    names.sort_unstable();
    let mut listed: Vec<&str> = table.iter().map(|(n, ..)| *n).collect();
    listed.sort_unstable();
    assert_eq!(listed, names, "every preset has its row");
    for (name, default, can) in table {
        let machine = Machine::preset(name).expect("preset");
        assert_eq!(machine.xnack_mode(false), default, "{name}");
        assert_eq!(machine.xnack_mode(true), can, "{name}");
        assert_eq!(xnack_seen(machine), (default, can), "{name}");
    }
}

/// Preset `name` with the `gfx_target_version` of its GPU nodes set to `targets`, in order.
fn with_targets(name: &str, targets: &[u64]) -> Machine {
    let mut topology: Topology = Machine::preset(name).expect("preset").topology().clone();
    let mut targets = targets.iter();
    for node in topology.nodes.iter_mut().filter(|n| n.is_gpu()) {
        if let Some(&t) = targets.next() {
            node.properties.set("gfx_target_version", t);
        }
    }
    Machine::from_topology(name, topology).expect("machine")
}

#[test]
fn gpus_booted_with_retry_faults_start_with_xnack_on() {
    // amdgpu_gmc_noretry_set leaves noretry 0 on the GFX9 parts outside its list: gfx90c
    // (Renoir, GC 9.3.0) and gfx902 (Raven, GC 9.1.0) boot with retry faults, so
    // kfd_process_xnack_mode(p, false) is true and a new process starts with XNACK on.
    assert_eq!(
        xnack_seen(with_targets("radeon-vii", &[90012])),
        (true, true)
    );
    assert_eq!(
        xnack_seen(with_targets("radeon-vii", &[90002])),
        (true, true)
    );
    // Mixed with a noretry GPU of per-process XNACK (gfx90a): off by default, may turn on.
    let mixed = [90012, 90010, 90010, 90010, 90010, 90010, 90010, 90010];
    assert_eq!(xnack_seen(with_targets("mi210x8", &mixed)), (false, true));
    // Mixed with a noretry GPU without it (gfx908): never.
    let mixed = [90012, 90008, 90010, 90010, 90010, 90010, 90010, 90010];
    assert_eq!(xnack_seen(with_targets("mi210x8", &mixed)), (false, false));
    // gfx101x boot with retry on, but GC >= 10.1.1 has no shader preemption on faults: never.
    assert_eq!(
        xnack_seen(with_targets("radeon-vii", &[100100])),
        (false, false)
    );
}

// --- --kfd-minor on the new presets --------------------------------------------------------

#[test]
fn the_new_presets_honour_the_kfd_minor() {
    // The ioctls the new behaviours go through are gated as kfd_ioctl gates every number:
    // AVAILABLE_MEMORY from 1.9, SET_XNACK_MODE from 1.5; below, the number is past the
    // table (-EINVAL before 1.17). Each side of each gate, on each new preset.
    for name in ["mi300a", "rx9070xt-small-bar"] {
        for (minor, works) in [(8, false), (9, true)] {
            let mut emu = Emu::new(ModelConfig {
                machine: Machine::preset(name).expect("preset"),
                kfd_minor: minor,
                ..ModelConfig::default()
            });
            emu.acquire_all();
            let mut a = kfd_ioctl_get_available_memory_args {
                available: 0,
                gpu_id: emu.gpu(),
                pad: 0,
            };
            let r = emu.ioctl(AMDKFD_IOC_AVAILABLE_MEMORY, &mut a);
            assert_eq!(r.is_ok(), works, "{name} 1.{minor}: {r:?}");
            if !works {
                assert_eq!(r, Err(Errno::INVAL), "{name} 1.{minor}");
            }
        }
        for (minor, works) in [(4, false), (5, true)] {
            let emu = Emu::new(ModelConfig {
                machine: Machine::preset(name).expect("preset"),
                kfd_minor: minor,
                ..ModelConfig::default()
            });
            let mut q = kfd_ioctl_set_xnack_mode_args { xnack_enabled: -1 };
            let r = emu.ioctl(AMDKFD_IOC_SET_XNACK_MODE, &mut q);
            assert_eq!(
                r,
                if works { Ok(0) } else { Err(Errno::INVAL) },
                "{name} 1.{minor}"
            );
        }
    }
}

#[test]
fn the_whole_mi300a_capture_loads_as_four_apus_in_one_hive() {
    // The published capture as `--topology` reads it: four CPU nodes, then four APU nodes
    // (cpu_cores_count 0: the MI300A's CPU cores are nodes of their own) of one xGMI hive,
    // with their captured render minors and PCI domains kept.
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/topology/mi300a-4apu");
    let machine = Machine::from_topology_dir(dir).expect("the capture loads");
    assert_eq!(machine.topology().nodes.len(), 8);
    let gpus = machine.gpus();
    assert_eq!(gpus.len(), 4);
    let minors: Vec<u32> = gpus.iter().map(|g| g.render_minor).collect();
    assert_eq!(minors, [128, 136, 144, 152]);
    let domains: Vec<u32> = gpus.iter().map(|g| g.pci_domain).collect();
    assert_eq!(domains, [0, 1, 2, 3]);
    assert!(gpus.iter().all(|g| g.apu && g.xnack_capable && g.noretry));
    // The fixups give an MI300A the bank the kernel reports: the TTM limit (half of the
    // socket's 128 GiB less the 512 MiB carve-out), FB_PUBLIC.
    assert!(
        gpus.iter()
            .all(|g| g.vram_size == 68_451_041_280 && g.large_bar)
    );
    assert!(
        gpus.iter()
            .all(|g| g.hive_id == gpus[0].hive_id && g.hive_id.is_some())
    );
    assert_eq!(
        (machine.xnack_mode(false), machine.xnack_mode(true)),
        (false, true)
    );
}
