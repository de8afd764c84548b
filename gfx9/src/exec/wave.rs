//! The state the families share: a wave's registers ([`Wave`]), what it reaches ([`Ctx`],
//! [`Memory`], [`CodeCache`]), how it stops ([`Flow`], [`ExecError`]) and operand access as
//! the guide's operand tables define it (inline constants by type, the literal, register
//! pairs, VCC/EXEC halves). `exec/mod.rs` re-exports it all; the families use it from here, so
//! the module graph stays acyclic (exec -> salu/valu/mem -> wave).

use super::plan::Slot;
use crate::decode;
use crate::error::DecodeError;
use crate::inst::Inst;
use crate::opcode::Opcode;
use crate::operand::{FloatConst, Operand, Special};
use std::collections::HashMap;

/// Lanes per wave at most (wave64: every gfx9 compute wave; a gfx11 wave32 wave uses lanes
/// 0..32 of them, [`Wave::wave32`]).
pub const LANES: usize = 64;
/// Scalar registers a wave holds: `s0`..`s105` (gfx11 addresses 106; gfx9 codes stop at
/// `s101`, its 102..=105 naming FLAT_SCRATCH and XNACK_MASK instead).
pub const SGPRS: usize = 106;
/// Vector registers a wave can address (`v0`..`v255`), and as many AGPRs on gfx90a.
pub const VGPRS: usize = 256;

/// The GPU generation an instruction stream is for: where gfx9 targets differ in semantics
/// (not only in encoding), the executor asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// gfx906 (Vega 20, MI50/MI60, Radeon VII).
    Gfx906,
    /// gfx908 (MI100): AGPRs for MFMA only.
    Gfx908,
    /// gfx90a (MI200): unified VGPR/AGPR file, packed f32 math.
    Gfx90a,
    /// gfx942 (MI300).
    Gfx942,
    /// gfx11 (RDNA3: gfx1100..gfx1103, gfx1150, gfx1151): decoded by [`crate::gfx11`] into
    /// the same operations; waves are wave32 or wave64 ([`Wave::wave32`]).
    Gfx11,
}

impl Target {
    /// Whether the target's code is gfx11's (RDNA3) encoding.
    pub fn is_gfx11(self) -> bool {
        self == Self::Gfx11
    }
}

/// Why the GPU refused a memory access: the address, and whether it was a write. The
/// [`Memory`] decides (an unmapped page, a read-only mapping, XNACK off and not resident).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("GPU memory fault at {addr:#x} ({})", if *.write { "write" } else { "read" })]
pub struct Fault {
    /// The faulting virtual address.
    pub addr: u64,
    /// Whether the access was a write (atomics count as writes).
    pub write: bool,
}

/// The GPU's view of memory, as one dispatch sees it: addresses are GPU virtual addresses
/// (the process's GPUVM); LDS and the private aperture are translated before they get here.
///
/// Implementations must be safe to call from several threads at once (waves of different
/// workgroups run in parallel). An access is all-or-nothing per call: the executor calls per
/// lane (or per naturally aligned dword run), never across a page it has not been given.
pub trait Memory: Sync {
    /// Reads `buf.len()` bytes at `addr`.
    ///
    /// # Errors
    ///
    /// The [`Fault`] when any byte is not readable by the GPU.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault>;

    /// Reads `buf.len()` bytes at `addr` speculatively: the instruction fetch reading past the
    /// instruction it needs (a prefetch the wave may never execute). A fault here must have no
    /// effect beyond the error (the host reports no VM fault for it); by default a [`read`].
    ///
    /// # Errors
    ///
    /// The [`Fault`] when any byte is not readable by the GPU.
    ///
    /// [`read`]: Memory::read
    fn read_ahead(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.read(addr, buf)
    }

    /// Writes `data` at `addr`.
    ///
    /// # Errors
    ///
    /// The [`Fault`] when any byte is not writable by the GPU.
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Fault>;

    /// An atomic read-modify-write of the naturally aligned `size`-byte (4 or 8) value at
    /// `addr`: `f` gets the old value and returns the new one, atomically with respect to every
    /// other access through this `Memory` (and, where the memory is shared with the CPU, with
    /// the CPU's atomics). Returns the old value.
    ///
    /// # Errors
    ///
    /// The [`Fault`] when the value is not writable by the GPU.
    fn atomic(&self, addr: u64, size: u8, f: &mut dyn FnMut(u64) -> u64) -> Result<u64, Fault>;

    /// The GPU's global wave sync resources, when the dispatch's queue has them (KFD's
    /// `AMDKFD_IOC_ALLOC_QUEUE_GWS`); `None` (the default): a `ds_gws_*` instruction stops the
    /// wave with [`ExecError::Illegal`].
    fn gws(&self) -> Option<&crate::gws::Gws> {
        None
    }
}

/// How a wave stopped executing, when not by its own `s_endpgm`: the condition the command
/// processor would turn into a queue error. `pc` is the address of the instruction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// The instruction at `pc` does not decode.
    #[error("illegal instruction at {pc:#x}: {err}")]
    Decode {
        /// Its address.
        pc: u64,
        /// Why.
        err: DecodeError,
    },
    /// The instruction decodes but this interpreter does not execute it (yet).
    #[error("{op} at {pc:#x} is not implemented by the interpreter")]
    Unimplemented {
        /// Its address.
        pc: u64,
        /// The operation.
        op: Opcode,
    },
    /// The instruction is not valid as used (an operand the operation does not accept).
    #[error("illegal use of {op} at {pc:#x}: {why}")]
    Illegal {
        /// Its address.
        pc: u64,
        /// The operation.
        op: Opcode,
        /// What is wrong.
        why: &'static str,
    },
    /// Fetching the instruction or a memory access faulted.
    #[error("at {pc:#x}: {fault}")]
    Memory {
        /// The address of the instruction.
        pc: u64,
        /// The access.
        fault: Fault,
    },
}

/// What a wave does after an instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Go on at [`Wave::pc`].
    Continue,
    /// `s_barrier`: wait until every wave of the workgroup reaches one.
    Barrier,
    /// `s_endpgm`: the wave is done.
    End,
    /// `s_trap` with this trap id: the wave is at the trap handler's entry (its inputs set)
    /// and the dispatcher decides what runs next (see [`crate::dispatch::Observer::trap`]).
    Trap(u16),
    /// `s_sendmsg` with this SIMM16 (the message id in bits 3:0, its operation in 6:4): the
    /// wave is past it; the dispatcher hands the message to whoever receives it
    /// ([`crate::dispatch::Observer::message`]: the SPI, the host's interrupt handler).
    Message(u16),
    /// gfx11's `s_sendmsg_rtn` of a message only the SPI can answer (the doorbell, the trap
    /// handler's TBA/TMA...): the wave is past it, and the dispatcher writes the answer
    /// ([`crate::dispatch::Observer::message_rtn`]) with [`MessageRtn::answer`].
    MessageRtn(MessageRtn),
    /// `s_sleep`/`s_sethalt`: yield to other waves.
    Yield,
    /// A `ds_gws_sema_p` or `ds_gws_barrier` that must wait: the wave is past the
    /// instruction and goes on once [`Gws::poll`](crate::gws::Gws::poll) releases it.
    GwsWait(crate::gws::GwsWait),
}

/// An `s_sendmsg_rtn_b32`/`_b64` waiting for its answer ([`Flow::MessageRtn`]): "the
/// message's return value is written to SDST" once the SPI answers (RDNA3 ISA guide,
/// `S_SENDMSG_RTN_B32`/`_B64`; the wave waits for it with `s_waitcnt lgkmcnt(0)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageRtn {
    /// The message id (SSRC0: `MSG_RTN_GET_DOORBELL` 128, `GET_DDID` 129, `GET_TMA` 130,
    /// `GET_REALTIME` 131, `SAVE_WAVE` 132, `GET_TBA` 133: LLVM's `SIDefines.h`).
    pub msg: u16,
    /// SDST.
    pub dst: Operand,
    /// `_b64`: SDST is a register pair.
    pub wide: bool,
    /// The instruction's address (for errors).
    pub pc: u64,
}

impl MessageRtn {
    /// Writes the SPI's `answer` to SDST (the low 32 bits for `_b32`).
    ///
    /// # Errors
    ///
    /// [`ExecError::Unimplemented`] when nothing answers (`None`: a message the dispatcher's
    /// observer does not model); [`ExecError::Illegal`] for a destination that is not a
    /// scalar register (pair).
    pub fn answer(self, w: &mut Wave, answer: Option<u64>) -> Result<(), ExecError> {
        let op = Opcode::Gfx11(if self.wide {
            crate::opcode::Gfx11Op::SSendmsgRtnB64
        } else {
            crate::opcode::Gfx11Op::SSendmsgRtnB32
        });
        let Some(v) = answer else {
            return Err(ExecError::Unimplemented { pc: self.pc, op });
        };
        let ok = if self.wide {
            w.write_scalar64(self.dst, v)
        } else {
            w.write_scalar32(self.dst, v as u32)
        };
        if ok {
            Ok(())
        } else {
            Err(ExecError::Illegal {
                pc: self.pc,
                op,
                why: "a destination that is not a scalar register",
            })
        }
    }
}

/// One wave's architectural state.
#[derive(Clone)]
pub struct Wave {
    /// The byte address of the next instruction.
    pub pc: u64,
    /// `s0`..`s101`.
    pub sgpr: [u32; SGPRS],
    /// VCC, the vector condition code (`vcc_lo` is bits 0..32).
    pub vcc: u64,
    /// EXEC, the lane mask.
    pub exec: u64,
    /// M0.
    pub m0: u32,
    /// SCC, the scalar condition code.
    pub scc: bool,
    /// FLAT_SCRATCH (`flat_scratch_lo`/`_hi`): the wave's scratch base for FLAT scratch access.
    pub flat_scratch: u64,
    /// XNACK_MASK.
    pub xnack_mask: u64,
    /// `ttmp0`..`ttmp15`.
    pub ttmp: [u32; 16],
    /// Hardware registers `s_getreg`/`s_setreg` reach (MODE, STATUS, TRAPSTS, HW_ID...), by
    /// the guide's HW_REG id.
    pub hwreg: [u32; 32],
    /// `v0`..`v255`, one array of 64 lanes per register.
    pub vgpr: Vec<[u32; LANES]>,
    /// `a0`..`a255` (gfx908/gfx90a accumulation registers).
    pub agpr: Vec<[u32; LANES]>,
    /// The apertures of the flat address space and the wave's private memory.
    pub apertures: Apertures,
    /// The target.
    pub target: Target,
    /// A wave32 wave (gfx11, `ENABLE_WAVEFRONT_SIZE32`): lanes 32..64 are never active (EXEC,
    /// VCC and the lane masks VALU instructions read and write are 32 bits: RDNA3 ISA
    /// guide, "Wave32 and Wave64"; [`Wave::read_mask`], [`Wave::write_mask`]).
    pub wave32: bool,
}

/// Where the flat address space's LDS and private apertures are (`SH_MEM_BASES`, read by
/// `src_shared_base` / `src_private_base`), and the wave's private memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Apertures {
    /// The 64-bit base of the shared (LDS) aperture: a flat address in
    /// `shared_base..shared_base + 4 GiB` is an LDS address.
    pub shared_base: u64,
    /// The 64-bit base of the private (scratch) aperture.
    pub private_base: u64,
    /// The GPU virtual address of this wave's private memory (its scratch slot).
    pub scratch_base: u64,
    /// Bytes of private memory per lane.
    pub scratch_per_lane: u32,
}

impl Wave {
    /// A wave for `target` with every register zero, EXEC all ones, at `pc`.
    pub fn new(target: Target, pc: u64) -> Self {
        Self {
            pc,
            sgpr: [0; SGPRS],
            vcc: 0,
            exec: u64::MAX,
            m0: 0,
            scc: false,
            flat_scratch: 0,
            xnack_mask: 0,
            ttmp: [0; 16],
            hwreg: [0; 32],
            vgpr: vec![[0; LANES]; VGPRS],
            agpr: vec![[0; LANES]; VGPRS],
            apertures: Apertures::default(),
            target,
            wave32: false,
        }
    }
}

impl std::fmt::Debug for Wave {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wave")
            .field("pc", &format_args!("{:#x}", self.pc))
            .field("exec", &format_args!("{:#x}", self.exec))
            .field("vcc", &format_args!("{:#x}", self.vcc))
            .field("scc", &self.scc)
            .field("m0", &self.m0)
            .finish_non_exhaustive()
    }
}

/// What an instruction reaches besides its wave: memory, the workgroup's LDS and the decoded
/// code.
pub struct Ctx<'a> {
    /// Global memory.
    pub mem: &'a dyn Memory,
    /// The workgroup's LDS allocation (accesses beyond it read 0 and drop writes, as the
    /// guide's LDS range check does).
    pub lds: &'a mut [u8],
    /// Decoded instructions.
    pub code: &'a mut CodeCache,
}

impl std::fmt::Debug for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("lds_bytes", &self.lds.len())
            .field("code", &self.code.len())
            .finish_non_exhaustive()
    }
}

/// Decoded instructions by address, so a loop decodes once. One per thread running waves
/// (decoding is cheap; sharing would cost a lock per instruction).
///
/// Kept per 4 KiB code page, a slot per dword (an instruction starts on a dword), with the
/// page of the last hit remembered: a hit is two compares and an index, not a hash; another
/// page is one hash lookup. At most [`CodeCache::MAX_PAGES`] pages are held (a kernel that
/// jumps through more code than that, as a hostile one may, starts the cache afresh rather
/// than growing the emulator without bound).
///
/// A cache may outlive a dispatch (`dispatch::Pool` keeps each thread's for the next
/// dispatch of its queue): each page remembers the bytes its instructions were decoded from
/// ([`PageSource`]), and after [`begin_dispatch`](Self::begin_dispatch) the first fetch from
/// a page reads those bytes again and compares them; a page whose bytes changed (a code object
/// loaded again at the same address, code patched by the host or another agent) is decoded
/// afresh. So a dispatch runs the code its memory holds when its thread first fetches from each
/// page — what a fresh cache would decode — and a kernel dispatched again decodes nothing.
#[derive(Debug, Default)]
pub struct CodeCache {
    /// (page address, its slots).
    pages: Vec<(u64, Box<[Slot]>)>,
    /// What each page of `pages` was decoded from (same index).
    sources: Vec<PageSource>,
    /// The index in `pages` of each page.
    index: HashMap<u64, usize>,
    /// The index in `pages` of the last page hit.
    last: usize,
    /// Instructions decoded.
    count: usize,
    /// The code is gfx11's ([`crate::gfx11::decode`]), not gfx9's.
    gfx11: bool,
    /// The dispatch being run ([`begin_dispatch`](Self::begin_dispatch)): a page whose
    /// [`PageSource::checked`] differs is compared with memory before it is used.
    epoch: u64,
}

/// The bytes a cached page's instructions were decoded from: the page's dwords, those read
/// marked in `read`. (An instruction that runs past the page's end is never cached:
/// `fetch_miss` decodes into the cache only what lies in the page.)
#[derive(Debug)]
struct PageSource {
    words: Box<[u32; SOURCE_WORDS]>,
    read: [u64; SOURCE_WORDS.div_ceil(64)],
    /// The first and one past the last dword read (`lo >= hi`: none).
    lo: usize,
    hi: usize,
    /// The [`CodeCache::epoch`] in which these bytes were last found in memory.
    checked: u64,
}

/// A page's dwords.
const SOURCE_WORDS: usize = SLOTS;

impl PageSource {
    fn new(epoch: u64) -> Self {
        Self {
            words: Box::new([0; SOURCE_WORDS]),
            read: [0; SOURCE_WORDS.div_ceil(64)],
            lo: SOURCE_WORDS,
            hi: 0,
            checked: epoch,
        }
    }

    fn was_read(&self, i: usize) -> bool {
        self.read[i / 64] >> (i % 64) & 1 != 0
    }

    /// The first and one past the last dword read, if any.
    fn span(&self) -> Option<(usize, usize)> {
        (self.lo < self.hi).then_some((self.lo, self.hi))
    }

    /// Records `words` read from dword `at` on; false (nothing recorded) when a dword read
    /// before holds something else now (the page's instructions were decoded from bytes that
    /// no longer agree: the caller drops the page).
    fn record(&mut self, at: usize, words: &[u32]) -> bool {
        let end = (at + words.len()).min(SOURCE_WORDS);
        let fresh = (at..end).all(|i| !self.was_read(i) || self.words[i] == words[i - at]);
        if fresh && at < end {
            for i in at..end {
                self.words[i] = words[i - at];
                self.read[i / 64] |= 1 << (i % 64);
            }
            self.lo = self.lo.min(at);
            self.hi = self.hi.max(end);
        }
        fresh
    }
}

/// Bytes fetched at a time on a miss: a run of instructions decoded together.
const FETCH: usize = 256;
/// Dword slots per code page.
const SLOTS: usize = 1024;

impl CodeCache {
    /// Code pages held at most (each 1024 slots, about 70 KiB).
    pub const MAX_PAGES: usize = 512;

    /// Code pages held now.
    pub fn pages(&self) -> usize {
        self.pages.len()
    }

    /// An empty cache for gfx9 code.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty cache for `target`'s code (its decoder: gfx9's or gfx11's).
    pub fn for_target(target: Target) -> Self {
        Self {
            gfx11: target.is_gfx11(),
            ..Self::default()
        }
    }

    /// Drops every decoded instruction (`s_icache_inv`), keeping the decoder.
    pub fn clear(&mut self) {
        *self = Self {
            gfx11: self.gfx11,
            epoch: self.epoch,
            ..Self::default()
        };
    }

    /// Whether this cache decodes `target`'s code.
    pub fn decodes(&self, target: Target) -> bool {
        self.gfx11 == target.is_gfx11()
    }

    /// Starts a new dispatch with this cache: each cached page is compared with memory at its
    /// first fetch (see the type's docs), so code changed since the last dispatch is decoded
    /// again and code unchanged is not.
    pub fn begin_dispatch(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        // The remembered page too goes through the check.
        self.last = usize::MAX;
    }

    /// Whether cached page `i`'s bytes are still what memory holds (read with
    /// [`Memory::read_ahead`]: a check reports no fault; one that fails drops the page and
    /// the fetch that follows reports it).
    fn unchanged(&self, mem: &dyn Memory, i: usize) -> bool {
        let (page, src) = (self.pages[i].0, &self.sources[i]);
        let Some((first, end)) = src.span() else {
            return false;
        };
        let mut buf = [0u8; 4 * SOURCE_WORDS];
        let bytes = &mut buf[..4 * (end - first)];
        if mem.read_ahead(page + 4 * first as u64, bytes).is_err() {
            return false;
        }
        bytes.chunks_exact(4).enumerate().all(|(k, c)| {
            let i = first + k;
            !src.was_read(i) || src.words[i] == u32::from_le_bytes([c[0], c[1], c[2], c[3]])
        })
    }

    /// Empties cached page `i` (its bytes changed): its slots and what they were decoded from.
    fn forget(&mut self, i: usize) {
        let dropped = self.pages[i].1.iter().filter(|s| s.inst.is_some()).count();
        self.count = self.count.saturating_sub(dropped);
        self.pages[i].1.fill(Slot::default());
        self.sources[i] = PageSource::new(self.epoch);
    }

    /// Decodes one instruction with this cache's decoder.
    fn decode_one(&self, words: &[u32]) -> Result<Inst, DecodeError> {
        if self.gfx11 {
            crate::gfx11::decode(words)
        } else {
            decode(words)
        }
    }

    /// Decoded instructions held.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether nothing is decoded yet.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The cached instruction at `pc` (`pc` dword-aligned), remembering its page.
    #[inline]
    fn get(&mut self, pc: u64) -> Option<&Inst> {
        self.slot(pc).and_then(|s| s.inst.as_ref())
    }

    /// The slot of `pc` (`pc` dword-aligned) when its page is cached, remembering the page.
    #[inline]
    pub(crate) fn slot(&mut self, pc: u64) -> Option<&mut Slot> {
        let page = pc & !4095;
        let slot = (pc & 4095) as usize / 4;
        if self.pages.get(self.last).is_some_and(|(p, _)| *p == page) {
            return Some(&mut self.pages[self.last].1[slot]);
        }
        let i = *self.index.get(&page)?;
        // Not compared with memory since this dispatch began: `fetch_miss` does it.
        if self.sources[i].checked != self.epoch {
            return None;
        }
        self.last = i;
        Some(&mut self.pages[i].1[slot])
    }

    /// The page of `pc` when it is cached: its address and its slots (`exec::steps` runs
    /// planned instructions from them while the PC stays in the page), remembering it.
    #[inline]
    pub(crate) fn page(&mut self, pc: u64) -> Option<(u64, &mut [Slot])> {
        let page = pc & !4095;
        if self.pages.get(self.last).is_none_or(|(p, _)| *p != page) {
            let i = *self.index.get(&page)?;
            // Not compared with memory since this dispatch began: `fetch_miss` does it (as
            // for `slot`).
            if self.sources[i].checked != self.epoch {
                return None;
            }
            self.last = i;
        }
        let (p, slots) = &mut self.pages[self.last];
        Some((*p, slots))
    }

    /// The cached instruction at `pc`, by reference (`None`: not cached, or `pc` not
    /// dword-aligned): the hot path of [`crate::exec::step`], which copies it once (a copy
    /// through `Option`/`Result` wrappers moves the 68 bytes at shifted offsets, and the
    /// reload stalls on store forwarding).
    #[inline]
    pub(crate) fn cached(&mut self, pc: u64) -> Option<&Inst> {
        if pc.is_multiple_of(4) {
            self.get(pc)
        } else {
            None
        }
    }

    /// Caches `inst` at `pc` (dword-aligned) unless something is there.
    fn insert(&mut self, pc: u64, inst: Inst) {
        let page = pc & !4095;
        let i = match self.index.get(&page) {
            Some(&i) => i,
            None => {
                if self.pages.len() >= Self::MAX_PAGES {
                    self.pages.clear();
                    self.sources.clear();
                    self.index.clear();
                    self.last = 0;
                    self.count = 0;
                }
                self.index.insert(page, self.pages.len());
                self.pages
                    .push((page, vec![Slot::default(); SLOTS].into_boxed_slice()));
                self.sources.push(PageSource::new(self.epoch));
                self.pages.len() - 1
            }
        };
        let slot = &mut self.pages[i].1[(pc & 4095) as usize / 4];
        if slot.inst.is_none() {
            slot.inst = Some(inst);
            self.count += 1;
        }
    }

    /// The instruction at `pc`, decoded on first use: a miss reads up to 256 bytes
    /// (never past the page of `pc` plus what the last instruction needs) and decodes every
    /// instruction in them.
    ///
    /// # Errors
    ///
    /// [`ExecError::Memory`] when the code is not readable, [`ExecError::Decode`] when the
    /// instruction at `pc` does not decode.
    #[inline]
    pub fn fetch(&mut self, mem: &dyn Memory, pc: u64) -> Result<Inst, ExecError> {
        // Branches keep the PC dword-aligned; a misaligned one (`s_setpc` of a bad
        // address) is decoded where it points, uncached.
        if let Some(inst) = self.cached(pc) {
            return Ok(*inst);
        }
        self.fetch_miss(mem, pc)
    }

    /// [`Self::fetch`] of an instruction not cached: read, decode, cache.
    #[cold]
    #[inline(never)]
    pub(crate) fn fetch_miss(&mut self, mem: &dyn Memory, pc: u64) -> Result<Inst, ExecError> {
        let aligned = pc.is_multiple_of(4);
        // A page cached by an earlier dispatch: used again if its bytes are unchanged.
        if let Some(&i) = self.index.get(&(pc & !4095))
            && self.sources[i].checked != self.epoch
        {
            if !self.unchanged(mem, i) {
                self.forget(i);
            }
            self.sources[i].checked = self.epoch;
            if let Some(inst) = self.get(pc).copied().filter(|_| aligned) {
                return Ok(inst);
            }
        }
        // Read to the end of the page of `pc` (at most FETCH bytes), then two more dwords
        // for an instruction that straddles the end, if readable.
        let to_page_end = (4096 - (pc & 4095)) as usize;
        let main = to_page_end.min(FETCH);
        let mut bytes = vec![0u8; main + 8];
        mem.read(pc, &mut bytes[..main])
            .map_err(|fault| ExecError::Memory { pc, fault })?;
        let len = if mem.read_ahead(pc + main as u64, &mut bytes[main..]).is_ok() {
            main + 8
        } else {
            main
        };
        let words: Vec<u32> = bytes[..len]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if aligned {
            // What the page's instructions are decoded from (the dwords read in the page);
            // bytes that disagree with an earlier read of this dispatch (changed meanwhile)
            // empty the page first, so that no slot holds an instruction decoded from other
            // bytes than those recorded.
            let page = pc & !4095;
            let at_word = (pc & 4095) as usize / 4;
            let code = &words[..main / 4];
            if let Some(&i) = self.index.get(&page)
                && !self.sources[i].record(at_word, code)
            {
                self.forget(i);
                self.sources[i].record(at_word, code);
            }
            let mut at = 0;
            while at < code.len() {
                let Ok(inst) = self.decode_one(&code[at..]) else {
                    break;
                };
                let new_page = !self.index.contains_key(&page);
                self.insert(pc + 4 * at as u64, inst);
                if new_page && let Some(&i) = self.index.get(&page) {
                    self.sources[i].record(at_word, code);
                }
                at += usize::from(inst.dwords);
            }
        }
        match self.get(pc).copied().filter(|_| aligned) {
            Some(inst) => Ok(inst),
            None => self
                .decode_one(&words)
                .map_err(|err| ExecError::Decode { pc, err }),
        }
    }
}

/// The type an operation reads an operand as: it decides what an inline float constant is
/// (the guide, 4.x "Inline constants": the constant in the operation's float format; for
/// integer operations, the f32 bits for 32-bit operands and the f64 bits for 64-bit ones)
/// and how a literal widens to 64 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// A 16-bit integer or f16 operand: float constants are f16 bits.
    F16,
    /// A 32-bit operand (integer or f32): float constants are f32 bits.
    B32,
    /// A 64-bit integer operand: float constants are f64 bits; a literal is zero-extended.
    B64,
    /// A 64-bit float operand: float constants are f64 bits; a literal is the high half.
    F64,
}

/// The bits of an inline float constant in format `ty`.
pub fn float_const(c: FloatConst, ty: Ty) -> u64 {
    match ty {
        Ty::F16 => u64::from(match c {
            FloatConst::Half => 0x3800u16,
            FloatConst::NegHalf => 0xb800,
            FloatConst::One => 0x3c00,
            FloatConst::NegOne => 0xbc00,
            FloatConst::Two => 0x4000,
            FloatConst::NegTwo => 0xc000,
            FloatConst::Four => 0x4400,
            FloatConst::NegFour => 0xc400,
            FloatConst::InvTwoPi => 0x3118,
        }),
        Ty::B32 => match c {
            // 1/(2π) as the hardware's f32 constant (0x3e22f983).
            FloatConst::InvTwoPi => 0x3e22_f983,
            other => u64::from((other.value() as f32).to_bits()),
        },
        Ty::B64 | Ty::F64 => match c {
            FloatConst::InvTwoPi => 0x3fc4_5f30_6dc9_c882,
            other => other.value().to_bits(),
        },
    }
}

/// A constant operand (an inline integer or float constant, the literal) as
/// [`Wave::read_scalar32`] reads it as type `ty`; `None` for any other operand. The same for
/// every wave: the fast path plans it once ([`crate::exec::CodeCache`]).
pub(crate) fn constant32(op: Operand, ty: Ty) -> Option<u32> {
    Some(match op {
        Operand::Int(i) => match ty {
            Ty::F16 => u32::from(i as i16 as u16),
            _ => i as i32 as u32,
        },
        Operand::Float(c) => match ty {
            // A 64-bit constant read as 32 bits is its high half (only reached by the
            // callers of read_scalar64 halves; keep it total).
            Ty::B64 | Ty::F64 => (float_const(c, ty) >> 32) as u32,
            _ => float_const(c, ty) as u32,
        },
        Operand::Literal(v) => v,
        _ => return None,
    })
}

impl Wave {
    /// Reads a 32-bit (or 16-bit, `ty` = [`Ty::F16`]) scalar operand: an SGPR, a special
    /// register, a constant or the literal. A VGPR operand is not scalar: `None`.
    pub fn read_scalar32(&self, op: Operand, ty: Ty) -> Option<u32> {
        Some(match op {
            Operand::Sgpr(n) => *self.sgpr.get(usize::from(n))?,
            Operand::Ttmp(n) => *self.ttmp.get(usize::from(n))?,
            Operand::Special(s) => self.special(s),
            Operand::Int(_) | Operand::Float(_) | Operand::Literal(_) => constant32(op, ty)?,
            Operand::Vgpr(_) | Operand::None => return None,
        })
    }

    /// Reads a 64-bit scalar operand: an SGPR pair (an odd first register names the even pair
    /// below, as the hardware ignores bit 0), VCC, EXEC, FLAT_SCRATCH, XNACK_MASK, a ttmp pair,
    /// a constant (integers sign-extended) or the literal (see [`Ty`]).
    pub fn read_scalar64(&self, op: Operand, ty: Ty) -> Option<u64> {
        Some(match op {
            Operand::Sgpr(n) => {
                let n = usize::from(n & !1);
                u64::from(*self.sgpr.get(n)?) | u64::from(*self.sgpr.get(n + 1)?) << 32
            }
            Operand::Ttmp(n) => {
                let n = usize::from(n & !1);
                u64::from(*self.ttmp.get(n)?) | u64::from(*self.ttmp.get(n + 1)?) << 32
            }
            Operand::Special(Special::VccLo | Special::VccHi) => self.vcc,
            Operand::Special(Special::ExecLo | Special::ExecHi) => self.exec,
            Operand::Special(Special::FlatScratchLo | Special::FlatScratchHi) => self.flat_scratch,
            Operand::Special(Special::XnackMaskLo | Special::XnackMaskHi) => self.xnack_mask,
            Operand::Special(s) => u64::from(self.special(s)),
            Operand::Int(i) => i as i64 as u64,
            Operand::Float(c) => float_const(c, ty),
            Operand::Literal(v) => match ty {
                Ty::F64 => u64::from(v) << 32,
                _ => u64::from(v),
            },
            Operand::Vgpr(_) | Operand::None => return None,
        })
    }

    /// A 32-bit special-register source.
    fn special(&self, s: Special) -> u32 {
        match s {
            Special::FlatScratchLo => self.flat_scratch as u32,
            Special::FlatScratchHi => (self.flat_scratch >> 32) as u32,
            Special::XnackMaskLo => self.xnack_mask as u32,
            Special::XnackMaskHi => (self.xnack_mask >> 32) as u32,
            Special::VccLo => self.vcc as u32,
            Special::VccHi => (self.vcc >> 32) as u32,
            Special::M0 => self.m0,
            Special::ExecLo => self.exec as u32,
            Special::ExecHi => (self.exec >> 32) as u32,
            // The aperture registers read the high 32 bits of the aperture's base and limit
            // (the guide, "src_shared_base": "the 32-bit high address of the base").
            Special::SharedBase => (self.apertures.shared_base >> 32) as u32,
            Special::SharedLimit => ((self.apertures.shared_base >> 32) as u32) | 0xffff,
            Special::PrivateBase => (self.apertures.private_base >> 32) as u32,
            Special::PrivateLimit => ((self.apertures.private_base >> 32) as u32) | 0xffff,
            Special::PopsExitingWaveId => 0,
            Special::Vccz => u32::from(self.vcc & self.lane_mask() == 0),
            // gfx11's `null`: reads zero.
            Special::Null => 0,
            Special::Execz => u32::from(self.exec == 0),
            Special::Scc => u32::from(self.scc),
            // The VALU reads `lds_direct` from LDS before it gets here (`valu::lds_direct`);
            // no other family takes it as a source.
            Special::LdsDirect => 0,
        }
    }

    /// Writes a 32-bit scalar destination. Writes to read-only operands are dropped; `false`
    /// when `op` is not a scalar destination at all.
    pub fn write_scalar32(&mut self, op: Operand, v: u32) -> bool {
        match op {
            Operand::Sgpr(n) => match self.sgpr.get_mut(usize::from(n)) {
                Some(r) => *r = v,
                None => return false,
            },
            Operand::Ttmp(n) => match self.ttmp.get_mut(usize::from(n)) {
                Some(r) => *r = v,
                None => return false,
            },
            Operand::Special(s) => match s {
                // gfx11's `null` takes writes and drops them.
                Special::Null => {}
                // A wave32 wave's EXEC is 32 bits: EXEC_HI stays zero.
                Special::ExecHi if self.wave32 => {}
                Special::VccLo => self.vcc = (self.vcc & !0xffff_ffff) | u64::from(v),
                Special::VccHi => self.vcc = (self.vcc & 0xffff_ffff) | u64::from(v) << 32,
                Special::ExecLo => self.exec = (self.exec & !0xffff_ffff) | u64::from(v),
                Special::ExecHi => self.exec = (self.exec & 0xffff_ffff) | u64::from(v) << 32,
                Special::M0 => self.m0 = v,
                Special::FlatScratchLo => {
                    self.flat_scratch = (self.flat_scratch & !0xffff_ffff) | u64::from(v)
                }
                Special::FlatScratchHi => {
                    self.flat_scratch = (self.flat_scratch & 0xffff_ffff) | u64::from(v) << 32
                }
                Special::XnackMaskLo => {
                    self.xnack_mask = (self.xnack_mask & !0xffff_ffff) | u64::from(v)
                }
                Special::XnackMaskHi => {
                    self.xnack_mask = (self.xnack_mask & 0xffff_ffff) | u64::from(v) << 32
                }
                _ => return false,
            },
            _ => return false,
        }
        true
    }

    /// Writes a 64-bit scalar destination (a pair, VCC, EXEC, FLAT_SCRATCH, XNACK_MASK, a
    /// ttmp pair); `false` when `op` is not one.
    pub fn write_scalar64(&mut self, op: Operand, v: u64) -> bool {
        match op {
            Operand::Sgpr(n) => {
                let n = usize::from(n & !1);
                if n + 1 >= SGPRS {
                    return false;
                }
                self.sgpr[n] = v as u32;
                self.sgpr[n + 1] = (v >> 32) as u32;
            }
            Operand::Ttmp(n) => {
                let n = usize::from(n & !1);
                if n + 1 >= 16 {
                    return false;
                }
                self.ttmp[n] = v as u32;
                self.ttmp[n + 1] = (v >> 32) as u32;
            }
            Operand::Special(Special::VccLo) => self.vcc = v,
            Operand::Special(Special::ExecLo) => self.exec = v & self.lane_mask(),
            Operand::Special(Special::Null) => {}
            Operand::Special(Special::FlatScratchLo) => self.flat_scratch = v,
            Operand::Special(Special::XnackMaskLo) => self.xnack_mask = v,
            _ => return false,
        }
        true
    }

    /// A vector source: a VGPR read per lane, or a scalar operand broadcast to every lane.
    pub fn vsrc32(&self, op: Operand, ty: Ty) -> Option<VSrc> {
        match op {
            Operand::Vgpr(n) => Some(VSrc::Vgpr(usize::from(n))),
            other => self.read_scalar32(other, ty).map(VSrc::Uniform),
        }
    }

    /// The value of a vector source in `lane`.
    #[inline]
    pub fn lane32(&self, src: VSrc, lane: usize) -> u32 {
        match src {
            VSrc::Uniform(v) => v,
            VSrc::Vgpr(r) => self.vgpr[r][lane],
        }
    }

    /// A 64-bit vector source: a VGPR pair per lane, or a 64-bit scalar operand.
    pub fn vsrc64(&self, op: Operand, ty: Ty) -> Option<VSrc64> {
        match op {
            Operand::Vgpr(n) if n < 255 => Some(VSrc64::Vgpr(usize::from(n))),
            Operand::Vgpr(_) => None,
            other => self.read_scalar64(other, ty).map(VSrc64::Uniform),
        }
    }

    /// The value of a 64-bit vector source in `lane`.
    #[inline]
    pub fn lane64(&self, src: VSrc64, lane: usize) -> u64 {
        match src {
            VSrc64::Uniform(v) => v,
            VSrc64::Vgpr(r) => {
                u64::from(self.vgpr[r][lane]) | u64::from(self.vgpr[r + 1][lane]) << 32
            }
        }
    }

    /// The lanes a wave has: all 64, or the low 32 of a wave32 wave.
    #[inline]
    pub fn lane_mask(&self) -> u64 {
        if self.wave32 {
            u64::from(u32::MAX)
        } else {
            u64::MAX
        }
    }

    /// The SGPRs the wave's target addresses: `s0`..`s101` on gfx9, `s0`..`s105` on gfx11
    /// (the bound of M0-relative moves and multi-register scalar loads).
    #[inline]
    pub fn sgpr_limit(&self) -> usize {
        if self.target.is_gfx11() { SGPRS } else { 102 }
    }

    /// The highest lane number (63, or 31 in wave32): a lane select's mask.
    #[inline]
    pub fn last_lane(&self) -> usize {
        if self.wave32 { 31 } else { 63 }
    }

    /// Reads a lane mask operand (VCC or an SGPR carry/condition source of a VALU
    /// instruction): 64 bits, or in a wave32 wave one 32-bit register (RDNA3 ISA guide,
    /// "Wave32 and Wave64": VCC_LO and single SGPRs hold a wave32 mask).
    pub fn read_mask(&self, op: Operand) -> Option<u64> {
        if self.wave32 {
            self.read_scalar32(op, Ty::B32).map(u64::from)
        } else {
            self.read_scalar64(op, Ty::B64)
        }
    }

    /// Writes a lane mask result (a VOPC result, a carry-out): an SGPR pair, VCC or EXEC, or
    /// in a wave32 wave one 32-bit register (the other half of the pair is left alone).
    pub fn write_mask(&mut self, op: Operand, v: u64) -> bool {
        if self.wave32 {
            self.write_scalar32(op, v as u32)
        } else {
            self.write_scalar64(op, v)
        }
    }

    /// Whether `lane` is enabled in EXEC.
    #[inline]
    pub fn active(&self, lane: usize) -> bool {
        self.exec >> lane & 1 == 1
    }
}

/// How many lanes from lane 0 a lane mask enables when it enables a whole wave's: 64 for
/// every lane, 32 for lanes 0..32 (a full wave32 wave's EXEC); `None` otherwise. The vector
/// ALU computes such a mask's lanes as one straight loop rather than one bit at a time.
#[inline]
pub(crate) fn full_lanes(mask: u64) -> Option<usize> {
    match mask {
        u64::MAX => Some(LANES),
        0xffff_ffff => Some(32),
        _ => None,
    }
}

/// A 32-bit vector source resolved once per instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VSrc {
    /// The same value in every lane (SGPR, constant, literal).
    Uniform(u32),
    /// A VGPR, by number.
    Vgpr(usize),
}

/// A 64-bit vector source resolved once per instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VSrc64 {
    /// The same value in every lane.
    Uniform(u64),
    /// A VGPR pair, by its first number.
    Vgpr(usize),
}

/// The error for an opcode the executor does not handle yet.
pub(crate) fn unimplemented(inst: &Inst, pc: u64) -> ExecError {
    ExecError::Unimplemented { pc, op: inst.op }
}

/// The error for an operand the operation does not accept.
pub(crate) fn illegal(inst: &Inst, pc: u64, why: &'static str) -> ExecError {
    ExecError::Illegal {
        pc,
        op: inst.op,
        why,
    }
}

// --- Added by the vector ALU (valu): how a wave's MODE register starts. ---

/// The MODE register (hardware register 1, `Wave::hwreg[1]`) a wave starts with, from its
/// kernel descriptor's COMPUTE_PGM_RSRC1 (LLVM AMDGPUUsage, "Kernel Descriptor": FLOAT_ROUND_MODE_32
/// 13:12, FLOAT_ROUND_MODE_16_64 15:14, FLOAT_DENORM_MODE_32 17:16, FLOAT_DENORM_MODE_16_64
/// 19:18, ENABLE_DX10_CLAMP 21, ENABLE_IEEE_MODE 23), laid out as the MI200 guide's MODE
/// register (FP_ROUND 3:0, FP_DENORM 7:4, DX10_CLAMP 8, IEEE 9). The vector ALU reads
/// FP_ROUND (each precision's rounding), FP_DENORM (flush or keep denormals per precision),
/// DX10_CLAMP and IEEE from it.
///
/// ```
/// // HIP's default: f32 and f16/f64 denormals kept, DX10 clamp and IEEE mode on.
/// let rsrc1 = 3 << 16 | 3 << 18 | 1 << 21 | 1 << 23;
/// assert_eq!(kfd_gfx9::exec::mode_from_rsrc1(rsrc1), 0x3f0);
/// ```
pub fn mode_from_rsrc1(rsrc1: u32) -> u32 {
    (rsrc1 >> 12 & 0xff) | (rsrc1 >> 21 & 1) << 8 | (rsrc1 >> 23 & 1) << 9
}
