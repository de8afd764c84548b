//! A workgroup costs the dispatcher no heap allocation once a thread has run one of its size:
//! a grid of 20 000 one-wave workgroups allocates no more than a grid of 200 (counted by a
//! global allocator that counts, one test in this binary so nothing else allocates meanwhile).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use kfd_gfx9::dispatch::{Dispatch, KernelDescriptor, NoObserver, RunOptions, Scratch, run};
use kfd_gfx9::exec::{Apertures, Fault, Memory, Target};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counter is atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const CODE: u64 = 0x1_0000_0000;

/// `v_mov_b32 v1, v0`, `s_add_u32 s0, s0, 1`, `s_endpgm`, then zeros to the page's end.
struct Code(Vec<u8>);

impl Memory for Code {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let fault = Fault { addr, write: false };
        let off = usize::try_from(addr.checked_sub(CODE).ok_or(fault)?).map_err(|_| fault)?;
        buf.copy_from_slice(self.0.get(off..off + buf.len()).ok_or(fault)?);
        Ok(())
    }
    fn write(&self, addr: u64, _: &[u8]) -> Result<(), Fault> {
        Err(Fault { addr, write: true })
    }
    fn atomic(&self, addr: u64, _: u8, _: &mut dyn FnMut(u64) -> u64) -> Result<u64, Fault> {
        Err(Fault { addr, write: true })
    }
}

fn allocations(mem: &Code, groups: u32, lds: u32) -> u64 {
    let d = Dispatch {
        target: Target::Gfx90a,
        kd: KernelDescriptor::from_registers(0, 1 << 7, 0).expect("descriptor"),
        entry: CODE,
        grid: [groups, 1, 1],
        workgroup: [1, 1, 1],
        kernarg: 0,
        dispatch_ptr: 0,
        queue_ptr: 0,
        dispatch_id: 0,
        private_segment_size: 0,
        group_segment_size: lds,
        scratch: Scratch::default(),
        apertures: Apertures::default(),
        user_data: None,
    };
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let stats = run(&d, mem, &RunOptions { threads: 1 }, &NoObserver).expect("runs");
    assert_eq!(stats.workgroups, u64::from(groups));
    ALLOCATIONS.load(Ordering::Relaxed) - before
}

#[test]
fn a_workgroup_allocates_nothing_once_its_thread_ran_one() {
    let mut bytes: Vec<u8> = [0x7E02_0300u32, 0x8000_8100, 0xBF81_0000]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    bytes.resize(4096, 0);
    let mem = Code(bytes);
    for lds in [0, 1024] {
        let few = allocations(&mem, 200, lds);
        let many = allocations(&mem, 20_000, lds);
        assert!(
            many <= few,
            "LDS {lds}: 20 000 workgroups made {many} allocations, 200 made {few}"
        );
        // A dispatch's own: the thread's code cache and decoded page, one workgroup's waves
        // and LDS, the scheduler's lists.
        assert!(few < 1000, "LDS {lds}: {few} allocations for a dispatch");
    }
}
