//! The out-of-tree driver's ioctls (`kfd-emu run --kernel dkms`, `Kernel::Dkms`): IPC export
//! and import of a BO between two processes, and PC-sampling sessions, as amdgpu-dkms's
//! `kfd_ipc.c` and `kfd_pc_sampling.c` answer them; and the mainline kernel's `ENOTTY` for
//! the same calls without the flavour. Every check here holds on a real machine running
//! amdgpu-dkms (the DKMS half) or a mainline kernel of KFD 1.17 or later (the mainline half).

mod model_support;

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

use kfd_emu::backend::{Backend, MmapAction};
use kfd_emu::machine::Machine;
use kfd_emu::model::{Kernel, Model, ModelConfig};
use kfd_ioctl::abi::*;
use model_support::{CpuMap, Emu, TestCaller, VRAM_RW, injected, va};
use rustix::io::Errno;
use zerocopy::{Immutable, IntoBytes};

/// `AMDKFD_IOWR(0x80, struct kfd_ioctl_ipc_import_handle_args)` (48 bytes).
const IPC_IMPORT_HANDLE: u32 = amdkfd_iowr::<[u64; 6]>(0x80);
/// `AMDKFD_IOWR(0x81, struct kfd_ioctl_ipc_export_handle_args)` (32 bytes).
const IPC_EXPORT_HANDLE: u32 = amdkfd_iowr::<[u64; 4]>(0x81);
/// `AMDKFD_IOWR(0x85, struct kfd_ioctl_pc_sample_args)` (32 bytes).
const PC_SAMPLE: u32 = amdkfd_iowr::<[u64; 4]>(0x85);

/// `struct kfd_ioctl_ipc_export_handle_args`, as libhsakmt 6.2.4's header has it.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, IntoBytes, Immutable)]
struct ExportArgs {
    handle: u64,
    share_handle: [u32; 4],
    gpu_id: u32,
    flags: u32,
}

/// `struct kfd_ioctl_ipc_import_handle_args`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, IntoBytes, Immutable)]
struct ImportArgs {
    handle: u64,
    va_addr: u64,
    mmap_offset: u64,
    share_handle: [u32; 4],
    gpu_id: u32,
    flags: u32,
}

/// `struct kfd_pc_sample_info`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, IntoBytes, Immutable)]
struct SampleInfo {
    interval: u64,
    interval_min: u64,
    interval_max: u64,
    flags: u64,
    method: u32,
    type_: u32,
}

/// `struct kfd_ioctl_pc_sample_args`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, IntoBytes, Immutable)]
struct PcSampleArgs {
    sample_info_ptr: u64,
    num_sample_info: u32,
    op: u32,
    gpu_id: u32,
    trace_id: u32,
    flags: u32,
    version: u32,
}

const OP_QUERY: u32 = 0;
const OP_CREATE: u32 = 1;
const OP_DESTROY: u32 = 2;
const OP_START: u32 = 3;
const OP_STOP: u32 = 4;
const HOSTTRAP: u32 = 1;
const STOCHASTIC: u32 = 2;
const TYPE_TIME_US: u32 = 0;
const TYPE_CLOCK_CYCLES: u32 = 1;

/// kfd_pc_sampling.c's `sample_info_hosttrap_9_0_0`.
const HOSTTRAP_FORMAT: SampleInfo = SampleInfo {
    interval: 0,
    interval_min: 1,
    interval_max: u64::MAX,
    flags: 0,
    method: HOSTTRAP,
    type_: TYPE_TIME_US,
};

/// kfd_pc_sampling.c's `sample_info_stoch_cycle_9_4_3`.
const STOCHASTIC_FORMAT: SampleInfo = SampleInfo {
    interval: 0,
    interval_min: 256,
    interval_max: 1 << 31,
    flags: 1,
    method: STOCHASTIC,
    type_: TYPE_CLOCK_CYCLES,
};

fn emu(machine: &str, kernel: Kernel) -> Emu {
    Emu::new(ModelConfig {
        machine: Machine::preset(machine).expect("preset"),
        kernel,
        ..ModelConfig::default()
    })
}

/// A child process that shares this process's fd table (`CLONE_FILES`) and only waits to be
/// killed: a real second pid whose fds the model can take (`pidfd_getfd`, as it takes a
/// caller's), so the test can play a second KFD process that does ACQUIRE_VM.
struct Twin {
    pid: i32,
}

impl Twin {
    fn spawn() -> Twin {
        // SAFETY: a clone without CLONE_VM is a fork (the child runs on a copy of this address
        // space, on the same stack pointer); the child shares the fd table and does nothing
        // but pause() until it is killed: no allocation, no lock, only that syscall.
        let pid = unsafe {
            libc::syscall(
                libc::SYS_clone,
                (libc::CLONE_FILES | libc::SIGCHLD) as libc::c_ulong,
                0usize,
                0usize,
                0usize,
                0usize,
            )
        };
        if pid == 0 {
            loop {
                // SAFETY: pause() takes nothing and only returns on a signal.
                unsafe { libc::pause() };
            }
        }
        assert!(pid > 0, "clone: {}", std::io::Error::last_os_error());
        Twin { pid: pid as i32 }
    }
}

impl Drop for Twin {
    fn drop(&mut self) {
        // SAFETY: kill and waitpid of our own child by its pid, with plain integers.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

/// A second KFD process on the same model (the twin's pid; its argument structs are read
/// from this process's memory, which the twin's copy matches), with its own `/dev/kfd` and
/// render node.
struct Peer {
    caller: TestCaller,
    kfd: OwnedFd,
    render: Option<OwnedFd>,
    _twin: Twin,
}

impl Peer {
    fn open(emu: &Emu) -> Peer {
        let twin = Twin::spawn();
        let caller = TestCaller {
            tid: twin.pid,
            tgid: twin.pid,
        };
        let kfd = injected(
            emu.model
                .open(&caller, "/dev/kfd", libc::O_RDWR | libc::O_CLOEXEC, 0),
        );
        Peer {
            caller,
            kfd,
            render: None,
            _twin: twin,
        }
    }

    fn ioctl<T: IntoBytes + Immutable>(
        &self,
        model: &Model,
        cmd: u32,
        arg: &mut T,
    ) -> Result<i64, Errno> {
        model
            .ioctl(&self.caller, self.kfd.as_fd(), cmd, arg as *mut T as u64)
            .expect("the kfd stand-in is the model's")
    }

    /// ACQUIRE_VM of GPU 0 with a render node of its own.
    fn acquire(&mut self, emu: &Emu) {
        let minor = emu.model.machine().gpus()[0].render_minor;
        let render = injected(emu.model.open(
            &self.caller,
            &format!("/dev/dri/renderD{minor}"),
            libc::O_RDWR | libc::O_CLOEXEC,
            0,
        ));
        let mut a = kfd_ioctl_acquire_vm_args {
            drm_fd: render.as_raw_fd() as u32,
            gpu_id: emu.gpu(),
        };
        self.ioctl(&emu.model, AMDKFD_IOC_ACQUIRE_VM, &mut a)
            .expect("acquire_vm");
        self.render = Some(render);
    }

    /// Maps `len` bytes of its render node at `offset`, as the supervisor would.
    fn cpu_map(&self, emu: &Emu, offset: u64, len: usize) -> CpuMap {
        let render = self.render.as_ref().expect("acquired");
        match emu.mmap_action_as(&self.caller, render.as_fd(), offset, len as u64) {
            MmapAction::Redirect { fd, offset } => CpuMap::new(fd.as_fd(), offset, len),
            other => panic!("the import's offset does not map its memory: {other:?}"),
        }
    }
}

fn export(emu: &Emu, handle: u64, flags: u32) -> Result<[u32; 4], Errno> {
    let mut a = ExportArgs {
        handle,
        gpu_id: emu.gpu(),
        flags,
        ..Default::default()
    };
    emu.ioctl_raw(IPC_EXPORT_HANDLE, &mut a as *mut ExportArgs as u64)?;
    Ok(a.share_handle)
}

fn import(emu: &Emu, peer: &Peer, share_handle: [u32; 4], at: u64) -> Result<ImportArgs, Errno> {
    let mut a = ImportArgs {
        va_addr: at,
        share_handle,
        gpu_id: emu.gpu(),
        ..Default::default()
    };
    peer.ioctl(&emu.model, IPC_IMPORT_HANDLE, &mut a)?;
    Ok(a)
}

const SIZE: usize = 64 * 1024;
/// `HsaMemFlags` with NonPaged and CoarseGrain, what KFDIPCTest.BasicTest shares with.
const HSA_FLAGS: u32 = 0b11;

/// A VRAM BO of process A with a pattern written through its CPU mapping, and its mapping.
fn shared_bo(emu: &mut Emu) -> (u64, CpuMap) {
    emu.acquire_all();
    let (handle, offset) = emu
        .alloc(emu.gpu(), va(1), SIZE as u64, VRAM_RW)
        .expect("alloc");
    let mut map = emu
        .cpu_map(emu.renders[0].as_fd(), offset, SIZE)
        .expect("map the BO");
    map.bytes().fill(0xAA);
    (handle, map)
}

#[test]
fn an_imported_handle_is_a_bo_on_the_exporters_memory_in_the_other_process() {
    let mut emu = emu("mi300x", Kernel::Dkms);
    let (handle, mut mine) = shared_bo(&mut emu);
    let share = export(&emu, handle, HSA_FLAGS).expect("export");
    assert_ne!(share, [0; 4], "the share handle is 128 random bits");
    // One IPC object per BO: exporting again gives the same handle (and the first flags).
    assert_eq!(export(&emu, handle, 0), Ok(share));

    let mut peer = Peer::open(&emu);
    peer.acquire(&emu);
    let got = import(&emu, &peer, share, va(7)).expect("import");
    assert_eq!(got.flags, HSA_FLAGS, "the exporter's flags come back");
    assert_eq!(
        got.handle >> 32,
        u64::from(emu.gpu()),
        "a handle on the import's GPU"
    );
    assert_ne!(got.mmap_offset, 0);
    let mut theirs = peer.cpu_map(&emu, got.mmap_offset, SIZE);
    assert!(
        theirs.bytes().iter().all(|&b| b == 0xAA),
        "the exporter's bytes"
    );
    theirs.bytes()[..4].copy_from_slice(&0xBBBB_BBBBu32.to_ne_bytes());
    assert_eq!(
        &mine.bytes()[..4],
        &0xBBBB_BBBBu32.to_ne_bytes(),
        "the same memory"
    );

    // The importer maps it on its GPU like any BO of its own.
    let gpus = [emu.gpu()];
    let mut map = kfd_ioctl_map_memory_to_gpu_args {
        handle: got.handle,
        device_ids_array_ptr: gpus.as_ptr() as u64,
        n_devices: 1,
        n_success: 0,
    };
    peer.ioctl(&emu.model, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &mut map)
        .expect("map the import");
    assert_eq!(map.n_success, 1);
    // Its re-export names the same IPC object.
    let mut again = ExportArgs {
        handle: got.handle,
        gpu_id: emu.gpu(),
        ..Default::default()
    };
    peer.ioctl(&emu.model, IPC_EXPORT_HANDLE, &mut again)
        .expect("re-export");
    assert_eq!(again.share_handle, share);
}

#[test]
fn ipc_errors_are_the_dkms_drivers() {
    let mut emu = emu("mi300x", Kernel::Dkms);
    let (handle, _map) = shared_bo(&mut emu);
    // kfd_device_by_id.
    let mut a = ExportArgs {
        handle,
        gpu_id: 0x1234,
        ..Default::default()
    };
    assert_eq!(
        emu.ioctl_raw(IPC_EXPORT_HANDLE, &mut a as *mut ExportArgs as u64),
        Err(Errno::INVAL)
    );
    // kfd_process_device_find_bo: no such BO.
    assert_eq!(export(&emu, handle + 1, 0), Err(Errno::INVAL));
    let share = export(&emu, handle, 0).expect("export");

    let mut peer = Peer::open(&emu);
    // A handle nobody exported (all 128 bits are compared).
    let mut wrong = share;
    wrong[3] ^= 1;
    assert_eq!(import(&emu, &peer, wrong, va(7)).err(), Some(Errno::INVAL));
    // kfd_bind_process_to_device: no VM on the GPU yet.
    assert_eq!(import(&emu, &peer, share, va(7)).err(), Some(Errno::NODEV));
    peer.acquire(&emu);
    let got = import(&emu, &peer, share, va(7)).expect("import");

    // The object lives while a BO on it does: the exporter's going keeps it for the
    // importer, and the imports' going releases it.
    emu.free(handle).expect("free the exported BO");
    let later = import(&emu, &peer, share, va(9)).expect("still held by the first import");
    for held in [got.handle, later.handle] {
        let mut free = kfd_ioctl_free_memory_of_gpu_args { handle: held };
        peer.ioctl(&emu.model, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &mut free)
            .expect("free an import");
    }
    assert_eq!(import(&emu, &peer, share, va(13)).err(), Some(Errno::INVAL));
}

#[test]
fn without_the_flavour_the_dkms_numbers_are_unknown_ioctls() {
    let mut emu = emu("mi300x", Kernel::Mainline);
    let (handle, _map) = shared_bo(&mut emu);
    assert_eq!(export(&emu, handle, 0), Err(Errno::NOTTY));
    let mut a = ImportArgs::default();
    assert_eq!(
        emu.ioctl_raw(IPC_IMPORT_HANDLE, &mut a as *mut ImportArgs as u64),
        Err(Errno::NOTTY)
    );
    let mut p = PcSampleArgs {
        op: OP_QUERY,
        gpu_id: emu.gpu(),
        ..Default::default()
    };
    assert_eq!(pc_sample(&emu, &mut p), Err(Errno::NOTTY));
    // Before KFD 1.17 an unknown number was EINVAL.
    let old = Emu::new(ModelConfig {
        kfd_minor: 16,
        ..ModelConfig::default()
    });
    assert_eq!(pc_sample(&old, &mut p), Err(Errno::INVAL));
}

fn pc_sample(emu: &Emu, a: &mut PcSampleArgs) -> Result<i64, Errno> {
    emu.ioctl_raw(PC_SAMPLE, a as *mut PcSampleArgs as u64)
}

fn query(emu: &Emu, infos: &mut [SampleInfo], flags: u32) -> (Result<i64, Errno>, PcSampleArgs) {
    let mut a = PcSampleArgs {
        sample_info_ptr: if infos.is_empty() {
            0
        } else {
            infos.as_mut_ptr() as u64
        },
        num_sample_info: infos.len() as u32,
        op: OP_QUERY,
        gpu_id: emu.gpu(),
        flags,
        ..Default::default()
    };
    (pc_sample(emu, &mut a), a)
}

fn create(emu: &Emu, info: &mut SampleInfo) -> Result<u32, Errno> {
    let mut a = PcSampleArgs {
        sample_info_ptr: info as *mut SampleInfo as u64,
        num_sample_info: 1,
        op: OP_CREATE,
        gpu_id: emu.gpu(),
        ..Default::default()
    };
    pc_sample(emu, &mut a)?;
    Ok(a.trace_id)
}

fn session(emu: &Emu, op: u32, trace_id: u32) -> Result<i64, Errno> {
    let mut a = PcSampleArgs {
        op,
        gpu_id: emu.gpu(),
        trace_id,
        ..Default::default()
    };
    pc_sample(emu, &mut a)
}

#[test]
fn mi300x_offers_host_trap_and_stochastic_sampling() {
    let mut emu = emu("mi300x", Kernel::Dkms);
    emu.acquire_all();
    // The size query: two methods (and the PC-sampling revision 1.1 in the last word).
    let (r, a) = query(&emu, &mut [], 0);
    assert_eq!((r, a.num_sample_info, a.version), (Ok(0), 2, 1 << 16 | 1));
    let mut one = [SampleInfo::default(); 1];
    assert_eq!(query(&emu, &mut one, 0).0, Err(Errno::NOSPC));
    let mut two = [SampleInfo::default(); 2];
    assert_eq!(query(&emu, &mut two, 0).0, Ok(0));
    assert_eq!(two, [HOSTTRAP_FORMAT, STOCHASTIC_FORMAT]);
}

#[test]
fn sessions_follow_kfd_pc_sampling_c() {
    let mut emu = emu("mi300x", Kernel::Dkms);
    emu.acquire_all();
    // kfdtest's BasicTest: ids that were never created.
    for op in [OP_START, OP_STOP, OP_DESTROY] {
        assert_eq!(session(&emu, op, 12345), Err(Errno::INVAL), "op {op}");
    }
    let mut info = SampleInfo {
        interval: 0x10_0000,
        ..HOSTTRAP_FORMAT
    };
    let first = create(&emu, &mut info).expect("create");
    assert_eq!(first, 1, "idr_alloc_cyclic from 1");
    assert_eq!(session(&emu, OP_STOP, first), Err(Errno::ALREADY));
    assert_eq!(session(&emu, OP_START, first), Ok(0));
    assert_eq!(session(&emu, OP_START, first), Err(Errno::ALREADY));
    assert_eq!(session(&emu, OP_DESTROY, first), Err(Errno::BUSY));
    // A second session with the same format, in use at once.
    let second = create(&emu, &mut info).expect("a second session");
    assert_eq!(second, 2);
    assert_eq!(session(&emu, OP_START, second), Ok(0));
    // While a session exists, a plain query lists the format in use only.
    let mut two = [SampleInfo::default(); 2];
    let (r, a) = query(&emu, &mut two, 0);
    assert_eq!((r, a.num_sample_info), (Ok(0), 1));
    assert_eq!(two[0], info);
    for id in [first, second] {
        assert_eq!(session(&emu, OP_STOP, id), Ok(0));
        assert_eq!(session(&emu, OP_DESTROY, id), Ok(0));
        assert_eq!(session(&emu, OP_DESTROY, id), Err(Errno::INVAL), "gone");
    }
    // Ids are cyclic: the next is 3, not the freed 1.
    assert_eq!(create(&emu, &mut info), Ok(3));
    // Formats the GPU does not offer; intervals not a power of two where needed.
    let mut bad = SampleInfo {
        interval: 100,
        ..STOCHASTIC_FORMAT
    };
    assert_eq!(create(&emu, &mut bad), Err(Errno::OPNOTSUPP));
    bad.interval = 300;
    assert_eq!(create(&emu, &mut bad), Err(Errno::INVAL));
    let mut a = PcSampleArgs {
        sample_info_ptr: &mut info as *mut SampleInfo as u64,
        num_sample_info: 2,
        op: OP_CREATE,
        gpu_id: emu.gpu(),
        ..Default::default()
    };
    assert_eq!(
        pc_sample(&emu, &mut a),
        Err(Errno::INVAL),
        "num_sample_info != 1"
    );
    a.op = 7;
    assert_eq!(pc_sample(&emu, &mut a), Err(Errno::INVAL), "an unknown op");
}

#[test]
fn one_format_per_method_across_processes_and_sessions_are_their_owners() {
    let mut emu = emu("mi300x", Kernel::Dkms);
    emu.acquire_all();
    let mut info = SampleInfo {
        interval: 1000,
        ..HOSTTRAP_FORMAT
    };
    let mine = create(&emu, &mut info).expect("create");
    let mut peer = Peer::open(&emu);
    peer.acquire(&emu);
    let call = |a: &mut PcSampleArgs| peer.ioctl(&emu.model, PC_SAMPLE, a);
    // Another process with another interval: EEXIST, and the one in use copied back.
    let mut other = SampleInfo {
        interval: 2000,
        ..HOSTTRAP_FORMAT
    };
    let mut a = PcSampleArgs {
        sample_info_ptr: &mut other as *mut SampleInfo as u64,
        num_sample_info: 1,
        op: OP_CREATE,
        gpu_id: emu.gpu(),
        ..Default::default()
    };
    assert_eq!(call(&mut a), Err(Errno::EXIST));
    assert_eq!(other, info);
    // The same format is shared.
    assert_eq!(call(&mut a), Ok(0));
    let theirs = a.trace_id;
    assert_ne!(theirs, mine);
    // Neither may drive the other's session.
    let mut start = PcSampleArgs {
        op: OP_START,
        gpu_id: emu.gpu(),
        trace_id: mine,
        ..Default::default()
    };
    assert_eq!(call(&mut start), Err(Errno::INVAL));
    assert_eq!(session(&emu, OP_START, theirs), Err(Errno::INVAL));
    start.trace_id = theirs;
    assert_eq!(call(&mut start), Ok(0));
    // The peer exits with its session started: it is stopped and destroyed with it, and
    // once this process destroys its own the method is free for another format.
    emu.model.process_exited(peer.caller.tgid);
    assert_eq!(session(&emu, OP_DESTROY, mine), Ok(0));
    let mut new = SampleInfo {
        interval: 5000,
        ..HOSTTRAP_FORMAT
    };
    assert!(create(&emu, &mut new).is_ok());
}

#[test]
fn gpus_without_a_method_answer_eopnotsupp_and_start_needs_a_vm() {
    // GC 9.4.1 (MI100), 9.4.0 (Radeon VII), 11.0.0 (RX 7900 XTX): no method in the table.
    for machine in ["mi100", "radeon-vii", "rx7900xtx"] {
        let mut emu = emu(machine, Kernel::Dkms);
        emu.acquire_all();
        let (r, a) = query(&emu, &mut [], 0);
        assert_eq!(r, Err(Errno::OPNOTSUPP), "{machine}");
        assert_eq!(
            a.version,
            1 << 16 | 1,
            "{machine}: the revision is written first"
        );
        let mut info = HOSTTRAP_FORMAT;
        info.interval = 1000;
        assert_eq!(create(&emu, &mut info), Err(Errno::OPNOTSUPP), "{machine}");
    }
    // GC 9.4.2 (MI210): host trap only.
    let emu = emu("mi210x8", Kernel::Dkms);
    let (r, a) = query(&emu, &mut [], 0);
    assert_eq!((r, a.num_sample_info), (Ok(0), 1));
    // Without ACQUIRE_VM the session is made, but START fails to bind the process (ESRCH).
    let mut info = SampleInfo {
        interval: 1000,
        ..HOSTTRAP_FORMAT
    };
    let id = create(&emu, &mut info).expect("create");
    assert_eq!(session(&emu, OP_START, id), Err(Errno::SRCH));
    // A gpu_id the process has no device for.
    let mut bad = PcSampleArgs {
        op: OP_QUERY,
        gpu_id: 0x4321,
        ..Default::default()
    };
    assert_eq!(pc_sample(&emu, &mut bad), Err(Errno::INVAL));
}

#[test]
fn the_dkms_module_reports_its_version_and_mainline_has_none() {
    let read = |kernel| {
        let model: Arc<Model> = Model::new(ModelConfig {
            kernel,
            ..ModelConfig::default()
        })
        .expect("model");
        kfd_emu::supervisor::run_attached(model, || {
            std::fs::read_to_string("/sys/module/amdgpu/version").map_err(|e| e.kind())
        })
        .expect("attach")
    };
    assert_eq!(read(Kernel::Dkms), Ok("6.8.5\n".to_owned()));
    assert_eq!(read(Kernel::Mainline), Err(std::io::ErrorKind::NotFound));
}

#[test]
fn a_process_under_the_debug_trap_cannot_query_or_create_pc_sampling() {
    let mut emu = emu("mi300x", Kernel::Dkms);
    emu.acquire_all();
    // The process enables the debug trap on itself (no tracer needed for its own pid).
    let (_read, write) = rustix::pipe::pipe().expect("pipe");
    let mut rinfo = [0u8; 16];
    let mut a = kfd_ioctl_dbg_trap_args {
        pid: std::process::id(),
        op: KFD_IOC_DBG_TRAP_ENABLE,
        ..Default::default()
    };
    a.set_enable(kfd_ioctl_dbg_trap_enable_args {
        exception_mask: 0,
        rinfo_ptr: rinfo.as_mut_ptr() as u64,
        rinfo_size: 16,
        dbg_fd: write.as_raw_fd() as u32,
    });
    emu.ioctl(AMDKFD_IOC_DBG_TRAP, &mut a)
        .expect("enable the debug trap");
    // kfd_pc_sample: "Cannot have PC Sampling and debug trap simultaneously".
    assert_eq!(query(&emu, &mut [], 0).0, Err(Errno::BUSY));
    let mut info = SampleInfo {
        interval: 1000,
        ..HOSTTRAP_FORMAT
    };
    assert_eq!(create(&emu, &mut info), Err(Errno::BUSY));
    // Ids are checked before the debug trap for the other ops.
    assert_eq!(session(&emu, OP_START, 1), Err(Errno::INVAL));
}
