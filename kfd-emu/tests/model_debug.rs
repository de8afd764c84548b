//! AMDKFD_IOC_DBG_TRAP and RUNTIME_ENABLE's debugger hand-shake (`model/debug.rs`), driven
//! through the model as a process debugging itself (kfdtest's HitTrapEvent does the same) and
//! as the tracer of a child: the errno contract of `kfd_ioctl_set_debug_trap` and the events
//! `kfd_dbg_ev_raise` writes to the debug event fd.

mod model_support;

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

use kfd_emu::backend::Backend;
use kfd_ioctl::abi::*;
use model_support::{Emu, TestCaller};
use rustix::event::{PollFd, PollFlags, poll};
use rustix::io::Errno;

fn trap(pid: i32, op: u32) -> kfd_ioctl_dbg_trap_args {
    kfd_ioctl_dbg_trap_args {
        pid: pid as u32,
        op,
        ..Default::default()
    }
}

fn runtime(on: bool) -> kfd_ioctl_runtime_enable_args {
    kfd_ioctl_runtime_enable_args {
        r_debug: 0x1234,
        mode_mask: if on {
            KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK | KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK
        } else {
            0
        },
        capabilities_mask: 0,
    }
}

/// ENABLE of `pid` with event fd `fd`, subscribing to `mask`; the runtime info it copied.
fn enable(emu: &Emu, pid: i32, fd: i32, mask: u64) -> (Result<i64, Errno>, [u8; 16], u32) {
    let mut info = [0xAAu8; 16];
    let mut a = trap(pid, KFD_IOC_DBG_TRAP_ENABLE);
    a.set_enable(kfd_ioctl_dbg_trap_enable_args {
        exception_mask: mask,
        rinfo_ptr: info.as_mut_ptr() as u64,
        rinfo_size: 16,
        dbg_fd: fd as u32,
    });
    let r = emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut a);
    (r, info, a.enable().rinfo_size)
}

/// Waits up to 10 s for the debug event fd to be readable and takes its bytes.
fn event_bytes(read: &OwnedFd) -> Vec<u8> {
    let mut fds = [PollFd::new(read, PollFlags::IN)];
    let ready = poll(
        &mut fds,
        Some(&rustix::event::Timespec {
            tv_sec: 10,
            tv_nsec: 0,
        }),
    );
    assert_eq!(ready, Ok(1), "no debug event within 10 s");
    let mut buf = [0u8; 16];
    let n = rustix::io::read(read, &mut buf).expect("read the event fd");
    buf[..n].to_vec()
}

fn query(emu: &Emu, pid: i32, clear: u64) -> (Result<i64, Errno>, u64) {
    let mut a = trap(pid, KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT);
    a.set_query_debug_event(kfd_ioctl_dbg_trap_query_debug_event_args {
        exception_mask: clear,
        ..Default::default()
    });
    let r = emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut a);
    (r, a.query_debug_event().exception_mask)
}

fn runtime_mask() -> u64 {
    kfd_ec_mask(EC_PROCESS_RUNTIME)
}

/// A process debugging itself: every op but ENABLE needs debugging enabled, ENABLE takes a
/// valid fd and copies the runtime info, the runtime-only ops need the runtime enabled, and a
/// runtime disable raises `EC_PROCESS_RUNTIME` (one `'.'` on the fd) and blocks until the
/// debugger's SEND_RUNTIME_EVENT.
#[test]
fn self_debugging_follows_the_kernels_errno_contract_and_hand_shake() {
    let emu = std::sync::Arc::new(Emu::machine("mi300x"));
    let me = emu.caller.tgid;
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut trap(i32::MAX, 0)),
        Err(Errno::SRCH)
    );
    // Not enabled: every op but ENABLE is EINVAL.
    for op in [
        KFD_IOC_DBG_TRAP_DISABLE,
        KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED,
        KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT,
        KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT,
    ] {
        assert_eq!(
            emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut trap(me, op)),
            Err(Errno::INVAL),
            "op {op}"
        );
    }
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_RUNTIME_ENABLE, &mut runtime(true)),
        Ok(0)
    );
    // No such fd: EBADF.
    assert_eq!(
        enable(&emu, me, 1 << 20, runtime_mask()).0,
        Err(Errno::BADF)
    );
    let (read, write) = rustix::pipe::pipe().expect("pipe");
    rustix::fs::fcntl_setfl(&read, rustix::fs::OFlags::NONBLOCK).expect("nonblock");
    let (r, info, size) = enable(&emu, me, write.as_raw_fd(), runtime_mask());
    assert_eq!(r, Ok(0));
    assert_eq!(size, 16);
    // kfd_runtime_info: r_debug, runtime_state ENABLED, ttmp_setup.
    assert_eq!(info[..8], 0x1234u64.to_ne_bytes());
    assert_eq!(info[8..12], DEBUG_RUNTIME_STATE_ENABLED.to_ne_bytes());
    assert_eq!(info[12..], 1u32.to_ne_bytes());
    assert_eq!(
        enable(&emu, me, write.as_raw_fd(), 0).0,
        Err(Errno::ALREADY)
    );
    // Nothing raised yet.
    assert_eq!(query(&emu, me, 0).0, Err(Errno::AGAIN));
    let mut mode = trap(me, KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE);
    mode.set_launch_mode(kfd_ioctl_dbg_trap_set_wave_launch_mode_args {
        launch_mode: 2,
        pad: 0,
    });
    assert_eq!(emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut mode), Err(Errno::INVAL));
    mode.set_launch_mode(kfd_ioctl_dbg_trap_set_wave_launch_mode_args {
        launch_mode: 1,
        pad: 0,
    });
    assert_eq!(emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut mode), Ok(0));

    // The runtime disable waits for the debugger.
    let runtime_emu = emu.clone();
    let disabler = std::thread::spawn(move || {
        runtime_emu.ioctl(AMDKFD_IOC_RUNTIME_ENABLE, &mut runtime(false))
    });
    assert_eq!(event_bytes(&read), b".");
    // Raised, and only the SEND_RUNTIME_EVENT below can end the wait.
    assert!(!disabler.is_finished());
    assert_eq!(query(&emu, me, 0), (Ok(0), runtime_mask()));
    let mut info = [0u8; 16];
    let mut q = trap(me, KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO);
    q.set_query_exception_info(kfd_ioctl_dbg_trap_query_exception_info_args {
        info_ptr: info.as_mut_ptr() as u64,
        info_size: 16,
        source_id: 0,
        exception_code: EC_PROCESS_RUNTIME,
        clear_exception: 1,
    });
    assert_eq!(emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut q), Ok(0));
    assert_eq!(q.query_exception_info().info_size, 16);
    assert_eq!(info[8..12], DEBUG_RUNTIME_STATE_DISABLED.to_ne_bytes());
    // Cleared: nothing left to report.
    assert_eq!(emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut q), Err(Errno::NODATA));
    assert_eq!(query(&emu, me, 0).0, Err(Errno::AGAIN));
    let mut send = trap(me, KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT);
    send.set_send_runtime_event(kfd_ioctl_dbg_trap_send_runtime_event_args {
        exception_mask: runtime_mask(),
        gpu_id: 0,
        queue_id: 0,
    });
    assert_eq!(emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut send), Ok(0));
    assert_eq!(disabler.join().expect("runtime disable"), Ok(0));
    // The runtime is off: the wave-launch ops are EPERM.
    assert_eq!(emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut mode), Err(Errno::PERM));
    // An exception enabled while raised is told at once.
    let mut set = trap(me, KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED);
    set.set_set_exceptions_enabled(kfd_ioctl_dbg_trap_set_exceptions_enabled_args {
        exception_mask: 0,
    });
    assert_eq!(emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut set), Ok(0));
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut trap(me, KFD_IOC_DBG_TRAP_DISABLE)),
        Ok(0)
    );
    assert_eq!(emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut set), Err(Errno::INVAL));
}

/// ENABLE of another process: `EPERM` unless the caller traces it; a traced child with no
/// KFD process gets one (`kfd_create_process`), which its own open of `/dev/kfd` then finds.
#[test]
fn enable_needs_the_caller_to_trace_the_target() {
    let emu = Emu::machine("mi300x");
    // A child this thread traces (PTRACE_TRACEME before its exec: stopped at the exec).
    // SAFETY: the hook only calls ptrace, which is async-signal-safe.
    let traced = unsafe {
        std::process::Command::new("sleep")
            .arg("60")
            .pre_exec(|| {
                if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
            .spawn()
            .expect("spawn a traced child")
    };
    let untraced = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("spawn a child");
    let (_read, write) = rustix::pipe::pipe().expect("pipe");
    let pid = traced.id() as i32;
    // A process that has no KFD process and is not traced: ESRCH; traced: created.
    let other = untraced.id() as i32;
    assert_eq!(
        enable(&emu, other, write.as_raw_fd(), 0).0,
        Err(Errno::SRCH)
    );
    let (r, info, _) = enable(&emu, pid, write.as_raw_fd(), 0);
    assert_eq!(r, Ok(0));
    assert_eq!(info[8..12], DEBUG_RUNTIME_STATE_DISABLED.to_ne_bytes());
    // Its open of /dev/kfd finds that process: debugging is still enabled there.
    let child = TestCaller {
        tid: pid,
        tgid: pid,
    };
    let _kfd = model_support::injected(emu.model.open(
        &child,
        "/dev/kfd",
        libc::O_RDWR | libc::O_CLOEXEC,
        0,
    ));
    assert_eq!(
        enable(&emu, pid, write.as_raw_fd(), 0).0,
        Err(Errno::ALREADY)
    );
    // The untraced child with a KFD process of its own: EPERM (DISABLE excepted).
    let stranger = TestCaller {
        tid: other,
        tgid: other,
    };
    let _kfd2 = model_support::injected(emu.model.open(
        &stranger,
        "/dev/kfd",
        libc::O_RDWR | libc::O_CLOEXEC,
        0,
    ));
    assert_eq!(
        enable(&emu, other, write.as_raw_fd(), 0).0,
        Err(Errno::PERM)
    );
    assert_eq!(
        emu.ioctl(
            AMDKFD_IOC_DBG_TRAP,
            &mut trap(other, KFD_IOC_DBG_TRAP_DISABLE)
        ),
        Err(Errno::INVAL)
    );
    for mut c in [traced, untraced] {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// SET_WAVE_LAUNCH_OVERRIDE per GC version: what each GPU supports (GC 9.4.3 traps on wave
/// start and end, GC 9.4.2 not, GC 9.4.1 only the address watch and only OR), `EACCES` for a
/// request outside it with the supported mask written back, the previous mask answered.
#[test]
fn wave_launch_override_follows_each_gc_versions_support() {
    let start = KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_START;
    let watch = KFD_DBG_TRAP_MASK_DBG_ADDRESS_WATCH;
    for (preset, supports_start, replace) in [
        ("mi300x", true, Ok(0)),
        ("mi210x8", false, Ok(0)),
        ("mi100", false, Err(Errno::INVAL)),
    ] {
        let emu = Emu::machine(preset);
        let me = emu.caller.tgid;
        let (_read, write) = rustix::pipe::pipe().expect("pipe");
        let over = |mode: u32, enable: u32, request: u32| {
            let mut a = trap(me, KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE);
            a.set_launch_override(kfd_ioctl_dbg_trap_set_wave_launch_override_args {
                override_mode: mode,
                enable_mask: enable,
                support_request_mask: request,
                pad: 0,
            });
            let r = emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut a);
            let o = a.launch_override();
            (r, o.enable_mask, o.support_request_mask)
        };
        assert_eq!(enable(&emu, me, write.as_raw_fd(), 0).0, Ok(0));
        // The runtime is off: EPERM.
        assert_eq!(
            over(KFD_DBG_TRAP_OVERRIDE_OR, start, start).0,
            Err(Errno::PERM)
        );
        // (Enabled before the debugger is: with one attached the enable would wait for its
        // answer.)
        let mut off = trap(me, KFD_IOC_DBG_TRAP_DISABLE);
        assert_eq!(emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut off), Ok(0));
        assert_eq!(
            emu.ioctl(AMDKFD_IOC_RUNTIME_ENABLE, &mut runtime(true)),
            Ok(0)
        );
        assert_eq!(enable(&emu, me, write.as_raw_fd(), 0).0, Ok(0));
        let (r, prev, supported) = over(KFD_DBG_TRAP_OVERRIDE_OR, start, start);
        if supports_start {
            // The whole supported mask comes back (the float exceptions, address watch,
            // memory violation, wave start and end).
            assert_eq!((r, prev, supported), (Ok(0), 0, 0xC000_01FF), "{preset}");
            // The previous mask comes back; a zero within the request clears it.
            assert_eq!(over(KFD_DBG_TRAP_OVERRIDE_OR, 0, start).0, Ok(0));
            assert_eq!(over(KFD_DBG_TRAP_OVERRIDE_OR, 0, start).1, 0);
        } else {
            // kfdtest's HitTrapOnWaveStartEndEvent skips on this answer.
            assert_eq!((r, prev), (Err(Errno::ACCESS), start), "{preset}");
            assert_eq!(supported & start, 0, "{preset}");
        }
        let (r, prev, supported) = over(KFD_DBG_TRAP_OVERRIDE_OR, watch, watch);
        assert_eq!((r, prev, supported & watch), (Ok(0), 0, watch), "{preset}");
        assert_eq!(
            over(KFD_DBG_TRAP_OVERRIDE_REPLACE, 0, watch).0,
            replace,
            "{preset}"
        );
        assert!(over(7, 0, 0).0.is_err(), "{preset}");
    }
}
