//! Apertures, clocks, per-GPU settings, XNACK, queues, the DRM info ioctls, the stand-in
//! opens, and the leak report.

mod model_support;

use std::io::Read;
use std::os::fd::{AsFd, AsRawFd};

use kfd_emu::backend::{Backend, OpenAction};
use kfd_emu::model::ModelConfig;
use kfd_ioctl::abi::*;
use model_support::*;
use rustix::io::Errno;
use rustix::ioctl::opcode;

#[test]
fn apertures_new_and_legacy() {
    let emu = Emu::machine("mi210x8");
    let gpus = emu.gpu_ids();
    let mut count = kfd_ioctl_get_process_apertures_new_args::default();
    emu.ioctl(AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &mut count)
        .expect("count");
    assert_eq!(count.num_of_nodes, 8, "GPUs only");

    let mut entries = [kfd_process_device_apertures::default(); 3];
    let mut some = kfd_ioctl_get_process_apertures_new_args {
        kfd_process_device_apertures_ptr: entries.as_mut_ptr() as u64,
        num_of_nodes: 2,
        pad: 0,
    };
    emu.ioctl(AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &mut some)
        .expect("two");
    assert_eq!(some.num_of_nodes, 2);
    assert_eq!(entries[0].gpu_id, gpus[0]);
    assert_eq!(entries[1].gpu_id, gpus[1]);
    assert_eq!(entries[2].gpu_id, 0, "only two written");
    let e = entries[0];
    assert_eq!(
        (e.lds_base, e.lds_limit),
        (1 << 48, (1 << 48) | 0xFFFF_FFFF)
    );
    assert_eq!(
        (e.scratch_base, e.scratch_limit),
        (2 << 48, (2 << 48) | 0xFFFF_FFFF)
    );
    assert_eq!((e.gpuvm_base, e.gpuvm_limit), (0x1_0000, (1 << 47) - 1));

    some.kfd_process_device_apertures_ptr = 8;
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &mut some),
        Err(Errno::FAULT)
    );

    let mut legacy = kfd_ioctl_get_process_apertures_args::default();
    emu.ioctl(AMDKFD_IOC_GET_PROCESS_APERTURES, &mut legacy)
        .expect("legacy");
    assert_eq!(legacy.num_of_nodes, 7, "at most NUM_OF_SUPPORTED_GPUS");
    assert_eq!(legacy.process_apertures[6].gpu_id, gpus[6]);
}

#[test]
fn clock_counters_for_a_gpu_and_for_gpu_id_0() {
    let emu = Emu::machine("mi300x");
    let mut cpu = kfd_ioctl_get_clock_counters_args::default();
    emu.ioctl(AMDKFD_IOC_GET_CLOCK_COUNTERS, &mut cpu)
        .expect("gpu_id 0");
    assert_eq!(cpu.gpu_clock_counter, 0);
    assert_eq!(cpu.system_clock_freq, 1_000_000_000);
    assert!(cpu.cpu_clock_counter > 0 && cpu.system_clock_counter > 0);
    let mut a = kfd_ioctl_get_clock_counters_args {
        gpu_id: emu.gpu(),
        ..Default::default()
    };
    emu.ioctl(AMDKFD_IOC_GET_CLOCK_COUNTERS, &mut a)
        .expect("gpu");
    let mut b = a;
    emu.ioctl(AMDKFD_IOC_GET_CLOCK_COUNTERS, &mut b)
        .expect("gpu");
    assert!(a.gpu_clock_counter > 0);
    assert!(b.gpu_clock_counter >= a.gpu_clock_counter, "monotonic");
    assert!(b.cpu_clock_counter >= a.cpu_clock_counter);
    assert!(a.cpu_clock_counter >= cpu.cpu_clock_counter);
}

#[test]
fn per_gpu_settings_need_the_gpu_and_the_vm() {
    let mut emu = Emu::machine("mi300x");
    let gpu = emu.gpu();
    let policy = |gpu_id: u32, default_policy: u32| kfd_ioctl_set_memory_policy_args {
        gpu_id,
        default_policy,
        ..Default::default()
    };
    let scratch = |gpu_id: u32| kfd_ioctl_set_scratch_backing_va_args {
        va_addr: 0x7000_0000_0000,
        gpu_id,
        pad: 0,
    };
    let trap = |gpu_id: u32| kfd_ioctl_set_trap_handler_args {
        tba_addr: 0x1000,
        tma_addr: 0x2000,
        gpu_id,
        pad: 0,
    };
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_SET_MEMORY_POLICY, &mut policy(gpu, 2)),
        Err(Errno::INVAL)
    );
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_SET_MEMORY_POLICY, &mut policy(0x5, 0)),
        Err(Errno::INVAL)
    );
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_SET_MEMORY_POLICY, &mut policy(gpu, 1)),
        Err(Errno::SRCH)
    );
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_SET_SCRATCH_BACKING_VA, &mut scratch(0x5)),
        Err(Errno::INVAL)
    );
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_SET_SCRATCH_BACKING_VA, &mut scratch(gpu)),
        Err(Errno::NODEV)
    );
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_SET_TRAP_HANDLER, &mut trap(0x5)),
        Err(Errno::INVAL)
    );
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_SET_TRAP_HANDLER, &mut trap(gpu)),
        Err(Errno::SRCH)
    );
    emu.acquire_all();
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_SET_MEMORY_POLICY, &mut policy(gpu, 1)),
        Ok(0)
    );
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_SET_SCRATCH_BACKING_VA, &mut scratch(gpu)),
        Ok(0)
    );
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_SET_TRAP_HANDLER, &mut trap(gpu)),
        Ok(0)
    );
}

#[test]
fn runtime_enable_once() {
    let emu = Emu::machine("mi300x");
    let mut on = kfd_ioctl_runtime_enable_args {
        r_debug: 0x1234,
        mode_mask: KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK,
        capabilities_mask: 0,
    };
    let mut off = kfd_ioctl_runtime_enable_args::default();
    assert_eq!(emu.ioctl(AMDKFD_IOC_RUNTIME_ENABLE, &mut on), Ok(0));
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_RUNTIME_ENABLE, &mut on),
        Err(Errno::BUSY)
    );
    assert_eq!(emu.ioctl(AMDKFD_IOC_RUNTIME_ENABLE, &mut off), Ok(0));
    assert_eq!(emu.ioctl(AMDKFD_IOC_RUNTIME_ENABLE, &mut off), Ok(0));
    assert_eq!(emu.ioctl(AMDKFD_IOC_RUNTIME_ENABLE, &mut on), Ok(0));
    // DBG_TRAP of no such process is ESRCH (the rest: tests/model_debug.rs).
    let mut trap = kfd_ioctl_dbg_trap_args {
        pid: i32::MAX as u32,
        ..Default::default()
    };
    assert_eq!(emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut trap), Err(Errno::SRCH));
}

#[test]
fn tile_config_of_gfx9() {
    let emu = Emu::machine("mi300x");
    let mut tiles = [0xFFFF_FFFFu32; 40];
    let mut macros = [0xFFFF_FFFFu32; 20];
    let mut a = kfd_ioctl_get_tile_config_args {
        tile_config_ptr: tiles.as_mut_ptr() as u64,
        macro_tile_config_ptr: macros.as_mut_ptr() as u64,
        num_tile_configs: 40,
        num_macro_tile_configs: 20,
        gpu_id: emu.gpu(),
        ..Default::default()
    };
    emu.ioctl(AMDKFD_IOC_GET_TILE_CONFIG, &mut a)
        .expect("tile config");
    assert_eq!((a.num_tile_configs, a.num_macro_tile_configs), (32, 16));
    assert!(tiles[..32].iter().all(|&t| t == 0) && tiles[32] == 0xFFFF_FFFF);
    assert!(macros[..16].iter().all(|&t| t == 0) && macros[16] == 0xFFFF_FFFF);
    assert_ne!(a.gb_addr_config, 0);
    a.tile_config_ptr = 8;
    a.num_tile_configs = 4;
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_GET_TILE_CONFIG, &mut a),
        Err(Errno::FAULT)
    );
    assert_eq!(a.num_tile_configs, 0);
    a.gpu_id = 0;
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_GET_TILE_CONFIG, &mut a),
        Err(Errno::INVAL)
    );
}

#[test]
fn xnack_defaults_off_and_turns_on_where_supported() {
    for (machine, can) in [
        ("mi300x", true),
        ("mi210x8", true),
        ("radeon-vii", false),
        ("rx7900xtx", false),
    ] {
        let emu = Emu::machine(machine);
        let mut q = kfd_ioctl_set_xnack_mode_args { xnack_enabled: -1 };
        emu.ioctl(AMDKFD_IOC_SET_XNACK_MODE, &mut q).expect("query");
        assert_eq!(q.xnack_enabled, 0, "{machine}: off by default");
        let mut on = kfd_ioctl_set_xnack_mode_args { xnack_enabled: 1 };
        let r = emu.ioctl(AMDKFD_IOC_SET_XNACK_MODE, &mut on);
        assert_eq!(r, if can { Ok(0) } else { Err(Errno::PERM) }, "{machine}");
        let mut q = kfd_ioctl_set_xnack_mode_args { xnack_enabled: -1 };
        emu.ioctl(AMDKFD_IOC_SET_XNACK_MODE, &mut q).expect("query");
        assert_eq!(q.xnack_enabled, i32::from(can), "{machine}");
        let mut off = kfd_ioctl_set_xnack_mode_args { xnack_enabled: 0 };
        assert_eq!(emu.ioctl(AMDKFD_IOC_SET_XNACK_MODE, &mut off), Ok(0));
    }
}

#[test]
fn queues_are_checked_then_refused() {
    let mut emu = Emu::machine("mi300x");
    let gpu = emu.gpu();
    let mut ring = [0u64; 8];
    let good = kfd_ioctl_create_queue_args {
        ring_base_address: ring.as_mut_ptr() as u64,
        write_pointer_address: ring.as_mut_ptr() as u64,
        read_pointer_address: ring.as_mut_ptr() as u64,
        ring_size: 4096,
        gpu_id: gpu,
        queue_type: KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
        queue_percentage: 100,
        queue_priority: 7,
        ..Default::default()
    };
    let cases: [(&str, kfd_ioctl_create_queue_args, Errno); 6] = [
        (
            "priority",
            kfd_ioctl_create_queue_args {
                queue_priority: 16,
                ..good
            },
            Errno::INVAL,
        ),
        (
            "percentage",
            kfd_ioctl_create_queue_args {
                queue_percentage: 101,
                ..good
            },
            Errno::INVAL,
        ),
        (
            "ring size",
            kfd_ioctl_create_queue_args {
                ring_size: 3000,
                ..good
            },
            Errno::INVAL,
        ),
        (
            "kernel pointer",
            kfd_ioctl_create_queue_args {
                read_pointer_address: u64::MAX - 2,
                ..good
            },
            Errno::FAULT,
        ),
        (
            "queue type",
            kfd_ioctl_create_queue_args {
                queue_type: 9,
                ..good
            },
            Errno::from_raw_os_error(524),
        ),
        ("not bound", good, Errno::SRCH),
    ];
    for (what, mut args, errno) in cases {
        assert_eq!(
            emu.ioctl(AMDKFD_IOC_CREATE_QUEUE, &mut args),
            Err(errno),
            "{what}"
        );
    }
    emu.acquire_all();
    let mut args = good;
    // kfd_queue_acquire_buffers: the ring and pointers are stack memory, not GPU mappings
    // (model_queues has the queues that are created).
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_CREATE_QUEUE, &mut args),
        Err(Errno::INVAL),
        "buffers that are not GPU mappings"
    );
    let mut destroy = kfd_ioctl_destroy_queue_args::default();
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_DESTROY_QUEUE, &mut destroy),
        Err(Errno::INVAL)
    );
    let mut smi = kfd_ioctl_smi_events_args {
        gpuid: 0x3,
        anon_fd: 0,
    };
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_SMI_EVENTS, &mut smi),
        Err(Errno::INVAL)
    );
}

/// A DRM ioctl on the render stand-in of GPU 0.
fn drm<T>(
    emu: &Emu,
    render: &impl AsFd,
    cmd: rustix::ioctl::Opcode,
    arg: &mut T,
) -> Result<i64, Errno> {
    emu.model
        .ioctl(&emu.caller, render.as_fd(), cmd, arg as *mut T as u64)
        .expect("the render stand-in is the model's")
}

#[test]
fn drm_version_client_and_amdgpu_info() {
    let emu = Emu::machine("radeon-vii");
    let render = emu.open_render(0);
    // drm_version: the libdrm two-call pattern.
    let mut version = [0u64; 8];
    let v_cmd = opcode::read_write::<[u64; 8]>(b'd', 0x00);
    assert_eq!(drm(&emu, &render, v_cmd, &mut version), Ok(0));
    assert_eq!(version[0] as u32, 3, "major 3");
    assert_eq!(version[2], 6, "name_len");
    let mut name = [0u8; 6];
    version[3] = name.as_mut_ptr() as u64;
    assert_eq!(drm(&emu, &render, v_cmd, &mut version), Ok(0));
    assert_eq!(&name, b"amdgpu");

    // drm_client: only client 0.
    let c_cmd = opcode::read_write::<[u64; 5]>(b'd', 0x05);
    let mut client = [0u64; 5];
    assert_eq!(drm(&emu, &render, c_cmd, &mut client), Ok(0));
    assert_eq!(client[0] >> 32, 1, "authenticated");
    let mut other = [1u64, 0, 0, 0, 0];
    assert_eq!(drm(&emu, &render, c_cmd, &mut other), Err(Errno::INVAL));

    // drm_amdgpu_info.
    let i_cmd = opcode::write::<[u64; 4]>(b'd', 0x45);
    let info = |out: &mut [u8], query: u32, extra: [u32; 4]| {
        let mut a = [0u32; 8];
        let ptr = out.as_mut_ptr() as u64;
        a[0] = ptr as u32;
        a[1] = (ptr >> 32) as u32;
        a[2] = out.len() as u32;
        a[3] = query;
        a[4..8].copy_from_slice(&extra);
        drm(&emu, &render, i_cmd, &mut a)
    };
    let mut word = [0u8; 4];
    assert_eq!(info(&mut word, 0x00, [0; 4]), Ok(0));
    assert_eq!(u32::from_ne_bytes(word), 1, "accel working");
    let mut dev = [0u8; 368];
    assert_eq!(info(&mut dev, 0x16, [0; 4]), Ok(0));
    assert_eq!(
        u32::from_ne_bytes(dev[0..4].try_into().expect("4")),
        0x66AF,
        "device_id"
    );
    assert_eq!(
        u32::from_ne_bytes(dev[16..20].try_into().expect("4")),
        141,
        "AMDGPU_FAMILY_AI"
    );
    let mut reg = [0u8; 4];
    assert_eq!(info(&mut reg, 0x15, [0x263E, 1, 0xFFFF_FFFF, 0]), Ok(0));
    assert_ne!(u32::from_ne_bytes(reg), 0, "GB_ADDR_CONFIG");
    assert_eq!(
        info(&mut reg, 0x15, [0x1234, 1, 0xFFFF_FFFF, 0]),
        Err(Errno::INVAL)
    );
    assert_eq!(info(&mut reg, 0x15, [0x263E, 129, 0, 0]), Err(Errno::INVAL));
    assert_eq!(info(&mut reg, 0x7F, [0; 4]), Err(Errno::INVAL));
    assert_eq!(
        info(&mut [], 0x00, [0; 4]),
        Err(Errno::INVAL),
        "return_size 0"
    );

    // Anything else.
    let mut scratch = [0u8; 64];
    assert_eq!(
        drm(
            &emu,
            &render,
            opcode::read_write::<[u8; 16]>(b'd', 0x2E),
            &mut scratch
        ),
        Err(Errno::INVAL)
    );
}

/// AMDGPU_INFO_RAS_ENABLED_FEATURES: the server parts answer with UMC, SDMA and GFX enabled
/// (what kfdtest's RAS test requires before it looks for debugfs), a Radeon VII with only the
/// GFX feature and nothing enabled, an RDNA card without ECC `EINVAL` (no RAS context); a
/// 4-byte buffer gets the low half (`min_t(u64, size, sizeof(ras_mask))`).
#[test]
fn ras_enabled_features_per_preset() {
    let i_cmd = opcode::write::<[u64; 4]>(b'd', 0x45);
    let query = |preset: &str, out: &mut [u8]| {
        let emu = Emu::machine(preset);
        let render = emu.open_render(0);
        let mut a = [0u32; 8];
        let ptr = out.as_mut_ptr() as u64;
        a[0] = ptr as u32;
        a[1] = (ptr >> 32) as u32;
        a[2] = out.len() as u32;
        a[3] = 0x20;
        drm(&emu, &render, i_cmd, &mut a)
    };
    const UMC_SDMA_GFX: u64 = 0b111;
    for preset in ["mi300x", "mi210x8", "mi100", "mi300a"] {
        let mut mask = [0u8; 8];
        assert_eq!(query(preset, &mut mask), Ok(0), "{preset}");
        let mask = u64::from_ne_bytes(mask);
        assert_eq!(
            mask & UMC_SDMA_GFX,
            UMC_SDMA_GFX,
            "{preset}: features {mask:#x}"
        );
        assert_eq!(
            (mask >> 32) & UMC_SDMA_GFX,
            UMC_SDMA_GFX,
            "{preset}: enabled"
        );
    }
    let mut mask = [0u8; 8];
    assert_eq!(query("radeon-vii", &mut mask), Ok(0));
    assert_eq!(u64::from_ne_bytes(mask), 1 << 2, "Vega 20 gaming: GFX only");
    let mut low = [0xAAu8; 4];
    assert_eq!(query("mi300x", &mut low), Ok(0));
    assert_eq!(u32::from_ne_bytes(low) & 0b111, 0b111);
    for preset in ["rx7900xtx", "rx9070xt-small-bar"] {
        let mut mask = [0u8; 8];
        assert_eq!(query(preset, &mut mask), Err(Errno::INVAL), "{preset}");
    }
}

/// Reads a whole stand-in file.
fn read_all(fd: std::os::fd::OwnedFd) -> String {
    let mut s = String::new();
    std::fs::File::from(fd)
        .read_to_string(&mut s)
        .expect("read");
    s
}

#[test]
fn opens_are_redirected_to_stand_ins() {
    let emu = Emu::machine("mi210x8");
    let c = emu.caller;
    let m = &emu.model;
    // /dev/kfd: the same KFD process, the same file.
    let kfd2 = injected(m.open(&c, "/dev/kfd", libc::O_RDWR, 0));
    let key = |fd: &dyn AsFd| {
        let st = rustix::fs::fstat(fd).expect("fstat");
        (st.st_dev, st.st_ino)
    };
    assert_eq!(key(&kfd2), key(&emu.kfd));
    // Render nodes: the machine's minors only; a new DRM file (its own empty memfd) each time.
    let r1 = emu.open_render(0);
    let r2 = emu.open_render(0);
    assert_ne!(key(&r1), key(&r2));
    assert_eq!(rustix::fs::fstat(&r1).expect("fstat").st_size, 0);
    assert!(matches!(
        m.open(&c, "/dev/dri/renderD200", libc::O_RDWR, 0),
        OpenAction::Continue
    ));
    // The primary node of the first GPU (minor 0, as its render minor is 128) is a DRM file
    // of its own too; a card of no GPU is the host's.
    let card = injected(m.open(&c, "/dev/dri/card0", libc::O_RDWR, 0));
    assert_ne!(key(&card), key(&r1));
    assert!(matches!(
        m.open(&c, "/dev/dri/card99", libc::O_RDWR, 0),
        OpenAction::Continue
    ));
    assert!(matches!(
        m.open(&c, "/etc/hostname", libc::O_RDONLY, 0),
        OpenAction::Continue
    ));
    // /proc/modules lists amdgpu first.
    let modules = read_all(injected(m.open(&c, "/proc/modules", libc::O_RDONLY, 0)));
    assert!(modules.starts_with("amdgpu "));
    // The topology, under both roots, read-only.
    let machine = m.machine();
    let node2 = machine.topology().node(2).expect("node 2");
    for root in [
        "/sys/devices/virtual/kfd/kfd/topology",
        "/sys/class/kfd/kfd/topology",
    ] {
        let props = read_all(injected(m.open(
            &c,
            &format!("{root}/nodes/2/properties"),
            libc::O_RDONLY,
            0,
        )));
        assert_eq!(props, node2.properties.to_sysfs_text());
        let gpu_id = read_all(injected(m.open(
            &c,
            &format!("{root}/nodes/2/gpu_id"),
            libc::O_RDONLY | libc::O_CLOEXEC,
            0,
        )));
        assert_eq!(gpu_id.trim().parse::<u32>().ok(), node2.gpu_id);
        let dir = injected(m.open(
            &c,
            &format!("{root}/nodes"),
            libc::O_RDONLY | libc::O_DIRECTORY,
            0,
        ));
        let entries = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))
            .expect("read_dir")
            .count();
        assert_eq!(entries, machine.topology().nodes.len());
        assert!(matches!(
            m.open(&c, root, libc::O_RDONLY | libc::O_DIRECTORY, 0),
            OpenAction::Inject(_)
        ));
        for (path, flags, errno) in [
            (
                format!("{root}/nodes/2/properties"),
                libc::O_WRONLY,
                Errno::ACCESS,
            ),
            (
                format!("{root}/nodes/2/properties"),
                libc::O_RDWR,
                Errno::ACCESS,
            ),
            (
                format!("{root}/nodes/2/new"),
                libc::O_RDONLY | libc::O_CREAT,
                Errno::ACCESS,
            ),
            (
                format!("{root}/nodes/99/properties"),
                libc::O_RDONLY,
                Errno::NOENT,
            ),
        ] {
            match m.open(&c, &path, flags, 0o644) {
                OpenAction::Fail(e) => assert_eq!(e, errno, "{path} {flags:#x}"),
                other => panic!("{path}: {other:?}"),
            }
        }
    }
    assert!(matches!(
        m.open(
            &c,
            "/sys/devices/virtual/kfd/kfd/topology2",
            libc::O_RDONLY,
            0
        ),
        OpenAction::Continue
    ));
}

#[test]
fn leaks_are_reported_when_a_process_exits() {
    let mut tidy = Emu::new(ModelConfig {
        check_leaks: true,
        ..ModelConfig::default()
    });
    tidy.acquire_all();
    let gpu = tidy.gpu();
    let (h, _) = tidy.alloc(gpu, va(1), 4096, VRAM_RW).expect("alloc");
    tidy.free(h).expect("free");
    tidy.model.process_exited(tidy.caller.tgid);
    assert!(!tidy.model.leaks_found());

    let mut leaky = Emu::new(ModelConfig {
        check_leaks: true,
        ..ModelConfig::default()
    });
    leaky.acquire_all();
    let (h, _) = leaky.alloc(gpu, va(1), 4096, VRAM_RW).expect("alloc");
    assert_eq!(leaky.map(h, &[gpu]).0, Ok(0));
    let start = leaky.available(gpu);
    leaky.model.process_exited(leaky.caller.tgid);
    assert!(leaky.model.leaks_found());
    // Everything was released: the next KFD process of this pid sees the VRAM back.
    leaky.kfd = injected(leaky.model.open(&leaky.caller, "/dev/kfd", libc::O_RDWR, 0));
    assert_eq!(leaky.available(gpu), start + (2 << 20));
}

/// What a process holds at exit (a mapped VRAM BO, a GTT BO exported to a dma-buf whose fd
/// outlives the process, an event) is freed by its teardown, as `kfd_process_wq_release`
/// frees it: `check_leaks` counts it (the program did not clean up), `check_teardown` does
/// not, and neither finds a teardown leak (nothing survives but the dma-buf's memory, which
/// its open fd holds). The VRAM is available again.
#[test]
fn what_a_process_held_at_exit_is_no_teardown_leak() {
    for strict in [false, true] {
        let mut emu = Emu::new(ModelConfig {
            check_leaks: strict,
            check_teardown: !strict,
            ..ModelConfig::default()
        });
        emu.acquire_all();
        let gpu = emu.gpu();
        let start = emu.available(gpu);
        let (vram, _) = emu.alloc(gpu, va(1), 2 << 20, VRAM_RW).expect("alloc");
        assert_eq!(emu.map(vram, &[gpu]).0, Ok(0));
        let gtt = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
        let (shared, _) = emu.alloc(gpu, va(2), 4096, gtt).expect("alloc");
        let dmabuf = emu.export(shared).expect("export");
        create(&emu, KFD_IOC_EVENT_SIGNAL, true);
        emu.model.process_exited(emu.caller.tgid);
        assert_eq!(emu.model.leaks_found(), strict, "strict: {strict}");
        assert!(!emu.model.teardown_leaks_found(), "strict: {strict}");
        emu.kfd = injected(emu.model.open(&emu.caller, "/dev/kfd", libc::O_RDWR, 0));
        assert_eq!(emu.available(gpu), start);
        drop(dmabuf);
    }
}

/// amdgpu's `mem_info_vram_used` (`%llu` bytes of VRAM in use) is read fresh at each open,
/// through any of the paths that lead to the GPU's PCI device: 0 on a fresh model, the BO's
/// size once a process holds a VRAM BO, 0 again after it is freed; `mem_info_vram_total` is
/// the VRAM size and the file refuses writing (`EACCES`, as sysfs's 0444 files do).
#[test]
fn mem_info_vram_used_follows_the_processes_vram() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let used = |path: &str| -> u64 {
        let fd = injected(emu.model.open(&emu.caller, path, libc::O_RDONLY, 0));
        read_all(fd).trim().parse().expect("a number")
    };
    let by_class = "/sys/class/drm/renderD128/device/mem_info_vram_used";
    let slot = emu.model.machine().gpus()[0].pci_slot_name();
    let by_bus = format!("/sys/bus/pci/devices/{slot}/mem_info_vram_used");
    assert_eq!(used(by_class), 0);
    let gpu = emu.gpu();
    let size = 64u64 << 20;
    let (handle, _) = emu.alloc(gpu, va(1), size, VRAM_RW).expect("alloc");
    assert_eq!(used(by_class), size);
    assert_eq!(used(&by_bus), size);
    assert_eq!(
        used("/sys/class/drm/renderD128/device/mem_info_vram_total"),
        emu.model.machine().gpus()[0].vram_size
    );
    emu.free(handle).expect("free");
    assert_eq!(used(by_class), 0);
    assert!(matches!(
        emu.model.open(&emu.caller, by_class, libc::O_RDWR, 0),
        kfd_emu::backend::OpenAction::Fail(Errno::ACCESS)
    ));
}
