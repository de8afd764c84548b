//! The SDMA and PM4 packets kfd-emu's engines run, each in the encoding a real producer
//! emits, through `kfd-queue`'s queues on kfd-emu's machines (and on the hardware when there
//! is one; packets the hardware would stop on, or that the model alone can observe, run
//! emulated only).
//!
//! What is proved, per packet: SDMA CONSTANT_FILL as ROCr 5.2.3 (`(dwords - 1) * 4`, fill
//! size 2), Mesa (`bytes - 1`, fill size 2) and the kernel (`bytes - 1`, fill size 0) encode
//! it fills exactly the same dwords and nothing past them; WRITE_LINEAR writes its dwords;
//! COPY_LINEAR's broadcast writes both destinations and the sub-window copy moves a
//! rectangle; COND_EXE runs or skips what follows on its flag; the TC atomic opcodes (32- and
//! 64-bit); GEN_PTEPDE, TIMESTAMP GET, SRBM_WRITE; GCR_REQ runs on SDMA 6 and stops an SDMA 4
//! queue. PM4 (gfx9: mi300x, mi210x8; gfx11: rx7900xtx): WRITE_DATA, RELEASE_MEM (64-bit,
//! GPU clock, interrupt → KFD event), the read pointer as a dword offset that wraps with the
//! ring, WAIT_REG_MEM holding the queue, ACQUIRE_MEM per generation, nested and chained
//! INDIRECT_BUFFERs, SET_SH_REG, a dispatch or an unknown opcode stopping the queue, and a
//! ring of random dwords stopping its queue without harm; on gfx12 (rx9070xt), raw packets in
//! the kernel's gfx12 encoding. Hostile counts (a self-chaining IB, a maximal IB nothing
//! maps, an SDMA WRITE_LINEAR past the read window) stay on their own queue.

use std::sync::Arc;
use std::time::Duration;

use kfd_ioctl::abi::AllocMemFlags;
use kfd_ioctl::topology::{Node, Topology};
use kfd_ioctl::{BufferObject, CpuMapping, Kfd};
use kfd_queue::packet::{self, PollFunc};
use kfd_queue::pm4::{self, Pm4Generation};
use kfd_queue::{Command, Error, Pm4Command, Pm4Queue, QueueContext, SdmaEngine, SdmaQueue};
use kfd_tests::{Target, VaReservation, on_every_target};

/// SDMA 4.x (gfx906), 4.4.2 (gfx942), 6.x (gfx1100).
const SDMA_MACHINES: &[&str] = &["radeon-vii", "mi300x", "rx7900xtx"];
/// PM4: gfx9 (gfx942, gfx90a) and gfx11 (gfx1100), whose ACQUIRE_MEM and RELEASE_MEM differ.
const PM4_MACHINES: &[&str] = &["mi300x", "mi210x8", "rx7900xtx"];
const WAIT: Duration = Duration::from_secs(10);
/// How long a stopped queue is given to (wrongly) complete.
const STOPPED: Duration = Duration::from_millis(200);
const GTT: AllocMemFlags = AllocMemFlags::GTT.union(AllocMemFlags::WRITABLE);

/// This process on the first GPU of a target.
struct Env {
    name: String,
    kfd: Kfd,
    node: Node,
    gpu_id: kfd_ioctl::GpuId,
    context: Arc<QueueContext>,
    va: VaReservation,
    emulated: bool,
}

fn open(target: &Target) -> Env {
    let name = target.name();
    let kfd = Kfd::open().unwrap_or_else(|e| panic!("{name}: {e}"));
    let topology = Topology::read().unwrap_or_else(|e| panic!("{name}: {e}"));
    let node = topology.gpus().next().expect("a GPU").clone();
    let gpu_id = node.gpu_id().expect("gpu_id");
    kfd.acquire_vm(gpu_id, node.properties.drm_render_minor as u32)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let context = QueueContext::new(&kfd, &topology).unwrap_or_else(|e| panic!("{name}: {e}"));
    Env {
        name,
        kfd,
        node,
        gpu_id,
        context,
        va: VaReservation::new(1 << 30, 2 << 20),
        emulated: matches!(target, Target::Emulated { .. }),
    }
}

impl Env {
    /// A GTT BO of `size` bytes at `offset` in the test's range, mapped on the GPU.
    fn bo(&self, offset: u64, size: u64) -> BufferObject {
        let bo = self
            .kfd
            .alloc_memory_of_gpu(self.gpu_id, self.va.addr() + offset, size, GTT)
            .unwrap_or_else(|e| panic!("{}: {e}", self.name));
        self.kfd
            .map_memory_to_gpu(&bo, &[self.gpu_id])
            .unwrap_or_else(|e| panic!("{}: {e}", self.name));
        bo
    }

    fn sdma(&self) -> SdmaQueue {
        SdmaQueue::new(&self.context, self.gpu_id, SdmaEngine::Pcie, 4096)
            .unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }

    fn pm4(&self) -> Pm4Queue {
        Pm4Queue::new(&self.context, self.gpu_id, 4096)
            .unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }

    fn gfx_major(&self) -> u32 {
        self.node.gfx_target_version().expect("gfx").major
    }
}

fn dwords(cpu: &CpuMapping<'_>, at: usize, n: usize) -> Vec<u32> {
    let mut b = vec![0u8; 4 * n];
    cpu.read_slice(&mut b, at).unwrap();
    b.chunks(4)
        .map(|d| u32::from_le_bytes(d.try_into().unwrap()))
        .collect()
}

fn fill_ones(cpu: &CpuMapping<'_>, len: usize) {
    cpu.write_slice(&vec![0xFF; len], 0).unwrap();
}

fn lo(va: u64) -> u32 {
    va as u32
}

fn hi(va: u64) -> u32 {
    (va >> 32) as u32
}

/// CONSTANT_FILL's `count` is bytes - 1 whatever the fill size, and the engine writes whole
/// units of it: ROCr's dword count `(n - 1) * 4` (fill size 2), Mesa's `bytes - 1` (fill size
/// 2) and the kernel's `bytes - 1` (fill size 0, a byte pattern) all fill exactly n dwords.
/// (The old engine filled `count + 1` bytes: ROCr's encoding left the last dword short.)
#[test]
fn constant_fill_fills_the_same_dwords_in_rocr_mesa_and_kernel_encodings() {
    on_every_target(SDMA_MACHINES, |target| {
        let env = open(target);
        let mem = env.bo(0, 1 << 16);
        let cpu = mem.map_cpu().unwrap();
        fill_ones(&cpu, 1 << 16);
        let mut q = env.sdma();
        let fill = |at: u64, size: u32, value: u32, count: u32| {
            let va = mem.va() + at;
            [11 | size << 30, lo(va), hi(va), value, count]
        };
        for n in [1u32, 5, 1024] {
            let rocr = fill(0x0, 2, 0x1234_5678, (n - 1) * 4);
            let mesa = fill(0x4000, 2, 0x1234_5678, n * 4 - 1);
            let kernel = fill(0x8000, 0, 0x5A5A_5A5A, n * 4 - 1);
            let c = q
                .submit(&[
                    Command::Raw(&rocr),
                    Command::Raw(&mesa),
                    Command::Raw(&kernel),
                ])
                .unwrap();
            q.wait(c, WAIT).unwrap();
            let n = n as usize;
            for (at, want) in [
                (0, 0x1234_5678),
                (0x4000, 0x1234_5678),
                (0x8000, 0x5A5A_5A5A),
            ] {
                let got = dwords(&cpu, at, n + 1);
                assert!(
                    got[..n].iter().all(|&d| d == want),
                    "{}: {n} dwords at {at:#x}: {:#x?}",
                    env.name,
                    &got[..n.min(8)]
                );
                assert_eq!(got[n], 0xFFFF_FFFF, "{}: nothing past {n} dwords", env.name);
            }
        }
        // kfdtest's byte fill (fill size 0, `count = size - 1`) of 7 bytes at an odd address:
        // the data's low byte, 7 times.
        let c = q
            .submit(&[Command::Raw(&fill(0xC001, 0, 0x1234_56AB, 6))])
            .unwrap();
        q.wait(c, WAIT).unwrap();
        let mut b = [0u8; 9];
        cpu.read_slice(&mut b, 0xC000).unwrap();
        assert_eq!(
            b,
            [0xFF, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xAB, 0xFF],
            "{}",
            env.name
        );
    });
}

/// WRITE_LINEAR (op 2, kfdtest's `SDMAWriteDataPacket`): header, address, dwords - 1, data.
/// (The old engine stopped the queue at it with `BadPacket(2)`.)
#[test]
fn write_linear_writes_its_dwords() {
    on_every_target(SDMA_MACHINES, |target| {
        let env = open(target);
        let mem = env.bo(0, 1 << 16);
        let cpu = mem.map_cpu().unwrap();
        fill_ones(&cpu, 1 << 16);
        let mut q = env.sdma();
        let data: Vec<u32> = (0..300).map(|i| 0xC0DE_0000 | i).collect();
        let c = q
            .submit(&[
                Command::Write {
                    addr: mem.va() + 0x100,
                    data: &data,
                },
                Command::Write {
                    addr: mem.va() + 0x10,
                    data: &[7],
                },
            ])
            .unwrap();
        q.wait(c, WAIT)
            .unwrap_or_else(|e| panic!("{}: {e}", env.name));
        assert_eq!(dwords(&cpu, 0x100, 300), data, "{}", env.name);
        assert_eq!(dwords(&cpu, 0x100 + 1200, 1), [0xFFFF_FFFF]);
        assert_eq!(dwords(&cpu, 0x10, 2), [7, 0xFFFF_FFFF]);
    });
}

/// COPY_LINEAR with `broadcast` writes both destinations; COPY_LINEAR_SUB_WIND (ROCr's
/// `BuildCopyRectCommand`) copies a rectangle between pitched surfaces, no more.
#[test]
fn broadcast_and_sub_window_copies_move_what_they_say() {
    on_every_target(SDMA_MACHINES, |target| {
        let env = open(target);
        if !env.emulated {
            return;
        }
        let mem = env.bo(0, 1 << 16);
        let cpu = mem.map_cpu().unwrap();
        let src: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
        cpu.write_slice(&src, 0).unwrap();
        cpu.write_slice(&[0u8; 0x6000], 0x2000).unwrap();
        let va = mem.va();
        let broadcast = [
            1 | 1 << 27,
            99,
            0,
            lo(va),
            hi(va),
            lo(va + 0x2000),
            hi(va + 0x2000),
            lo(va + 0x3000),
            hi(va + 0x3000),
        ];
        // A 16 x 3 rectangle of 4-byte elements (element 2) from (2, 1) of a 64-byte-pitch
        // source to (1, 2) of a 128-byte-pitch destination.
        let (sb, db) = (va, va + 0x4000);
        let rect = packet::copy_sub_window(
            2,
            packet::Pitched {
                base: db,
                origin: [1, 2, 0],
                pitch: 32,
                slice: 1,
            },
            packet::Pitched {
                base: sb,
                origin: [2, 1, 0],
                pitch: 16,
                slice: 1,
            },
            [16, 3, 1],
        )
        .unwrap();
        let mut q = env.sdma();
        let c = q
            .submit(&[Command::Raw(&broadcast), Command::Raw(&rect)])
            .unwrap();
        q.wait(c, WAIT)
            .unwrap_or_else(|e| panic!("{}: {e}", env.name));
        let read = |at: usize, n: usize| {
            let mut b = vec![0u8; n];
            cpu.read_slice(&mut b, at).unwrap();
            b
        };
        assert_eq!(read(0x2000, 101), [&src[..100], &[0]].concat());
        assert_eq!(read(0x3000, 101), [&src[..100], &[0]].concat());
        let dst = read(0x4000, 128 * 6);
        for row in 0..6 {
            let line = &dst[row * 128..row * 128 + 128];
            if (2..5).contains(&row) {
                let from = (row - 2 + 1) * 64 + 2 * 4;
                assert_eq!(line[..4], [0; 4]);
                assert_eq!(line[4..68], src[from..from + 64], "{}: row {row}", env.name);
                assert!(line[68..].iter().all(|&b| b == 0));
            } else {
                assert!(line.iter().all(|&b| b == 0), "{}: row {row}", env.name);
            }
        }
    });
}

/// COND_EXE runs the next `exec_count` dwords when the flag holds the reference and skips
/// them otherwise (the kernel's `init_cond_exec`); the TC atomics at both widths; GEN_PTEPDE;
/// TIMESTAMP GET; SRBM_WRITE as a register write nothing reads.
#[test]
fn cond_exe_atomics_ptepde_timestamp_and_register_writes() {
    on_every_target(SDMA_MACHINES, |target| {
        let env = open(target);
        if !env.emulated {
            return;
        }
        let mem = env.bo(0, 1 << 16);
        let cpu = mem.map_cpu().unwrap();
        cpu.write_slice(&[0u8; 0x1000], 0).unwrap();
        let va = mem.va();
        // Flag at 0x0 = 0 (skip), at 0x4 = 1 (run).
        cpu.write_slice(&1u32.to_le_bytes(), 4).unwrap();
        let fence = |at: u64, v: u32| packet::fence(va + at, v);
        let cond = |flag: u64| [9, lo(va + flag), hi(va + flag), 1, 4];
        // Atomics: 32-bit ADD_RTN (15) on 0x100; 32-bit no-return OR (0x56) on 0x104; 64-bit
        // SUB_RTN (0x30) on 0x108; 32-bit INC_RTN (24) wrapping at 1 on 0x110 (twice);
        // 64-bit UMAX no-return (0x74) on 0x118.
        cpu.write_slice(&10u32.to_le_bytes(), 0x100).unwrap();
        cpu.write_slice(&0x10u32.to_le_bytes(), 0x104).unwrap();
        cpu.write_slice(&100u64.to_le_bytes(), 0x108).unwrap();
        cpu.write_slice(&5u64.to_le_bytes(), 0x118).unwrap();
        let atomic = |op: u32, at: u64, src: u64| {
            [
                10 | op << 25,
                lo(va + at),
                hi(va + at),
                lo(src),
                hi(src),
                0,
                0,
                0,
            ]
        };
        let pte = [
            12,
            lo(va + 0x200),
            hi(va + 0x200),
            0x3,
            0,
            0x10_0000,
            0,
            0x1000,
            0,
            2,
        ];
        let ts = [13 | 1 << 8, lo(va + 0x300), hi(va + 0x300)];
        let srbm = [14 | 0xF << 28, 0x1234, 0x5678];
        let mut q = env.sdma();
        let c = q
            .submit(&[
                Command::Raw(&cond(0)),
                Command::Raw(&fence(0x40, 1)),
                Command::Raw(&cond(4)),
                Command::Raw(&fence(0x44, 2)),
                Command::Raw(&atomic(15, 0x100, 5)),
                Command::Raw(&atomic(0x56, 0x104, 0x3)),
                Command::Raw(&atomic(0x30, 0x108, 1)),
                Command::Raw(&atomic(24, 0x110, 1)),
                Command::Raw(&atomic(24, 0x110, 1)),
                Command::Raw(&atomic(0x74, 0x118, 9)),
                Command::Raw(&pte),
                Command::Raw(&ts),
                Command::Raw(&srbm),
            ])
            .unwrap();
        q.wait(c, WAIT)
            .unwrap_or_else(|e| panic!("{}: {e}", env.name));
        assert_eq!(
            dwords(&cpu, 0x40, 2),
            [0, 2],
            "{}: skipped, then run",
            env.name
        );
        assert_eq!(dwords(&cpu, 0x100, 2), [15, 0x13]);
        let u64_at = |at: usize| {
            let d = dwords(&cpu, at, 2);
            u64::from(d[1]) << 32 | u64::from(d[0])
        };
        assert_eq!(u64_at(0x108), 99);
        assert_eq!(dwords(&cpu, 0x110, 1), [0], "INC wraps at its operand");
        assert_eq!(u64_at(0x118), 9);
        let ptes: Vec<u64> = (0..4).map(|i| u64_at(0x200 + 8 * i)).collect();
        assert_eq!(ptes, [0x10_0003, 0x10_1003, 0x10_2003, 0], "{}", env.name);
        assert!(u64_at(0x300) > 0, "{}: a timestamp", env.name);
    });
}

/// GCR_REQ (ROCr's cache flush around SDMA 5+ copies) runs on SDMA 6; SDMA 4 has no such
/// packet, so there it stops the queue.
#[test]
fn gcr_req_is_an_sdma5_and_later_packet() {
    on_every_target(SDMA_MACHINES, |target| {
        let env = open(target);
        if !env.emulated {
            return;
        }
        let mut q = env.sdma();
        let gcr = [17 | 1 << 8, 0, 0xC3C0_0000, 0, 0];
        let c = q.submit(&[Command::Raw(&gcr)]).unwrap();
        let r = q.wait(c, STOPPED);
        if env.gfx_major() >= 10 {
            r.unwrap_or_else(|e| panic!("{}: {e}", env.name));
            let c = q
                .submit(&[Command::CacheFlush { invalidate: true }])
                .unwrap();
            q.wait(c, WAIT).unwrap();
        } else {
            assert!(matches!(r, Err(Error::Timeout(_))), "{}: {r:?}", env.name);
        }
    });
}

/// WRITE_DATA, RELEASE_MEM (64-bit data, the GPU clock, and the end-of-pipe interrupt that
/// sets the queue's event), ACQUIRE_MEM in the GPU's own layout, SET_SH_REG and the
/// one-dword fillers on a PM4 queue; the read pointer is the dword offset in the ring, and 300 submissions wrap a 4 KiB
/// ring. (The old model never ran a PM4 queue.)
#[test]
fn pm4_write_data_release_mem_and_the_read_pointer() {
    on_every_target(PM4_MACHINES, |target| {
        let env = open(target);
        let mem = env.bo(0, 1 << 16);
        let cpu = mem.map_cpu().unwrap();
        fill_ones(&cpu, 0x1000);
        let mut q = env.pm4();
        let want = if env.gfx_major() == 9 {
            Pm4Generation::Gfx9
        } else {
            Pm4Generation::Gfx10
        };
        assert_eq!(q.generation(), want);
        let va = mem.va();
        let c = q
            .submit(&[
                Pm4Command::AcquireMem,
                // One-dword fillers: kfdtest's CMD_NOP_TYPE_3 (a NOP of count 0x3FFF) and a
                // type-2 packet.
                Pm4Command::Raw(&[0xFFFF_1002, 0x8000_0000, 0xFFFF_1002]),
                Pm4Command::WriteData {
                    addr: va + 0x10,
                    data: &[1, 2, 3],
                },
                Pm4Command::SetShRegs {
                    reg: 0x2E00,
                    values: &[0xAA, 0xBB],
                },
                Pm4Command::Fence {
                    addr: va + 0x40,
                    value: 0x1122_3344_5566_7788,
                },
                Pm4Command::Timestamp { addr: va + 0x48 },
            ])
            .unwrap();
        q.wait(c, WAIT)
            .unwrap_or_else(|e| panic!("{}: {e}", env.name));
        assert_eq!(
            dwords(&cpu, 0x10, 4),
            [1, 2, 3, 0xFFFF_FFFF],
            "{}",
            env.name
        );
        assert_eq!(dwords(&cpu, 0x40, 2), [0x5566_7788, 0x1122_3344]);
        let ts = dwords(&cpu, 0x48, 2);
        assert!(
            ts != [0xFFFF_FFFF; 2] && ts != [0, 0],
            "{}: {ts:x?}",
            env.name
        );
        let (event, _) = q.signal_event().unwrap();
        for i in 0..300u32 {
            let c = q
                .submit(&[
                    Pm4Command::WriteData {
                        addr: va + 0x80,
                        data: &[i],
                    },
                    Pm4Command::Signal(&event),
                ])
                .unwrap();
            let woke = env.kfd.wait_events(&[&event], false, 10_000).unwrap();
            assert!(
                matches!(woke, kfd_ioctl::WaitOutcome::Complete(_)),
                "{}: the RELEASE_MEM interrupt sets the event",
                env.name
            );
            q.wait(c, WAIT).unwrap();
        }
        assert_eq!(dwords(&cpu, 0x80, 1), [299]);
        assert!(q.write_pointer() > 4 * q.ring_dwords(), "the ring wrapped");
        // The CP reports its read pointer when it gets past the last packets, a moment after
        // the RELEASE_MEM's interrupt, on the hardware as on the model.
        let end = q.write_pointer() % q.ring_dwords();
        let deadline = std::time::Instant::now() + WAIT;
        while u64::from(q.read_pointer().unwrap()) != end && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(
            u64::from(q.read_pointer().unwrap()),
            q.write_pointer() % q.ring_dwords(),
            "{}: the read pointer is the dword offset in the ring",
            env.name
        );
    });
}

/// WAIT_REG_MEM on memory holds the queue (without stopping it) until the masked value
/// compares as asked; what follows runs after.
#[test]
fn pm4_wait_reg_mem_holds_the_queue_until_the_value_arrives() {
    on_every_target(PM4_MACHINES, |target| {
        let env = open(target);
        let mem = env.bo(0, 4096);
        let cpu = mem.map_cpu().unwrap();
        cpu.write_slice(&[0u8; 64], 0).unwrap();
        let mut q = env.pm4();
        let c = q
            .submit(&[
                Pm4Command::WaitMemory {
                    addr: mem.va(),
                    value: 1,
                    mask: 0xFF,
                    func: PollFunc::Equal,
                },
                Pm4Command::WriteData {
                    addr: mem.va() + 8,
                    data: &[77],
                },
            ])
            .unwrap();
        assert!(matches!(q.wait(c, STOPPED), Err(Error::Timeout(_))));
        assert_eq!(
            dwords(&cpu, 8, 1),
            [0],
            "{}: nothing after the wait ran",
            env.name
        );
        cpu.write_slice(&0x0000_0101u32.to_le_bytes(), 0).unwrap();
        q.wait(c, WAIT)
            .unwrap_or_else(|e| panic!("{}: {e}", env.name));
        assert_eq!(dwords(&cpu, 8, 1), [77]);
    });
}

/// A page written a dword per WRITE_DATA packet (kfdtest's `PM4EventInterrupt`), then a
/// WAIT_REG_MEM on the last dword written and a fence: every dword is in memory when the
/// fence lands, and the wait sees the write before it (the processor writes adjacent
/// WRITE_DATA together, before any other packet runs).
#[test]
fn pm4_a_page_written_a_dword_per_packet_is_all_there_at_the_fence() {
    on_every_target(PM4_MACHINES, |target| {
        let env = open(target);
        let mem = env.bo(0, 2 * 4096);
        let cpu = mem.map_cpu().unwrap();
        cpu.write_slice(&[0u8; 2 * 4096], 0).unwrap();
        let mut q = env.pm4();
        let va = mem.va();
        let values: Vec<u32> = (0..1024u32).map(|i| 0xDEAD_0000 | i).collect();
        let mut commands: Vec<Pm4Command<'_>> = values
            .iter()
            .enumerate()
            .map(|(i, v)| Pm4Command::WriteData {
                addr: va + 4 * i as u64,
                data: std::slice::from_ref(v),
            })
            .collect();
        commands.push(Pm4Command::WaitMemory {
            addr: va + 4 * 1023,
            value: values[1023],
            mask: 0xFFFF_FFFF,
            func: PollFunc::Equal,
        });
        commands.push(Pm4Command::Fence {
            addr: va + 4096,
            value: 0x600D,
        });
        for chunk in commands.chunks(100) {
            let c = q.submit(chunk).unwrap();
            q.wait(c, WAIT)
                .unwrap_or_else(|e| panic!("{}: {e}", env.name));
        }
        assert_eq!(dwords(&cpu, 4096, 1), [0x600D], "{}", env.name);
        assert_eq!(dwords(&cpu, 0, 1024), values, "{}", env.name);
    });
}

/// An INDIRECT_BUFFER runs its packets and comes back; one inside it nests; one with CHAIN
/// ends its IB and goes on in the next; the ring's commands after the IB run after it.
#[test]
fn pm4_indirect_buffers_nest_and_chain() {
    on_every_target(PM4_MACHINES, |target| {
        let env = open(target);
        let mem = env.bo(0, 1 << 16);
        let cpu = mem.map_cpu().unwrap();
        cpu.write_slice(&[0u8; 0x100], 0).unwrap();
        let ibs = env.bo(1 << 20, 1 << 16);
        let ib_cpu = ibs.map_cpu().unwrap();
        let va = mem.va();
        let (ib1, ib2, ib3) = (ibs.va(), ibs.va() + 0x1000, ibs.va() + 0x2000);
        let put = |at: u64, packets: &[Vec<u32>]| -> u32 {
            let d: Vec<u8> = packets
                .concat()
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            ib_cpu.write_slice(&d, (at - ibs.va()) as usize).unwrap();
            (d.len() / 4) as u32
        };
        let wd = |at: u64, v: u32| pm4::write_data(va + at, &[v]).unwrap();
        // IB3: one write. IB2: a write, then a chain to IB3 (what follows in IB2 never runs).
        let n3 = put(ib3, &[wd(0x20, 3)]);
        let n2 = put(
            ib2,
            &[
                wd(0x10, 2),
                pm4::indirect_buffer(ib3, n3, true).unwrap().to_vec(),
                wd(0x18, 0xBAD),
            ],
        );
        // IB1: a write, IB2 nested, then a write after it returns.
        let n1 = put(
            ib1,
            &[
                wd(0x0, 1),
                pm4::indirect_buffer(ib2, n2, false).unwrap().to_vec(),
                wd(0x4, 4),
            ],
        );
        let mut q = env.pm4();
        let c = q
            .submit(&[
                Pm4Command::IndirectBuffer {
                    addr: ib1,
                    dwords: n1,
                },
                Pm4Command::WriteData {
                    addr: va + 0x30,
                    data: &[5],
                },
            ])
            .unwrap();
        q.wait(c, WAIT)
            .unwrap_or_else(|e| panic!("{}: {e}", env.name));
        assert_eq!(dwords(&cpu, 0, 2), [1, 4], "{}", env.name);
        assert_eq!(dwords(&cpu, 0x10, 1), [2]);
        assert_eq!(
            dwords(&cpu, 0x18, 1),
            [0],
            "{}: the chain ended IB2",
            env.name
        );
        assert_eq!(dwords(&cpu, 0x20, 1), [3]);
        assert_eq!(dwords(&cpu, 0x30, 1), [5]);
    });
}

/// A DISPATCH_DIRECT of no kernel (no SH register set: no threads per group) stops the
/// queue (what follows never runs),
/// as do an unknown opcode and a SET_SH_REG past the SH register space; the GPU's other
/// queues go on. A ring of random dwords stops its queue and harms nothing.
#[test]
fn pm4_dispatch_and_bad_packets_stop_only_their_queue() {
    on_every_target(PM4_MACHINES, |target| {
        let env = open(target);
        if !env.emulated {
            return;
        }
        let mem = env.bo(0, 4096);
        let cpu = mem.map_cpu().unwrap();
        cpu.write_slice(&[0u8; 64], 0).unwrap();
        let dispatch = pm4::dispatch_direct([1, 1, 1], 1);
        let unknown = [pm4::header(0xEE, 1), 0];
        let past_sh = [pm4::header(pm4::IT_SET_SH_REG, 3), 0x3FF, 1, 2];
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let random: Vec<u32> = (0..512)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u32
            })
            .collect();
        for (i, bad) in [&dispatch[..], &unknown, &past_sh, &random]
            .into_iter()
            .enumerate()
        {
            let mut q = env.pm4();
            let c = q
                .submit(&[
                    Pm4Command::Raw(bad),
                    Pm4Command::WriteData {
                        addr: mem.va() + 4 * i as u64,
                        data: &[9],
                    },
                ])
                .unwrap();
            assert!(
                matches!(
                    q.wait(c, STOPPED),
                    Err(Error::Timeout(_) | Error::VmFault(_))
                ),
                "{}: case {i}",
                env.name
            );
            if i < 3 {
                assert_eq!(dwords(&cpu, 4 * i, 1), [0], "{}: case {i}", env.name);
            }
        }
        let mut other = env.pm4();
        let c = other
            .submit(&[Pm4Command::WriteData {
                addr: mem.va() + 0x20,
                data: &[1],
            }])
            .unwrap();
        other.wait(c, WAIT).unwrap();
    });
}

/// Hostile counts are bounded: an IB that chains to itself runs forever on its own queue
/// while another queue of the process still completes and the spinning queue is destroyed;
/// an SDMA WRITE_LINEAR longer than the engine's read window stops its queue instead of
/// stalling it unseen; an IB at an unmapped address is a VM fault, after which the queue
/// reports itself dead, and so does a queue made on the GPU afterwards.
#[test]
fn hostile_counts_stop_or_spin_only_their_own_queue() {
    on_every_target(&["mi300x"], |target| {
        let env = open(target);
        if !env.emulated {
            return;
        }
        let mem = env.bo(0, 4096);
        let cpu = mem.map_cpu().unwrap();
        cpu.write_slice(&[0u8; 64], 0).unwrap();
        let ib = env.bo(1 << 20, 4096);
        let spin = pm4::indirect_buffer(ib.va(), 4, true).unwrap();
        let bytes: Vec<u8> = spin.iter().flat_map(|d| d.to_le_bytes()).collect();
        ib.map_cpu().unwrap().write_slice(&bytes, 0).unwrap();
        let mut spinning = env.pm4();
        let never = spinning
            .submit(&[Pm4Command::IndirectBuffer {
                addr: ib.va(),
                dwords: 4,
            }])
            .unwrap();
        let mut other = env.pm4();
        let c = other
            .submit(&[Pm4Command::WriteData {
                addr: mem.va(),
                data: &[1],
            }])
            .unwrap();
        other
            .wait(c, WAIT)
            .unwrap_or_else(|e| panic!("{}: {e}", env.name));
        assert!(!spinning.is_done(never).unwrap());
        drop(spinning);
        // Before any fault (which would evict every queue of the process on the GPU):
        let mut sdma = env.sdma();
        let va = mem.va() + 8;
        let huge = [2, lo(va), hi(va), 0xF_FFFF];
        let c = sdma.submit(&[Command::Raw(&huge)]).unwrap();
        assert!(matches!(sdma.wait(c, STOPPED), Err(Error::Timeout(_))));
        assert_eq!(dwords(&cpu, 8, 1), [0]);
        // An IB of the most dwords at an address nothing maps: above the CPU's 47-bit user
        // address space, so that no mapping of this process (with XNACK on, any CPU mapping
        // is GPU-reachable through the kernel's unregistered-range restore) can be there.
        let mut faulting = env.pm4();
        let c = faulting
            .submit(&[Pm4Command::IndirectBuffer {
                addr: 0x8000_0000_0000,
                dwords: pm4::MAX_IB_DWORDS,
            }])
            .unwrap();
        let outcome = faulting.wait(c, WAIT);
        assert!(
            matches!(outcome, Err(Error::VmFault(_))),
            "{}: {outcome:?}",
            env.name
        );
        // The PM4 queue is dead from then on, and says so.
        assert!(faulting.dead().is_some(), "{}", env.name);
        let again = faulting.submit(&[Pm4Command::WriteData {
            addr: mem.va(),
            data: &[2],
        }]);
        assert!(
            matches!(again, Err(Error::QueueDead(_))),
            "{}: {again:?}",
            env.name
        );
        assert!(matches!(faulting.wait(c, WAIT), Err(Error::QueueDead(_))));
        drop(faulting);
        // The fault evicted the process's queues on the GPU for good (kfd_dqm_evict_pasid;
        // create_queue_cpsch creates later ones evicted): a new queue there is dead at once.
        let mut late = env.sdma();
        assert!(late.dead().is_some(), "{}", env.name);
        assert!(matches!(
            late.submit(&[Command::Fence {
                addr: mem.va(),
                value: 3
            }]),
            Err(Error::QueueDead(_))
        ));
    });
}

/// gfx12 (RX 9070 XT): kfd-queue encodes no gfx12 PM4 (`Error::NoPm4`), but the model's CP
/// runs what a gfx12 runtime submits on a raw `KFD_IOC_QUEUE_TYPE_COMPUTE` queue: WRITE_DATA
/// and a RELEASE_MEM as `gfx_v12_0_ring_emit_fence` encodes it (`GCR_SEQ | GCR_GL2_WB |
/// CACHE_POLICY(3)`, the same 8 dwords as gfx10/11), whose interrupt sets the event.
#[test]
fn pm4_on_gfx12_runs_raw_packets() {
    use kfd_ioctl::{ComputeBuffers, QueueBuffer, QueueSizes, QueueSpec, QueueType};
    on_every_target(&["rx9070xt-small-bar"], |target| {
        let env = open(target);
        assert!(matches!(
            Pm4Queue::new(&env.context, env.gpu_id, 4096),
            Err(Error::NoPm4(_))
        ));
        let sizes = QueueSizes::for_node(&env.node).expect("CWSR sizes");
        let ring = Arc::new(env.bo(0, 4096));
        let pointers = Arc::new(env.bo(1 << 20, 4096));
        let eop = Arc::new(env.bo(2 << 20, sizes.eop_buffer_size));
        let ctx_save = Arc::new(env.bo(4 << 20, sizes.total_ctx_save_size()));
        let data = env.bo(3 << 20, 4096);
        let spec = QueueSpec {
            gpu_id: env.gpu_id,
            queue_type: QueueType::Compute,
            percentage: 100,
            priority: 7,
            ring: QueueBuffer::start_of(ring.clone()),
            ring_size: 4096,
            read_pointer: QueueBuffer::start_of(pointers.clone()),
            write_pointer: QueueBuffer {
                bo: pointers.clone(),
                offset: 8,
            },
            compute: Some(ComputeBuffers {
                eop: QueueBuffer::start_of(eop),
                ctx_save: QueueBuffer::start_of(ctx_save),
                sizes,
            }),
        };
        let q = env
            .kfd
            .create_queue(&spec)
            .unwrap_or_else(|e| panic!("{}: {e}", env.name));
        let (event, slot) = env.context.signal_event(env.gpu_id).unwrap();
        let mut packets = pm4::write_data(data.va(), &[0x12]).unwrap();
        packets.extend([
            pm4::header(pm4::IT_RELEASE_MEM, 7),
            1 << 22 | 1 << 21 | 3 << 25 | 0x14 | 5 << 8,
            2 << 29 | 2 << 24,
            lo(slot),
            hi(slot),
            event.id(),
            0,
            event.id(),
        ]);
        let bytes: Vec<u8> = packets.iter().flat_map(|d| d.to_le_bytes()).collect();
        ring.map_cpu().unwrap().write_slice(&bytes, 0).unwrap();
        let ptrs = pointers.map_cpu().unwrap();
        ptrs.write_slice(&(packets.len() as u64).to_le_bytes(), 8)
            .unwrap();
        let gfx = env.gfx_major();
        let doorbells = env
            .kfd
            .map_doorbells(env.gpu_id, gfx, env.va.addr() + (900 << 20))
            .expect("doorbells");
        doorbells
            .ring(q.doorbell_in_page(&doorbells), packets.len() as u64)
            .unwrap();
        let woke = env.kfd.wait_events(&[&event], false, 10_000).unwrap();
        assert!(
            matches!(woke, kfd_ioctl::WaitOutcome::Complete(_)),
            "{}",
            env.name
        );
        assert_eq!(dwords(&data.map_cpu().unwrap(), 0, 1), [0x12]);
        assert_eq!(
            dwords(&ptrs, 0, 1),
            [packets.len() as u32],
            "the read pointer"
        );
        q.close().unwrap();
    });
}
