//! The dispatcher rules of `kfd_ioctl` (kfd-abi.md §4.1) and fault injection, through the
//! Backend trait.

mod model_support;

use std::os::fd::AsFd;

use kfd_emu::backend::Backend;
use kfd_emu::machine::Machine;
use kfd_emu::model::ModelConfig;
use kfd_ioctl::abi::*;
use model_support::*;
use rustix::io::Errno;
use rustix::ioctl::opcode;

fn at_minor(minor: u32) -> Emu {
    Emu::new(ModelConfig {
        kfd_minor: minor,
        ..ModelConfig::default()
    })
}

#[test]
fn get_version_reports_the_configured_minor() {
    for minor in [23, 11, 5] {
        let emu = at_minor(minor);
        let mut v = kfd_ioctl_get_version_args::default();
        assert_eq!(emu.ioctl(AMDKFD_IOC_GET_VERSION, &mut v), Ok(0));
        assert_eq!((v.major_version, v.minor_version), (1, minor));
    }
    let bad = kfd_emu::model::Model::new(ModelConfig {
        kfd_minor: 24,
        ..ModelConfig::default()
    });
    assert!(bad.is_err(), "a minor newer than the header");
}

#[test]
fn numbers_outside_the_table_of_the_kernel_acted_as() {
    let new = at_minor(23);
    let old = at_minor(11);
    // ROCr 5.2's RuntimeEnable probe uses the DKMS number 0x82.
    let dkms_dbg_trap = opcode::read_write::<[u8; 32]>(b'K', 0x82);
    let mut scratch = [0u8; 64];
    let addr = scratch.as_mut_ptr() as u64;
    let cases = [
        (opcode::none(b'K', 0x00), Errno::NOTTY, Errno::INVAL),
        (opcode::none(b'K', 0x29), Errno::NOTTY, Errno::INVAL),
        (dkms_dbg_trap, Errno::NOTTY, Errno::INVAL),
        (opcode::none(b'K', 0xFF), Errno::NOTTY, Errno::INVAL),
    ];
    for (cmd, errno_new, errno_old) in cases {
        assert_eq!(new.ioctl_raw(cmd, addr), Err(errno_new), "{cmd:#x} at 1.23");
        assert_eq!(old.ioctl_raw(cmd, addr), Err(errno_old), "{cmd:#x} at 1.11");
    }
    // EXPORT_DMABUF (0x24) appeared in 1.12: 1.11's COMMAND_END is 0x24.
    let mut export = kfd_ioctl_export_dmabuf_args::default();
    assert_eq!(
        old.ioctl(AMDKFD_IOC_EXPORT_DMABUF, &mut export),
        Err(Errno::INVAL)
    );
    assert_eq!(
        new.ioctl(AMDKFD_IOC_EXPORT_DMABUF, &mut export),
        Err(Errno::INVAL),
        "bad handle"
    );
    // AVAILABLE_MEMORY (0x23, 1.9) is there at 1.11.
    let mut avail = kfd_ioctl_get_available_memory_args {
        gpu_id: old.gpu(),
        ..Default::default()
    };
    assert_eq!(old.ioctl(AMDKFD_IOC_AVAILABLE_MEMORY, &mut avail), Ok(0));
    // The deprecated debugger slots answer EPERM.
    let mut reg = kfd_ioctl_dbg_register_args::default();
    assert_eq!(
        new.ioctl(AMDKFD_IOC_DBG_REGISTER_DEPRECATED, &mut reg),
        Err(Errno::PERM)
    );
}

#[test]
fn the_type_byte_is_ignored_and_the_size_comes_from_the_caller() {
    let emu = at_minor(23);
    // 'd' with number 1 and 8 bytes is GET_VERSION to KFD.
    let mut v = kfd_ioctl_get_version_args::default();
    let cmd = opcode::read::<kfd_ioctl_get_version_args>(b'd', 0x01);
    assert_eq!(emu.ioctl_raw(cmd, &mut v as *mut _ as u64), Ok(0));
    assert_eq!(v.major_version, 1);

    // A longer struct: GET_VERSION is out-only, so the caller's tail is zeroed and copied back.
    let mut long = [0xAAu8; 16];
    let cmd = opcode::read::<[u8; 16]>(b'K', 0x01);
    assert_eq!(emu.ioctl_raw(cmd, long.as_mut_ptr() as u64), Ok(0));
    assert_eq!(&long[8..], &[0u8; 8]);

    // A shorter struct: GET_CLOCK_COUNTERS without gpu_id reads as gpu_id 0, and only the
    // caller's 32 bytes are written.
    let mut short = [0xAAu8; 40];
    let cmd = opcode::read_write::<[u8; 32]>(b'K', 0x05);
    assert_eq!(emu.ioctl_raw(cmd, short.as_mut_ptr() as u64), Ok(0));
    assert_eq!(
        &short[32..],
        &[0xAAu8; 8],
        "nothing written past the caller's size"
    );
    assert_eq!(&short[..8], &[0u8; 8], "no GPU: gpu_clock_counter 0");
    assert_eq!(
        u64::from_ne_bytes(short[24..32].try_into().expect("8")),
        1_000_000_000
    );
}

#[test]
fn bad_pointers_are_efault() {
    let emu = at_minor(23);
    assert_eq!(
        emu.ioctl_raw(AMDKFD_IOC_GET_VERSION, 0),
        Err(Errno::FAULT),
        "copy-out"
    );
    assert_eq!(
        emu.ioctl_raw(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, 8),
        Err(Errno::FAULT),
        "copy-in"
    );
    assert_eq!(
        emu.ioctl_raw(AMDKFD_IOC_ACQUIRE_VM, u64::MAX - 3),
        Err(Errno::FAULT)
    );
    // A copy-out fault turns a success into EFAULT: the apertures count into a read-only page.
    let ro = rustix::mm::ProtFlags::READ;
    // SAFETY: a fresh anonymous page, unmapped below.
    let page = unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            4096,
            ro,
            rustix::mm::MapFlags::PRIVATE,
        )
    }
    .expect("mmap");
    assert_eq!(
        emu.ioctl_raw(AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, page as u64),
        Err(Errno::FAULT)
    );
    // SAFETY: unmaps the page mapped above.
    unsafe { rustix::mm::munmap(page, 4096) }.expect("munmap");
}

#[test]
fn another_process_gets_ebadf() {
    let emu = at_minor(23);
    let child = TestCaller::other();
    let mut v = kfd_ioctl_get_version_args::default();
    assert_eq!(
        emu.ioctl_as(&child, AMDKFD_IOC_GET_VERSION, &mut v),
        Err(Errno::BADF)
    );
    // The number check still comes first.
    let mut scratch = [0u8; 8];
    let r = emu.model.ioctl(
        &child,
        emu.kfd.as_fd(),
        opcode::none(b'K', 0x30),
        scratch.as_mut_ptr() as u64,
    );
    assert_eq!(r, Some(Err(Errno::NOTTY)));
    // The child opens /dev/kfd itself: a new KFD process, a new file.
    let own = injected(emu.model.open(&child, "/dev/kfd", libc::O_RDWR, 0));
    let r = emu.model.ioctl(
        &child,
        own.as_fd(),
        AMDKFD_IOC_GET_VERSION,
        &mut v as *mut _ as u64,
    );
    assert_eq!(r, Some(Ok(0)));
    // Once the parent is gone, its fd is a dead KFD file.
    emu.model.process_exited(emu.caller.tgid);
    assert_eq!(emu.ioctl(AMDKFD_IOC_GET_VERSION, &mut v), Err(Errno::BADF));
}

#[test]
fn a_second_open_in_a_process_is_the_same_kfd_process() {
    let mut emu = at_minor(23);
    emu.acquire_all();
    let again = injected(emu.model.open(&emu.caller, "/dev/kfd", libc::O_RDWR, 0));
    // The BO made through one fd is freed through the other.
    let (h, _) = emu.alloc(emu.gpu(), va(1), 4096, VRAM_RW).expect("alloc");
    let mut free = kfd_ioctl_free_memory_of_gpu_args { handle: h };
    let r = emu.model.ioctl(
        &emu.caller,
        again.as_fd(),
        AMDKFD_IOC_FREE_MEMORY_OF_GPU,
        &mut free as *mut _ as u64,
    );
    assert_eq!(r, Some(Ok(0)));
}

#[test]
fn files_that_are_not_stand_ins_are_not_answered() {
    let emu = at_minor(23);
    let null = std::fs::File::open("/dev/null").expect("open");
    assert_eq!(
        emu.model
            .ioctl(&emu.caller, null.as_fd(), AMDKFD_IOC_GET_VERSION, 0),
        None
    );
}

#[test]
fn the_svm_size_check_comes_before_the_handler() {
    let emu = at_minor(23);
    // nattr 2 with a 24-byte command word: EINVAL and no copy-out.
    let mut args = [0u8; 40];
    args[0..8].copy_from_slice(&0x7000_0000_0000u64.to_ne_bytes());
    args[8..16].copy_from_slice(&4096u64.to_ne_bytes());
    args[20..24].copy_from_slice(&2u32.to_ne_bytes());
    let before = args;
    assert_eq!(
        emu.ioctl_raw(amdkfd_ioc_svm(0), args.as_mut_ptr() as u64),
        Err(Errno::INVAL)
    );
    assert_eq!(args, before);
    // A consistent size gets to the handler's checks: misaligned, zero size, bad op.
    let call = |start: u64, size: u64, op: u32| {
        let mut a = [0u8; 40];
        a[0..8].copy_from_slice(&start.to_ne_bytes());
        a[8..16].copy_from_slice(&size.to_ne_bytes());
        a[16..20].copy_from_slice(&op.to_ne_bytes());
        a[20..24].copy_from_slice(&2u32.to_ne_bytes());
        emu.ioctl_raw(amdkfd_ioc_svm(2), a.as_mut_ptr() as u64)
    };
    assert_eq!(
        call(0x7000_0000_0800, 4096, 0),
        Err(Errno::INVAL),
        "misaligned"
    );
    assert_eq!(call(0x7000_0000_0000, 0, 0), Err(Errno::INVAL), "zero size");
    // svm_ioctl's `r = EINVAL` is positive: the ioctl returns 22.
    assert_eq!(call(0x7000_0000_0000, 4096, 7), Ok(22), "bad op");
    // Past the ioctl-level checks: nothing is mapped there (a hole).
    assert_eq!(call(0x7000_0000_0000, 4096, 1), Err(Errno::FAULT));
}

#[test]
fn fail_rules_fire_before_the_handler() {
    let mut emu = Emu::new(ModelConfig {
        fail: vec![
            "ALLOC_MEMORY_OF_GPU:ENOMEM:2".parse().expect("rule"),
            "AMDKFD_IOC_GET_CLOCK_COUNTERS:5".parse().expect("rule"),
        ],
        ..ModelConfig::default()
    });
    emu.acquire_all();
    let gpu = emu.gpu();
    assert_eq!(emu.alloc(gpu, va(1), 4096, VRAM_RW), Err(Errno::NOMEM));
    assert_eq!(emu.alloc(gpu, va(1), 4096, VRAM_RW), Err(Errno::NOMEM));
    let (h, _) = emu
        .alloc(gpu, va(1), 4096, VRAM_RW)
        .expect("the third succeeds");
    assert_eq!(
        h,
        u64::from(gpu) << 32,
        "the failed calls allocated nothing"
    );
    for _ in 0..3 {
        let mut c = kfd_ioctl_get_clock_counters_args::default();
        assert_eq!(
            emu.ioctl(AMDKFD_IOC_GET_CLOCK_COUNTERS, &mut c),
            Err(Errno::IO)
        );
    }
    // Other ioctls are not affected.
    let mut v = kfd_ioctl_get_version_args::default();
    assert_eq!(emu.ioctl(AMDKFD_IOC_GET_VERSION, &mut v), Ok(0));
}

#[test]
fn criu_needs_a_capability() {
    let emu = at_minor(23);
    let status = std::fs::read_to_string("/proc/thread-self/status").expect("status");
    let caps = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .expect("CapEff");
    let privileged = caps & (1 << 40 | 1 << 21) != 0;
    let mut criu = kfd_ioctl_criu_args {
        op: 99,
        ..Default::default()
    };
    let expected = if privileged {
        Errno::INVAL
    } else {
        Errno::ACCESS
    };
    assert_eq!(emu.ioctl(AMDKFD_IOC_CRIU_OP, &mut criu), Err(expected));
}

#[test]
fn tracing_does_not_change_results() {
    let mut emu = Emu::new(ModelConfig {
        trace: true,
        machine: Machine::preset("radeon-vii").expect("preset"),
        ..ModelConfig::default()
    });
    emu.acquire_all();
    let gpu = emu.gpu();
    let (h, _) = emu.alloc(gpu, va(1), 4096, VRAM_RW).expect("alloc");
    assert_eq!(emu.map(h, &[gpu]), (Ok(0), 1));
    assert_eq!(emu.free(h), Err(Errno::BUSY));
    assert_eq!(
        emu.ioctl_raw(opcode::none(b'K', 0x82), 0),
        Err(Errno::NOTTY)
    );
}
