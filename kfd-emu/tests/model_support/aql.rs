//! An AQL (or PM4) compute queue of the model over one BO the test reads and writes, laid out
//! as ROCr lays out its queues: what `model_kernels` and `model_aql_errors` share, compiled
//! for every user of `model_support`; not every one uses it.
//!
//! The queue BO, at `va(2)`: `amd_queue_t` at 0 (`amd_hsa_queue.h`: `write_dispatch_id` at
//! 56, `read_dispatch_id` at 128 followed by `read_dispatch_id_field_base_byte_offset`, the
//! scratch fields from 140, `queue_inactive_signal` at 192), the ring, the inactive signal, a
//! completion signal, a kernel descriptor and its code, a data buffer and scratch
//! (`amd_signal_t`s of `amd_hsa_signal.h`: `value` at 8, `event_mailbox_ptr` at 16,
//! `event_id` at 24, start and end timestamps at 32 and 40).

use std::os::fd::AsFd;

use kfd_emu::machine::Machine;
use kfd_emu::model::ModelConfig;
use kfd_ioctl::abi::*;

use super::{CpuMap, Emu, create, data, va, wait};

pub const GTT_RW: u32 = KFD_IOC_ALLOC_MEM_FLAGS_GTT
    | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
    | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE;
/// Generous: the engines run before WAIT_EVENTS waits, so this is only a bound.
pub const PATIENCE_MS: u32 = 20_000;

pub const WPTR: usize = 56;
pub const RPTR: usize = 128;
pub const RPTR_BASE_OFFSET: usize = 136;
pub const TMPRING: usize = 140;
pub const SCRATCH_SRD: usize = 144;
pub const SCRATCH_BASE: usize = 160;
pub const PROPERTIES: usize = 180;
pub const INACTIVE: usize = 192;
pub const RING: usize = 0x1000;
pub const RING_SIZE: usize = 0x1000;
pub const INACTIVE_SIGNAL: usize = 0x2000;
pub const COMPLETION: usize = 0x2100;
pub const DESCRIPTOR: usize = 0x3000;
pub const CODE: usize = 0x4000;
pub const DATA: usize = 0x8000;
pub const SCRATCH: usize = 0x10000;
pub const BO_SIZE: usize = 0x20000;
pub const SIGNAL_VALUE: usize = 8;
pub const SIGNAL_MAILBOX: usize = 16;
pub const SIGNAL_EVENT_ID: usize = 24;
pub const SIGNAL_START_TS: usize = 32;
pub const SIGNAL_END_TS: usize = 40;

/// `HSA_PACKET_TYPE_*`.
pub const VENDOR_SPECIFIC: u8 = 0;
pub const KERNEL_DISPATCH: u8 = 2;
pub const BARRIER_AND: u8 = 3;
pub const AGENT_DISPATCH: u8 = 4;

/// What [`Queue::create`] sets up besides the layout.
#[derive(Clone, Copy)]
pub struct Setup<'a> {
    pub machine: &'a str,
    /// KFD_IOC_QUEUE_TYPE_COMPUTE_AQL or _COMPUTE (PM4).
    pub queue_type: u32,
    /// Whether `amd_queue_t` names the inactive signal (ROCr always does).
    pub inactive_signal: bool,
    /// The model's dispatch threads.
    pub gpu_threads: usize,
    /// `ModelConfig::doorbell_watch`.
    pub doorbell_watch: bool,
}

impl Setup<'_> {
    /// An AQL queue on `machine` with an inactive signal, two dispatch threads.
    pub fn aql(machine: &str) -> Setup<'_> {
        Setup {
            machine,
            queue_type: KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
            inactive_signal: true,
            gpu_threads: 2,
            doorbell_watch: true,
        }
    }
}

/// A queue of the model over memory the test reads and writes (see the module docs).
pub struct Queue {
    pub emu: Emu,
    pub bo: CpuMap,
    pub id: u32,
    /// CREATE_QUEUE's `doorbell_offset` (the mmap offset of the doorbell slice of /dev/kfd,
    /// with the queue's doorbell in it on SOC15).
    pub doorbell_offset: u64,
    /// The event of the queue's inactive signal.
    pub event: u32,
    /// A signal event nothing sets, which [`wait_until`](Self::wait_until) and
    /// [`run_engines_once`](Self::run_engines_once) wait on (one for the queue's life: a
    /// process has at most `KFD_SIGNAL_EVENT_LIMIT` events).
    poll_event: u32,
}

impl Queue {
    /// A queue on the first GPU of `setup.machine` with ROCr's `amd_queue_t` layout, an
    /// inactive signal whose mailbox is a signal event's slot, a completion signal holding 1,
    /// and every ring slot INVALID, as ROCr leaves a new ring. KFD 1.15: no queue-buffer
    /// checks (no EOP or CWSR area needed).
    pub fn create(setup: Setup<'_>) -> Queue {
        let mut emu = Emu::new(ModelConfig {
            machine: Machine::preset(setup.machine).expect("preset"),
            kfd_minor: 15,
            gpu_threads: setup.gpu_threads,
            doorbell_watch: setup.doorbell_watch,
            ..ModelConfig::default()
        });
        let (page, _, event) = emu.signal_event_on_a_bo();
        let gpu = emu.gpu();
        assert_eq!(emu.map(page, &[gpu]).0, Ok(0));
        let (handle, offset) = emu
            .alloc(gpu, va(2), BO_SIZE as u64, GTT_RW)
            .expect("alloc");
        assert_eq!(emu.map(handle, &[gpu]).0, Ok(0));
        let bo = emu
            .cpu_map(emu.renders[0].as_fd(), offset, BO_SIZE)
            .expect("map the queue BO");
        let poll_event = create(&emu, KFD_IOC_EVENT_SIGNAL, true).event_id;
        let mut q = Queue {
            emu,
            bo,
            id: 0,
            doorbell_offset: 0,
            event: event.event_id,
            poll_event,
        };
        let base = va(2);
        q.put_u32(RPTR_BASE_OFFSET, RPTR as u32);
        if setup.inactive_signal {
            q.put_u64(INACTIVE, base + INACTIVE_SIGNAL as u64);
        }
        q.put_u64(
            INACTIVE_SIGNAL + SIGNAL_MAILBOX,
            va(1) + 8 * u64::from(event.event_slot_index),
        );
        q.put_u32(INACTIVE_SIGNAL + SIGNAL_EVENT_ID, event.event_id);
        q.put_u64(COMPLETION + SIGNAL_VALUE, 1);
        for slot in 0..RING_SIZE / 64 {
            q.put_u16(RING + slot * 64, 1);
        }
        let mut a = kfd_ioctl_create_queue_args {
            ring_base_address: base + RING as u64,
            ring_size: RING_SIZE as u32,
            read_pointer_address: base + RPTR as u64,
            write_pointer_address: base + WPTR as u64,
            gpu_id: gpu,
            queue_type: setup.queue_type,
            queue_percentage: 100,
            queue_priority: 7,
            ..Default::default()
        };
        q.emu
            .ioctl(AMDKFD_IOC_CREATE_QUEUE, &mut a)
            .expect("create the queue");
        q.id = a.queue_id;
        q.doorbell_offset = a.doorbell_offset;
        q
    }

    pub fn put_u16(&mut self, at: usize, v: u16) {
        self.bo.bytes()[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }
    pub fn put_u32(&mut self, at: usize, v: u32) {
        self.bo.bytes()[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    pub fn put_u64(&mut self, at: usize, v: u64) {
        self.bo.bytes()[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    pub fn u64_at(&mut self, at: usize) -> u64 {
        u64::from_le_bytes(self.bo.bytes()[at..at + 8].try_into().unwrap())
    }
    pub fn u32_at(&mut self, at: usize) -> u32 {
        u32::from_le_bytes(self.bo.bytes()[at..at + 4].try_into().unwrap())
    }

    /// Writes `packet` (its header last) into slot `index` and publishes it.
    pub fn submit(&mut self, index: u64, packet: [u8; 64]) {
        self.place(index, packet);
        self.put_u64(WPTR, index + 1);
    }

    /// Writes `packet` (its header last) into slot `index` without publishing it (the
    /// write index is left as it is).
    pub fn place(&mut self, index: u64, packet: [u8; 64]) {
        let at = RING + (index as usize % (RING_SIZE / 64)) * 64;
        self.bo.bytes()[at + 2..at + 64].copy_from_slice(&packet[2..]);
        self.put_u16(at, u16::from_le_bytes([packet[0], packet[1]]));
    }

    /// The header of ring slot `index`.
    pub fn header(&mut self, index: usize) -> u16 {
        let at = RING + index * 64;
        u16::from_le_bytes([self.bo.bytes()[at], self.bo.bytes()[at + 1]])
    }

    /// Waits (WAIT_EVENTS kicks the engines, then times out after 10 ms on an event nothing
    /// sets) until `done` holds, within 60 s.
    pub fn wait_until(&mut self, mut done: impl FnMut(&mut Queue) -> bool) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            if done(self) {
                return true;
            }
            let mut events = [data(self.poll_event)];
            let (r, _) = wait(&self.emu, &mut events, true, 10);
            assert_eq!(r, Ok(0), "WAIT_EVENTS");
        }
        done(self)
    }

    /// WAIT_EVENTS on the inactive signal's event: whether it was raised within the bound.
    pub fn wait_for_error(&self) -> bool {
        let mut events = [data(self.event)];
        let (r, result) = wait(&self.emu, &mut events, true, PATIENCE_MS);
        assert_eq!(r, Ok(0));
        result == KFD_IOC_WAIT_RESULT_COMPLETE
    }

    /// One pass of the engines (WAIT_EVENTS kicks them before it waits), on the event
    /// nothing sets.
    pub fn run_engines_once(&self) {
        let mut events = [data(self.poll_event)];
        let _ = wait(&self.emu, &mut events, true, 0);
    }

    pub fn destroy(&self) {
        let mut a = kfd_ioctl_destroy_queue_args {
            queue_id: self.id,
            pad: 0,
        };
        assert_eq!(self.emu.ioctl(AMDKFD_IOC_DESTROY_QUEUE, &mut a), Ok(0));
    }
}

/// `.text` and the 64-byte descriptor of kernel `k` (`body`) for `mcpu`, assembled by
/// LLVM 19's `llvm-mc`; `None` (skipped) without it. (`model_kernels` has its own, with
/// descriptor directives.)
pub fn assemble(mcpu: &str, body: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    use std::process::Command;
    if !std::path::Path::new("/usr/bin/llvm-mc-19").exists() {
        kfd_skip::prerequisite("llvm-mc-19 is missing (Debian llvm-19)");
        return None;
    }
    let accum = if matches!(mcpu, "gfx90a" | "gfx942") {
        ".amdhsa_accum_offset 4"
    } else {
        ""
    };
    let src = format!(
        ".amdgcn_target \"amdgcn-amd-amdhsa--{mcpu}\"\n.text\n.globl k\n.p2align 8\n\
         .type k,@function\nk:\n{body}\n.rodata\n.p2align 6\n.amdhsa_kernel k\n\
         .amdhsa_next_free_vgpr 32\n.amdhsa_next_free_sgpr 32\n{accum}\n\
         .end_amdhsa_kernel\n"
    );
    let dir = std::env::temp_dir().join(format!(
        "kfd-emu-asm-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (s, o) = (dir.join("k.s"), dir.join("k.o"));
    std::fs::write(&s, &src).unwrap();
    let out = Command::new("llvm-mc-19")
        .args(["-triple", "amdgcn-amd-amdhsa", &format!("-mcpu={mcpu}")])
        .args(["-filetype=obj", "-o"])
        .arg(&o)
        .arg(&s)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let section = |name: &str| {
        let bin = dir.join(format!("{name}.bin"));
        let ok = Command::new("llvm-objcopy-19")
            .args(["-O", "binary", &format!("--only-section={name}")])
            .arg(&o)
            .arg(&bin)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        std::fs::read(&bin).unwrap()
    };
    let (text, kd) = (section(".text"), section(".rodata"));
    let _ = std::fs::remove_dir_all(&dir);
    Some((text, kd))
}

impl Queue {
    /// Loads kernel `text`/`kd` (from [`assemble`]): its descriptor at DESCRIPTOR (the entry
    /// offset filled in as the linker would), its code at CODE.
    pub fn load(&mut self, text: &[u8], kd: &[u8]) {
        let mut kd = kd.to_vec();
        kd[16..24].copy_from_slice(&((CODE - DESCRIPTOR) as i64).to_le_bytes());
        self.bo.bytes()[DESCRIPTOR..DESCRIPTOR + 64].copy_from_slice(&kd);
        self.bo.bytes()[CODE..CODE + text.len()].copy_from_slice(text);
    }

    /// A KERNEL_DISPATCH of `grid` work-items in groups of `wg`, kernarg at DATA, completion
    /// signal at COMPLETION, no scratch.
    pub fn dispatch_packet(grid: [u32; 3], wg: [u16; 3]) -> [u8; 64] {
        let mut p = [0u8; 64];
        let header = u16::from(KERNEL_DISPATCH) | 1 << 8 | 2 << 9 | 2 << 11;
        p[..2].copy_from_slice(&header.to_le_bytes());
        p[2..4].copy_from_slice(&3u16.to_le_bytes());
        for (d, v) in wg.iter().enumerate() {
            p[4 + 2 * d..6 + 2 * d].copy_from_slice(&v.to_le_bytes());
        }
        for (d, v) in grid.iter().enumerate() {
            p[12 + 4 * d..16 + 4 * d].copy_from_slice(&v.to_le_bytes());
        }
        p[32..40].copy_from_slice(&(va(2) + DESCRIPTOR as u64).to_le_bytes());
        p[40..48].copy_from_slice(&(va(2) + DATA as u64).to_le_bytes());
        p[56..64].copy_from_slice(&(va(2) + COMPLETION as u64).to_le_bytes());
        p
    }
}

/// RUNTIME_ENABLE's arguments turning the runtime on (ROCr 6.2.4's `hsaKmtRuntimeEnable`).
pub fn runtime_on() -> kfd_ioctl_runtime_enable_args {
    kfd_ioctl_runtime_enable_args {
        r_debug: 0x1234,
        mode_mask: KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK | KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK,
        capabilities_mask: 0,
    }
}

impl Queue {
    /// The queue (destroyed before) made again with a context save area at `SCRATCH` whose
    /// header names the runtime's error payload (at `payload`, zeroed) and error event
    /// `event`, as libhsakmt 6.2.4's `fill_cwsr_header` writes it from ROCr's `ErrorReason`
    /// and queue event (`kfd_context_save_area_header`: `err_payload_addr` at 24,
    /// `err_event_id` at 32).
    pub fn recreate_with_error_reason(&mut self, payload: usize, event: u32) {
        self.put_u64(payload, 0);
        self.put_u64(SCRATCH + 24, va(2) + payload as u64);
        self.put_u32(SCRATCH + 32, event);
        self.id = self.create_again(va(2) + SCRATCH as u64);
    }

    /// A compute AQL queue over this queue's ring and pointers (as [`Queue::create`] lays them
    /// out), created now on the first GPU, with a 4 KiB context save area at `csa` (none when
    /// 0); its id.
    pub fn create_again(&self, csa: u64) -> u32 {
        let base = va(2);
        let mut a = kfd_ioctl_create_queue_args {
            ring_base_address: base + RING as u64,
            ring_size: RING_SIZE as u32,
            read_pointer_address: base + RPTR as u64,
            write_pointer_address: base + WPTR as u64,
            gpu_id: self.emu.gpu(),
            queue_type: KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
            queue_percentage: 100,
            queue_priority: 7,
            ctx_save_restore_address: csa,
            ctx_save_restore_size: if csa == 0 { 0 } else { 0x1000 },
            ..Default::default()
        };
        self.emu
            .ioctl(AMDKFD_IOC_CREATE_QUEUE, &mut a)
            .expect("create the queue");
        a.queue_id
    }
}
