//! A [`Pool`] kept from one dispatch to the next (what kfd-emu keeps per queue): a kernel
//! dispatched again decodes nothing and allocates nothing — its code is not read again, only
//! compared with memory once per page (one speculative read) — and code changed between two
//! dispatches, anywhere its instructions were decoded from (a literal in the next page
//! included), is decoded again: the second dispatch runs what memory holds. Allocated bytes are counted by a global allocator that
//! counts (the tests take one lock, so nothing else allocates meanwhile).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use kfd_gfx9::dispatch::{
    Dispatch, DispatchError, KernelDescriptor, Observer, Pool, RunOptions, Scratch, run_in,
};
use kfd_gfx9::exec::{Apertures, ExecError, Fault, Memory, Target, Wave};

struct Counting;

/// Bytes allocated.
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counter is atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(new_size as u64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// One test at a time (the allocation counts are the process's).
static SERIAL: Mutex<()> = Mutex::new(());

const CODE: u64 = 0x1_0000_0000;
const S_ENDPGM: u32 = 0xbf81_0000;
const S_NOP: u32 = 0xbf80_0000;
/// `s_mov_b32 s0, <literal>` (the literal follows).
const S_MOV_S0_LITERAL: u32 = 0xbe80_00ff;
/// `s_sendmsg sendmsg(MSG_INTERRUPT)`.
const S_SENDMSG_INTERRUPT: u32 = 0xbf90_0001;

/// Two pages of code the test patches between dispatches; reads counted.
struct Code {
    bytes: Mutex<Vec<u8>>,
    reads: AtomicU64,
    peeks: AtomicU64,
}

impl Code {
    fn new() -> Code {
        Code {
            bytes: Mutex::new(vec![0; 2 * 4096]),
            reads: AtomicU64::new(0),
            peeks: AtomicU64::new(0),
        }
    }
    fn put(&self, at: u64, words: &[u32]) {
        let mut b = self.bytes.lock().unwrap();
        for (i, w) in words.iter().enumerate() {
            let o = (at - CODE) as usize + 4 * i;
            b[o..o + 4].copy_from_slice(&w.to_le_bytes());
        }
    }
    fn get(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let fault = Fault { addr, write: false };
        let off = usize::try_from(addr.checked_sub(CODE).ok_or(fault)?).map_err(|_| fault)?;
        let b = self.bytes.lock().unwrap();
        buf.copy_from_slice(b.get(off..off + buf.len()).ok_or(fault)?);
        Ok(())
    }
}

impl Memory for Code {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.get(addr, buf)
    }
    fn read_ahead(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.peeks.fetch_add(1, Ordering::Relaxed);
        self.get(addr, buf)
    }
    fn write(&self, addr: u64, _: &[u8]) -> Result<(), Fault> {
        Err(Fault { addr, write: true })
    }
    fn atomic(&self, addr: u64, _: u8, _: &mut dyn FnMut(u64) -> u64) -> Result<u64, Fault> {
        Err(Fault { addr, write: true })
    }
}

/// Records `s0` at each wave's `s_sendmsg`.
#[derive(Default)]
struct Sent(Mutex<Vec<u32>>);

impl Observer for Sent {
    fn message(&self, _: [u32; 3], _: u32, w: &mut Wave, _: u16) {
        self.0.lock().unwrap().push(w.sgpr[0]);
    }
}

fn dispatch(entry: u64, groups: u32, items: u32) -> Dispatch {
    Dispatch {
        target: Target::Gfx90a,
        kd: KernelDescriptor::from_registers(0, 1 << 7, 0).expect("descriptor"),
        entry,
        grid: [groups * items, 1, 1],
        workgroup: [items, 1, 1],
        kernarg: 0,
        dispatch_ptr: 0,
        queue_ptr: 0,
        dispatch_id: 0,
        private_segment_size: 0,
        group_segment_size: 0,
        scratch: Scratch::default(),
        apertures: Apertures::default(),
        user_data: None,
    }
}

/// Runs `d` on one thread with `pool`; what the waves sent in `s0`.
fn run(d: &Dispatch, code: &Code, pool: &Pool) -> Result<Vec<u32>, DispatchError> {
    let sent = Sent::default();
    run_in(d, code, &RunOptions { threads: 1 }, &sent, pool)?;
    Ok(sent.0.into_inner().unwrap())
}

/// The second dispatch of a kernel with the same pool reads none of its code (one
/// speculative read compares the page) and allocates no wave registers and no decoded page
/// (less than 1 KiB in all: the dispatcher's small bookkeeping). Without the pool (a new one)
/// the same dispatch allocates both (a wave's registers alone are 128 KiB).
#[test]
fn a_kernel_dispatched_again_with_its_pool_decodes_and_allocates_nothing() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let code = Code::new();
    code.put(
        CODE,
        &[S_MOV_S0_LITERAL, 7, S_SENDMSG_INTERRUPT, S_NOP, S_ENDPGM],
    );
    // Four one-wave workgroups of 64 work-items, then the same again.
    let d = dispatch(CODE, 4, 64);
    let pool = Pool::default();
    assert_eq!(run(&d, &code, &pool).expect("first"), [7; 4]);
    let (reads, peeks) = (
        code.reads.load(Ordering::Relaxed),
        code.peeks.load(Ordering::Relaxed),
    );
    assert!(reads >= 1, "the first dispatch decoded its code");
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let sent = Sent(Mutex::new(Vec::with_capacity(8)));
    run_in(&d, &code, &RunOptions { threads: 1 }, &sent, &pool).expect("second");
    let allocated = ALLOCATIONS.load(Ordering::Relaxed) - before;
    assert_eq!(sent.0.into_inner().unwrap(), [7; 4]);
    assert_eq!(
        code.reads.load(Ordering::Relaxed),
        reads,
        "the second dispatch read code to decode it"
    );
    assert_eq!(
        code.peeks.load(Ordering::Relaxed) - peeks,
        1,
        "one comparison of the cached page with memory"
    );
    assert!(
        allocated < 1024,
        "the second dispatch allocated {allocated} bytes"
    );
    // A new pool: the waves' registers and the code page again.
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let sent = Sent(Mutex::new(Vec::with_capacity(8)));
    run_in(
        &d,
        &code,
        &RunOptions { threads: 1 },
        &sent,
        &Pool::default(),
    )
    .expect("fresh");
    assert!(ALLOCATIONS.load(Ordering::Relaxed) - before > 128 << 10);
    assert_eq!(code.reads.load(Ordering::Relaxed), reads + 1);
}

/// Code patched between two dispatches is what the next one runs: a literal changed, an
/// instruction replaced by one that does not decode (the dispatch then stops at it, as a fresh
/// cache would), and back.
#[test]
fn code_changed_between_dispatches_runs_as_changed() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let code = Code::new();
    code.put(CODE, &[S_MOV_S0_LITERAL, 1, S_SENDMSG_INTERRUPT, S_ENDPGM]);
    let d = dispatch(CODE, 2, 1);
    let pool = Pool::default();
    assert_eq!(run(&d, &code, &pool).expect("first"), [1, 1]);
    code.put(CODE + 4, &[2]);
    assert_eq!(run(&d, &code, &pool).expect("literal changed"), [2, 2]);
    code.put(CODE + 8, &[0xffff_ffff]);
    let err = run(&d, &code, &pool).expect_err("an instruction that does not decode");
    assert!(
        matches!(
            err,
            DispatchError::Wave {
                error: ExecError::Decode { pc, .. },
                ..
            } if pc == CODE + 8
        ),
        "{err:?}"
    );
    code.put(CODE + 8, &[S_SENDMSG_INTERRUPT]);
    assert_eq!(run(&d, &code, &pool).expect("restored"), [2, 2]);
}

/// An instruction at a page's end whose literal is the next page's first dword: a change of
/// that dword alone (the first page's own bytes unchanged) is seen by the next dispatch (such
/// an instruction is never cached).
#[test]
fn a_literal_past_the_page_end_changed_between_dispatches_is_seen() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let code = Code::new();
    let entry = CODE + 4092;
    code.put(
        entry,
        &[S_MOV_S0_LITERAL, 0x10, S_SENDMSG_INTERRUPT, S_ENDPGM],
    );
    let d = dispatch(entry, 1, 1);
    let pool = Pool::default();
    assert_eq!(run(&d, &code, &pool).expect("first"), [0x10]);
    assert_eq!(run(&d, &code, &pool).expect("again"), [0x10]);
    code.put(CODE + 4096, &[0x20]);
    assert_eq!(run(&d, &code, &pool).expect("changed"), [0x20]);
}
