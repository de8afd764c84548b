//! AMDKFD_IOC_DBG_TRAP and RUNTIME_ENABLE's debugger hand-shake (`model/debug.rs`), driven
//! through the model as a process debugging itself (kfdtest's HitTrapEvent does the same) and
//! as the tracer of a child: the errno contract of `kfd_ioctl_set_debug_trap` and the events
//! `kfd_dbg_ev_raise` writes to the debug event fd.

mod model_support;

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

use kfd_emu::backend::Backend;
use kfd_ioctl::abi::*;
use model_support::{Emu, TestCaller, va};
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
/// start and end, GC 9.4.2 and GC 11.0.0 not, GC 9.4.1 and GC 9.0 (GC 10 alike) only the address
/// watch and only OR), `EACCES` for a request outside it with the supported mask written
/// back, the previous mask answered.
#[test]
fn wave_launch_override_follows_each_gc_versions_support() {
    let start = KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_START;
    let watch = KFD_DBG_TRAP_MASK_DBG_ADDRESS_WATCH;
    for (preset, supports_start, replace) in [
        ("mi300x", true, Ok(0)),
        ("mi210x8", false, Ok(0)),
        ("mi100", false, Err(Errno::INVAL)),
        ("radeon-vii", false, Err(Errno::INVAL)),
        ("rx7900xtx", false, Ok(0)),
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

/// A kernel that traps (`s_trap 1`), and at CODE + 256 a second-level trap handler of
/// kfdtest's `TrapHandlerIsa` shape: it asks the SPI for the wave's doorbell
/// (MSG_GET_DOORBELL), sends an interrupt whose data names it with trap code 2
/// (`EC_QUEUE_WAVE_TRAP`: `doorbell | 0x800`), steps past the `s_trap` and returns.
const TRAPPING: &str = "s_trap 1\n s_endpgm\n .p2align 8\n handler:\n\
    s_mov_b32 ttmp2, exec_lo\n s_mov_b32 ttmp3, exec_hi\n s_mov_b32 exec_lo, 0x80000000\n\
    s_sendmsg 10\n wait:\n s_nop 7\n s_bitcmp0_b32 exec_lo, 0x1f\n s_cbranch_scc0 wait\n\
    s_mov_b32 exec_hi, ttmp3\n s_and_b32 exec_lo, exec_lo, 0xfff\n s_mov_b32 ttmp3, exec_lo\n\
    s_mov_b32 exec_lo, ttmp2\n s_mov_b32 ttmp2, m0\n s_or_b32 ttmp3, ttmp3, 0x800\n\
    s_mov_b32 m0, ttmp3\n s_sendmsg sendmsg(MSG_INTERRUPT)\n s_mov_b32 m0, ttmp2\n\
    s_add_u32 ttmp0, ttmp0, 4\n s_addc_u32 ttmp1, ttmp1, 0\n s_and_b32 ttmp1, ttmp1, 0xffff\n\
    s_setreg_b32 hwreg(HW_REG_STATUS), ttmp12\n s_rfe_b64 ttmp[0:1]";

/// SET_TRAP_HANDLER of the queue's GPU: second-level TBA `tba`, no TMA.
fn set_trap_handler(q: &model_support::aql::Queue, tba: u64) {
    let mut a = kfd_ioctl_set_trap_handler_args {
        tba_addr: tba,
        tma_addr: 0,
        gpu_id: q.emu.gpu(),
        pad: 0,
    };
    assert_eq!(q.emu.ioctl(AMDKFD_IOC_SET_TRAP_HANDLER, &mut a), Ok(0));
}

/// Whether the debug event fd has a byte, after a pass of the engines (non-blocking).
fn has_event(read: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(read, PollFlags::IN)];
    poll(&mut fds, Some(&rustix::event::Timespec::default())) == Ok(1)
}

/// QUERY_DEBUG_EVENT clearing `clear`: (result, exception mask, gpu id, queue id).
fn query_full(emu: &Emu, pid: i32, clear: u64) -> (Result<i64, Errno>, u64, u32, u32) {
    let mut a = trap(pid, KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT);
    a.set_query_debug_event(kfd_ioctl_dbg_trap_query_debug_event_args {
        exception_mask: clear,
        ..Default::default()
    });
    let r = emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut a);
    let q = a.query_debug_event();
    (r, q.exception_mask, q.gpu_id, q.queue_id)
}

/// kfdtest's HitTrapEvent in the model: a wave's `s_trap` enters the kernel's first-level
/// trap handler, which jumps to the second-level one SET_TRAP_HANDLER gave; its
/// MSG_INTERRUPT from the trap handler (PRIV) names the queue's doorbell and
/// `EC_QUEUE_WAVE_TRAP`, which `kfd_set_dbg_ev_from_interrupt` raises on that queue for the
/// debugger (one byte on its fd; QUERY_DEBUG_EVENT names the queue and the GPU); the handler
/// returns past the `s_trap` and the dispatch completes.
#[test]
fn a_waves_s_trap_runs_the_trap_handler_whose_interrupt_raises_wave_trap() {
    use model_support::aql::*;
    let Some((text, kd)) = assemble("gfx942", TRAPPING) else {
        return;
    };
    let mut q = Queue::create(Setup::aql("mi300x"));
    q.load(&text, &kd);
    set_trap_handler(&q, va(2) + CODE as u64 + 256);
    let me = q.emu.caller.tgid;
    let (read, write) = rustix::pipe::pipe().expect("pipe");
    let wave_trap = kfd_ec_mask(EC_QUEUE_WAVE_TRAP);
    assert_eq!(enable(&q.emu, me, write.as_raw_fd(), wave_trap).0, Ok(0));
    q.submit(0, Queue::dispatch_packet([64, 1, 1], [64, 1, 1]));
    assert!(
        q.wait_until(|q| q.u64_at(COMPLETION + SIGNAL_VALUE) == 0),
        "the wave did not go on past its trap"
    );
    assert!(q.wait_until(|_| has_event(&read)), "no debug event");
    assert_eq!(event_bytes(&read), b".");
    let gpu = q.emu.gpu();
    assert_eq!(
        query_full(&q.emu, me, wave_trap),
        (Ok(0), wave_trap, gpu, q.id),
        "the trap is the queue's"
    );
    // Cleared by the query: nothing more.
    assert_eq!(query(&q.emu, me, 0).0, Err(Errno::AGAIN));
    // QUERY_EXCEPTION_INFO: raised again by a second dispatch, found on the queue, no
    // data; a queue id the process has not is EINVAL.
    q.submit(1, Queue::dispatch_packet([64, 1, 1], [64, 1, 1]));
    assert!(q.wait_until(|_| has_event(&read)), "no second debug event");
    let mut buf = [0u8; 8];
    let mut info = |queue: u32| {
        let mut a = trap(me, KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO);
        a.set_query_exception_info(kfd_ioctl_dbg_trap_query_exception_info_args {
            info_ptr: buf.as_mut_ptr() as u64,
            info_size: 8,
            source_id: queue,
            exception_code: EC_QUEUE_WAVE_TRAP,
            clear_exception: 1,
        });
        let r = q.emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut a);
        (r, a.query_exception_info().info_size)
    };
    assert_eq!(info(q.id + 1), (Err(Errno::INVAL), 8));
    assert_eq!(info(q.id), (Ok(0), 0));
    assert_eq!(info(q.id).0, Err(Errno::NODATA), "cleared");
    q.destroy();
}

/// [`TRAPPING`] for gfx11, of kfdtest's gfx11 `TrapHandlerIsa` shape: the doorbell from
/// `s_sendmsg_rtn_b32 MSG_RTN_GET_DOORBELL` (masked to 9:0), the interrupt only when the
/// first-level handler set TTMP11[23] (the process's debug trap flag, which the debugger's
/// enable sets), then past the `s_trap` and `s_rfe_b64`.
const TRAPPING11: &str = "s_trap 1\n s_endpgm\n .p2align 8\n handler:\n\
    s_bitcmp1_b32 ttmp11, 23\n s_cbranch_scc0 out\n\
    s_sendmsg_rtn_b32 ttmp3, sendmsg(MSG_RTN_GET_DOORBELL)\n s_waitcnt lgkmcnt(0)\n\
    s_and_b32 ttmp3, ttmp3, 0x3ff\n s_mov_b32 ttmp2, m0\n s_or_b32 ttmp3, ttmp3, 0x800\n\
    s_mov_b32 m0, ttmp3\n s_sendmsg sendmsg(MSG_INTERRUPT)\n s_waitcnt lgkmcnt(0)\n\
    s_mov_b32 m0, ttmp2\n out:\n\
    s_add_u32 ttmp0, ttmp0, 4\n s_addc_u32 ttmp1, ttmp1, 0\n s_and_b32 ttmp1, ttmp1, 0xffff\n\
    s_setreg_b32 hwreg(HW_REG_STATUS), ttmp12\n s_rfe_b64 ttmp[0:1]";

/// kfdtest's HitTrapEvent on rx7900xtx (gfx1100): a gfx11 wave's `s_trap` enters the
/// first-level handler of `cwsr_trap_handler_gfx10.asm`, which sets TTMP11[23] from the
/// debug trap flag and jumps to the second-level handler; its `s_sendmsg_rtn` gets the
/// queue's doorbell id and its MSG_INTERRUPT (PRIV) raises `EC_QUEUE_WAVE_TRAP` on that
/// queue for the debugger (`event_interrupt_wq_v11` → `kfd_set_dbg_ev_from_interrupt`); the
/// wave returns past the `s_trap` and the dispatch completes. Once the debugger disabled the
/// trap (the flag cleared by `kfd_dbg_trap_deactivate`), the same handler skips its
/// interrupt: the dispatch completes and nothing is raised. (One wave: LLVM's gfx1100
/// kernels are wave32, and the grid is 32 work-items.)
#[test]
fn a_gfx11_waves_s_trap_reaches_the_debugger_through_sendmsg_rtn() {
    use model_support::aql::*;
    let Some((text, kd)) = assemble("gfx1100", TRAPPING11) else {
        return;
    };
    let mut q = Queue::create(Setup::aql("rx7900xtx"));
    q.load(&text, &kd);
    set_trap_handler(&q, va(2) + CODE as u64 + 256);
    let me = q.emu.caller.tgid;
    // kfdtest's order: the runtime enabled (no queue may exist), the debugger attached, then
    // the queue created (which raises EC_QUEUE_NEW on it).
    q.destroy();
    assert_eq!(
        q.emu.ioctl(AMDKFD_IOC_RUNTIME_ENABLE, &mut runtime(true)),
        Ok(0)
    );
    let (read, write) = rustix::pipe::pipe().expect("pipe");
    let wave_trap = kfd_ec_mask(EC_QUEUE_WAVE_TRAP);
    assert_eq!(enable(&q.emu, me, write.as_raw_fd(), wave_trap).0, Ok(0));
    q.id = q.create_again(0);
    q.submit(0, Queue::dispatch_packet([32, 1, 1], [32, 1, 1]));
    assert!(
        q.wait_until(|q| q.u64_at(COMPLETION + SIGNAL_VALUE) == 0),
        "the wave did not go on past its trap"
    );
    assert_eq!(
        q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE),
        0,
        "no queue error"
    );
    assert!(q.wait_until(|_| has_event(&read)), "no debug event");
    assert_eq!(event_bytes(&read), b".");
    let gpu = q.emu.gpu();
    let new = kfd_ec_mask(EC_QUEUE_NEW);
    assert_eq!(
        query_full(&q.emu, me, wave_trap | new),
        (Ok(0), wave_trap | new, gpu, q.id),
        "the trap is the queue's (KFDDBGTest.cpp:301's mask)"
    );
    // The debugger disables the trap: the flag is clear at the next trap.
    assert_eq!(
        q.emu
            .ioctl(AMDKFD_IOC_DBG_TRAP, &mut trap(me, KFD_IOC_DBG_TRAP_DISABLE)),
        Ok(0)
    );
    q.put_u64(COMPLETION + SIGNAL_VALUE, 1);
    q.submit(1, Queue::dispatch_packet([32, 1, 1], [32, 1, 1]));
    assert!(
        q.wait_until(|q| q.u64_at(COMPLETION + SIGNAL_VALUE) == 0),
        "the second dispatch did not complete"
    );
    assert!(!has_event(&read), "no event without the debugger");
    q.destroy();
}

/// Without a second-level trap handler the kernel's first-level one steps over an `s_trap`
/// (`L_NO_NEXT_TRAP`: PC + 4, `s_rfe_b64`): the dispatch completes, the queue has no error.
#[test]
fn without_a_second_level_handler_an_s_trap_is_stepped_over() {
    use model_support::aql::*;
    let Some((text, kd)) = assemble("gfx942", "s_trap 2\n s_endpgm") else {
        return;
    };
    let mut q = Queue::create(Setup::aql("mi300x"));
    q.load(&text, &kd);
    q.submit(0, Queue::dispatch_packet([64, 1, 1], [64, 1, 1]));
    assert!(q.wait_until(|q| q.u64_at(COMPLETION + SIGNAL_VALUE) == 0));
    assert_eq!(
        q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE),
        0,
        "no queue error"
    );
    q.destroy();
}

/// kfdtest's HitMemoryViolation in the model: a wave's VM fault, with a debugger that
/// enabled `EC_DEVICE_MEMORY_VIOLATION`, is raised on the GPU for it
/// (`kfd_set_dbg_ev_from_interrupt(dev, pasid, -1, ...)`) instead of evicting the queues
/// and setting the memory events: QUERY_DEBUG_EVENT names the GPU, QUERY_EXCEPTION_INFO
/// copies the fault's `kfd_hsa_memory_exception_data`, GET_DEVICE_SNAPSHOT shows the status
/// on the GPU's entry. The debugger's SEND_RUNTIME_EVENT of the violation then does what the
/// runtime would have seen (`kfd_dbg_send_exception_to_runtime`): the memory event is set
/// with the fault.
#[test]
fn a_vm_fault_goes_to_the_debugger_then_to_the_runtime_when_it_sends_it_on() {
    use model_support::aql::*;
    use model_support::{create, data, wait};
    let Some((text, kd)) = assemble("gfx942", "s_endpgm") else {
        return;
    };
    let mut q = Queue::create(Setup::aql("mi300x"));
    q.load(&text, &kd);
    // The entry 0x1000_0000 past the descriptor: va(3) + 0x3000, never mapped.
    let offset = 0x1000_0000i64;
    q.bo.bytes()[DESCRIPTOR + 16..DESCRIPTOR + 24].copy_from_slice(&offset.to_le_bytes());
    let memory = create(&q.emu, KFD_IOC_EVENT_MEMORY, false);
    let me = q.emu.caller.tgid;
    let gpu = q.emu.gpu();
    let (read, write) = rustix::pipe::pipe().expect("pipe");
    let violation = kfd_ec_mask(EC_DEVICE_MEMORY_VIOLATION);
    assert_eq!(enable(&q.emu, me, write.as_raw_fd(), violation).0, Ok(0));
    q.submit(0, Queue::dispatch_packet([64, 1, 1], [64, 1, 1]));
    assert!(q.wait_until(|_| has_event(&read)), "no debug event");
    assert_eq!(event_bytes(&read), b".");
    // The memory event is the runtime's: not set while the debugger holds the fault.
    let mut events = [data(memory.event_id)];
    assert_eq!(
        wait(&q.emu, &mut events, true, 0),
        (Ok(0), KFD_IOC_WAIT_RESULT_TIMEOUT)
    );
    assert_eq!(query_full(&q.emu, me, 0), (Ok(0), violation, gpu, 0));
    // The fault's data, kept for the debugger.
    let mut fault = kfd_hsa_memory_exception_data::default();
    let mut a = trap(me, KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO);
    a.set_query_exception_info(kfd_ioctl_dbg_trap_query_exception_info_args {
        info_ptr: (&raw mut fault) as u64,
        info_size: size_of::<kfd_hsa_memory_exception_data>() as u32,
        source_id: gpu,
        exception_code: EC_DEVICE_MEMORY_VIOLATION,
        clear_exception: 0,
    });
    assert_eq!(q.emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut a), Ok(0));
    assert_eq!(a.query_exception_info().info_size, 32);
    assert_eq!(fault.va, va(3) + DESCRIPTOR as u64);
    assert_eq!(fault.gpu_id, gpu);
    assert_eq!(fault.failure.NotPresent, 1);
    // GET_DEVICE_SNAPSHOT: the GPU's entry has the status (cleared by the snapshot's mask);
    // the count answered is the process's GPUs, the entry size the kernel's.
    let mut entries = vec![kfd_dbg_device_info_entry::default(); 2];
    let mut snapshot = |clear: u64| {
        let mut a = trap(me, KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT);
        a.set_device_snapshot(kfd_ioctl_dbg_trap_device_snapshot_args {
            exception_mask: clear,
            snapshot_buf_ptr: entries.as_mut_ptr() as u64,
            num_devices: 2,
            entry_size: size_of::<kfd_dbg_device_info_entry>() as u32,
        });
        let r = q.emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut a);
        (r, a.device_snapshot().num_devices, entries[0])
    };
    let (r, n, e) = snapshot(violation);
    assert_eq!((r, n), (Ok(0), 1), "mi300x: one GPU");
    assert_eq!(e.gpu_id, gpu);
    assert_eq!(e.exception_status, violation);
    assert_eq!(e.gfx_target_version, 90402);
    assert_eq!(snapshot(0).2.exception_status, 0, "cleared by the first");
    // The debugger hands the violation to the runtime: the memory event is set with it.
    let mut a = trap(me, KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT);
    a.set_send_runtime_event(kfd_ioctl_dbg_trap_send_runtime_event_args {
        exception_mask: violation,
        gpu_id: gpu,
        queue_id: 0,
    });
    assert_eq!(q.emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut a), Ok(0));
    let mut events = [data(memory.event_id)];
    let (r, result) = wait(&q.emu, &mut events, true, PATIENCE_MS);
    assert_eq!((r, result), (Ok(0), KFD_IOC_WAIT_RESULT_COMPLETE));
    assert_eq!(
        events[0].memory_exception_data().va,
        va(3) + DESCRIPTOR as u64
    );
    // A GPU the process has not: ENODEV.
    a.set_send_runtime_event(kfd_ioctl_dbg_trap_send_runtime_event_args {
        exception_mask: violation,
        gpu_id: gpu + 1,
        queue_id: 0,
    });
    assert_eq!(q.emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut a), Err(Errno::NODEV));
    q.destroy();
}

/// GET_QUEUE_SNAPSHOT and SUSPEND/RESUME_QUEUES (`pqm_get_queue_snapshot`,
/// `suspend_queues`, `resume_queues`), the order kfdtest's SuspendQueues takes: a queue
/// created under the debugger has `EC_QUEUE_NEW` raised, which the snapshot shows and a
/// suspend refuses (the id comes back marked invalid, count 0); a snapshot clearing it lets
/// the suspend through (count 1, valid), and a resume answers 1; an id no queue has stays
/// invalid. A suspended queue runs no packet until it is resumed.
#[test]
fn queue_snapshots_and_suspend_resume_follow_the_kernel() {
    use model_support::aql::*;
    let Some((text, kd)) = assemble("gfx942", "s_endpgm") else {
        return;
    };
    let mut q = Queue::create(Setup::aql("mi300x"));
    q.load(&text, &kd);
    q.destroy();
    let me = q.emu.caller.tgid;
    assert_eq!(
        q.emu.ioctl(AMDKFD_IOC_RUNTIME_ENABLE, &mut runtime(true)),
        Ok(0)
    );
    let (_read, write) = rustix::pipe::pipe().expect("pipe");
    assert_eq!(enable(&q.emu, me, write.as_raw_fd(), 0).0, Ok(0));
    let csa = va(2) + SCRATCH as u64;
    q.id = q.create_again(csa);
    let new = kfd_ec_mask(EC_QUEUE_NEW);
    let mut entries = [kfd_queue_snapshot_entry::default(); 2];
    let mut snapshot = |clear: u64| {
        let mut a = trap(me, KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT);
        a.set_queue_snapshot(kfd_ioctl_dbg_trap_queue_snapshot_args {
            exception_mask: clear,
            snapshot_buf_ptr: entries.as_mut_ptr() as u64,
            num_queues: 2,
            entry_size: size_of::<kfd_queue_snapshot_entry>() as u32,
        });
        let r = q.emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut a);
        (r, a.queue_snapshot().num_queues, entries[0])
    };
    let (r, n, e) = snapshot(0);
    assert_eq!((r, n), (Ok(0), 1));
    assert_eq!(e.exception_status, new);
    assert_eq!(e.ring_base_address, va(2) + RING as u64);
    assert_eq!(e.ctx_save_restore_address, csa);
    assert_eq!(e.ctx_save_restore_area_size, 0x1000);
    assert_eq!(e.queue_type, KFD_IOC_QUEUE_TYPE_COMPUTE_AQL);
    let id = e.queue_id;
    let suspend = |ids: &mut [u32]| {
        let mut a = trap(me, KFD_IOC_DBG_TRAP_SUSPEND_QUEUES);
        a.set_suspend_queues(kfd_ioctl_dbg_trap_suspend_queues_args {
            exception_mask: 0,
            queue_array_ptr: ids.as_mut_ptr() as u64,
            num_queues: ids.len() as u32,
            grace_period: 0,
        });
        q.emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut a)
    };
    let mut ids = [id, id + 7];
    assert_eq!(suspend(&mut ids), Ok(0), "a new queue is not suspended");
    assert_eq!(
        ids,
        [
            id | KFD_DBG_QUEUE_INVALID_MASK,
            (id + 7) | KFD_DBG_QUEUE_INVALID_MASK
        ]
    );
    assert_eq!(snapshot(new).2.exception_status, new);
    assert_eq!(snapshot(0).2.exception_status, 0, "cleared");
    let mut ids = [id, id + 7];
    assert_eq!(suspend(&mut ids), Ok(1));
    assert_eq!(ids, [id, (id + 7) | KFD_DBG_QUEUE_INVALID_MASK]);
    // Suspended: a packet waits.
    q.submit(0, Queue::dispatch_packet([64, 1, 1], [64, 1, 1]));
    q.run_engines_once();
    q.run_engines_once();
    assert_eq!(
        q.u64_at(COMPLETION + SIGNAL_VALUE),
        1,
        "ran while suspended"
    );
    let mut ids = [id];
    let mut a = trap(me, KFD_IOC_DBG_TRAP_RESUME_QUEUES);
    a.set_resume_queues(kfd_ioctl_dbg_trap_resume_queues_args {
        queue_array_ptr: ids.as_mut_ptr() as u64,
        num_queues: 1,
        pad: 0,
    });
    assert_eq!(q.emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut a), Ok(1));
    assert_eq!(ids, [id]);
    assert!(q.wait_until(|q| q.u64_at(COMPLETION + SIGNAL_VALUE) == 0));
    q.destroy();
}

/// kfdtest's PtraceAccessInvisibleVram in the model: a tracer's `PTRACE_POKEDATA` into the
/// tracee's read-only mapping of a host-invisible VRAM BO writes the BO
/// (`ttm_bo_vm_access` through the VMA's `vm_ops->access`, whatever its protection):
/// [`Backend::poke`] writes the BO's memfd at the mapping's offset. A writable mapping, a
/// word crossing the mapping's end and memory that is no BO's are left to the kernel.
#[test]
fn a_tracers_poke_into_a_read_only_bo_mapping_writes_the_bo() {
    use kfd_emu::backend::MmapAction;
    use std::os::fd::AsFd;
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let flags = KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let (_, offset) = emu.alloc(gpu, va(5), 8192, flags).expect("alloc");
    let MmapAction::Redirect { fd, offset: at } =
        emu.mmap_action(emu.renders[0].as_fd(), offset, 8192)
    else {
        panic!("a BO mapping is redirected to its memfd");
    };
    // SAFETY: a fresh read-only shared mapping of the BO's memfd, unmapped below.
    let ro = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            8192,
            rustix::mm::ProtFlags::READ,
            rustix::mm::MapFlags::SHARED,
            fd.as_fd(),
            at,
        )
    }
    .expect("mmap read-only") as u64;
    let mut rw = model_support::CpuMap::new(fd.as_fd(), at, 8192);
    let me = std::process::id() as i32;
    let word = 0xcafe_babe_dead_beefu64;
    assert_eq!(emu.model.poke(me, ro + 4096 - 8, word), Some(Ok(())));
    assert_eq!(
        rw.bytes()[4088..4096],
        word.to_ne_bytes(),
        "the BO was written"
    );
    assert_eq!(
        emu.model.poke(me, rw.ptr as u64 + 8, 1),
        None,
        "writable: the kernel's write"
    );
    assert_eq!(
        emu.model.poke(me, ro + 8192 - 4, 1),
        None,
        "crosses the end"
    );
    let local = 0u64;
    assert_eq!(emu.model.poke(me, (&raw const local) as u64, 1), None);
    // SAFETY: unmaps the mapping made above.
    unsafe { rustix::mm::munmap(ro as *mut _, 8192) }.expect("munmap");
}

/// Without a debugger, a trap handler's exception goes to the runtime
/// (`kfd_set_dbg_ev_from_interrupt` → `kfd_send_exception_to_runtime`): the queue's context
/// save area header names the runtime's error payload, into which the exception mask is
/// OR-ed, and its error event, which is set (ROCr's exception signal and event).
#[test]
fn without_a_debugger_a_trap_handlers_exception_goes_to_the_runtime() {
    use model_support::aql::*;
    use model_support::{create, data, wait};
    let Some((text, kd)) = assemble("gfx942", TRAPPING) else {
        return;
    };
    let mut q = Queue::create(Setup::aql("mi300x"));
    q.load(&text, &kd);
    q.destroy();
    assert_eq!(
        q.emu.ioctl(AMDKFD_IOC_RUNTIME_ENABLE, &mut runtime(true)),
        Ok(0)
    );
    let error = create(&q.emu, KFD_IOC_EVENT_SIGNAL, false);
    let payload = DATA + 0x100;
    q.put_u64(payload, 0x100);
    q.put_u64(SCRATCH + 24, va(2) + payload as u64);
    q.put_u32(SCRATCH + 32, error.event_id);
    q.id = q.create_again(va(2) + SCRATCH as u64);
    set_trap_handler(&q, va(2) + CODE as u64 + 256);
    q.submit(0, Queue::dispatch_packet([64, 1, 1], [64, 1, 1]));
    let mut events = [data(error.event_id)];
    let (r, result) = wait(&q.emu, &mut events, true, PATIENCE_MS);
    assert_eq!((r, result), (Ok(0), KFD_IOC_WAIT_RESULT_COMPLETE));
    assert_eq!(
        q.u64_at(payload),
        0x100 | kfd_ec_mask(EC_QUEUE_WAVE_TRAP),
        "OR-ed into the payload"
    );
    q.destroy();
}

/// SET/CLEAR_NODE_ADDRESS_WATCH and SET_FLAGS as `kfd_debug.c` answers them: a GPU's four
/// watch points handed out lowest first (`ENOMEM` with id -1 when none is free), a clear
/// only of a held one (`EINVAL`), a GPU the process has not `ENODEV`; DISABLE releases them.
/// SINGLE_MEM_OP needs per-VMID debug registers (GC 9.4.2/9.4.3: mi300x yes, mi100 no:
/// `EACCES`), the previous flags answered.
#[test]
fn address_watches_and_flags_follow_kfd_debug() {
    for (machine, per_vmid) in [("mi300x", true), ("mi100", false)] {
        let emu = Emu::machine(machine);
        let me = emu.caller.tgid;
        let gpu = emu.gpu();
        assert_eq!(
            emu.ioctl(AMDKFD_IOC_RUNTIME_ENABLE, &mut runtime(true)),
            Ok(0)
        );
        let (_read, write) = rustix::pipe::pipe().expect("pipe");
        assert_eq!(enable(&emu, me, write.as_raw_fd(), 0).0, Ok(0));
        let set = |gpu_id: u32| {
            let mut a = trap(me, KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH);
            a.set_set_node_address_watch(kfd_ioctl_dbg_trap_set_node_address_watch_args {
                address: 0x1000,
                mode: KFD_DBG_TRAP_ADDRESS_WATCH_MODE_READ,
                mask: u32::MAX,
                gpu_id,
                id: 7,
            });
            let r = emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut a);
            (r, a.set_node_address_watch().id)
        };
        let clear = |id: u32| {
            let mut a = trap(me, KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH);
            a.set_clear_node_address_watch(kfd_ioctl_dbg_trap_clear_node_address_watch_args {
                gpu_id: gpu,
                id,
            });
            emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut a)
        };
        for id in 0..4 {
            assert_eq!(set(gpu), (Ok(0), id), "{machine}");
        }
        assert_eq!(
            set(gpu),
            (Err(Errno::NOMEM), u32::MAX),
            "{machine}: all four held"
        );
        assert_eq!(set(gpu + 1).0, Err(Errno::NODEV), "{machine}");
        assert_eq!(clear(1), Ok(0));
        assert_eq!(clear(1), Err(Errno::INVAL), "{machine}: not held any more");
        assert_eq!(
            clear(4),
            Err(Errno::INVAL),
            "{machine}: no such watch point"
        );
        assert_eq!(set(gpu), (Ok(0), 1), "{machine}: the freed one");
        let flags = |f: u32| {
            let mut a = trap(me, KFD_IOC_DBG_TRAP_SET_FLAGS);
            a.set_set_flags(kfd_ioctl_dbg_trap_set_flags_args { flags: f, pad: 0 });
            let r = emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut a);
            (r, a.set_flags().flags)
        };
        if per_vmid {
            assert_eq!(flags(KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP), (Ok(0), 0));
            assert_eq!(flags(0), (Ok(0), KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP));
        } else {
            assert_eq!(
                flags(KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP),
                (Err(Errno::ACCESS), 0),
                "{machine}"
            );
        }
        // DISABLE releases the watch points: the next session starts from 0.
        assert_eq!(
            emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut trap(me, KFD_IOC_DBG_TRAP_DISABLE)),
            Ok(0)
        );
        assert_eq!(enable(&emu, me, write.as_raw_fd(), 0).0, Ok(0));
        assert_eq!(set(gpu), (Ok(0), 0), "{machine}: released at DISABLE");
    }
}
