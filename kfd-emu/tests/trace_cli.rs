//! `kfd-emu run --trace`: each ioctl a program issues is printed by the dispatcher with the
//! decoder of the same table entry that answered it.

use std::os::fd::AsRawFd;

use kfd_ioctl::abi::{
    AMDKFD_IOC_CREATE_EVENT, AMDKFD_IOC_FREE_MEMORY_OF_GPU, AMDKFD_IOC_GET_VERSION,
    AMDKFD_IOC_SET_XNACK_MODE, KFD_IOC_EVENT_SIGNAL, kfd_ioctl_create_event_args,
    kfd_ioctl_free_memory_of_gpu_args, kfd_ioctl_get_version_args, kfd_ioctl_set_xnack_mode_args,
};
use rustix::ioctl::{Opcode, opcode};
use zerocopy::{Immutable, IntoBytes};

/// The environment variable that makes this test binary the traced program of
/// [`trace_prints_each_ioctl_with_its_table_entry`].
const TRACED: &str = "KFD_EMU_TEST_TRACED";

/// A number past every KFD ioctl.
const UNKNOWN: u8 = 0x82;

/// Issues ioctl `cmd` on `fd` with `arg`; the result is in the trace.
fn ioctl<T: IntoBytes + Immutable>(fd: &std::fs::File, cmd: Opcode, arg: &mut T) {
    // SAFETY: `arg` is a live, exclusively borrowed value of the size `cmd` carries, and the
    // kernel (here the emulator) writes at most that many bytes to it.
    let _ = unsafe { libc::ioctl(fd.as_raw_fd(), cmd as _, std::ptr::from_mut(arg)) };
}

/// The traced program (runs only under [`TRACED`]): a few ioctls whose trace lines are known.
#[test]
fn traced_role() {
    if std::env::var_os(TRACED).is_none() {
        return;
    }
    let kfd = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kfd")
        .expect("the emulated /dev/kfd");
    ioctl(
        &kfd,
        AMDKFD_IOC_GET_VERSION,
        &mut kfd_ioctl_get_version_args::default(),
    );
    let mut query = kfd_ioctl_set_xnack_mode_args { xnack_enabled: -1 };
    ioctl(&kfd, AMDKFD_IOC_SET_XNACK_MODE, &mut query);
    let mut event = kfd_ioctl_create_event_args {
        event_type: KFD_IOC_EVENT_SIGNAL,
        auto_reset: 1,
        ..Default::default()
    };
    ioctl(&kfd, AMDKFD_IOC_CREATE_EVENT, &mut event);
    let mut free = kfd_ioctl_free_memory_of_gpu_args { handle: 0x1234 };
    ioctl(&kfd, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &mut free);
    ioctl(&kfd, opcode::read_write::<u64>(b'K', UNKNOWN), &mut 0u64);
}

#[test]
fn trace_prints_each_ioctl_with_its_table_entry() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kfd-emu"))
        .args(["run", "--trace", "--"])
        .arg(std::env::current_exe().expect("the test binary"))
        .args(["--exact", "traced_role", "--nocapture", "--test-threads=1"])
        .env(TRACED, "1")
        .output()
        .expect("kfd-emu run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stderr}", out.status);
    // Each ioctl's line, after `[pid N] `, in the order issued.
    let lines: Vec<&str> = stderr
        .lines()
        .filter_map(|line| line.strip_prefix("[pid ")?.split_once("] "))
        .map(|(_, rest)| rest)
        .collect();
    let starts = [
        "GET_VERSION() = 0 (major_version=1, minor_version=23)",
        // The entry's decoder prints the field signed.
        "SET_XNACK_MODE(xnack_enabled=-1) = 0 (xnack_enabled=",
        // The entry's decoder names the event type.
        "CREATE_EVENT(event_page_offset=0x0, event_trigger_data=0, event_type=SIGNAL, \
         auto_reset=1, node_id=0, event_id=0x0, event_slot_index=0) = 0 (",
        "FREE_MEMORY_OF_GPU(handle=0x1234) = -EINVAL",
        "ioctl(kfd, 0xc0084b82) = -ENOTTY",
    ];
    assert_eq!(lines.len(), starts.len(), "{stderr}");
    for (line, start) in lines.iter().zip(starts) {
        assert!(
            line.starts_with(start),
            "{line:?} does not start with {start:?}"
        );
    }
}
