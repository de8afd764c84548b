//! Building, encoding and applying up to `INLINE_ATTRS` SVM attributes never touches the heap.
//!
//! A counting global allocator counts the allocations of the current thread only, so the test
//! harness's own threads do not disturb the count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::os::fd::OwnedFd;

use kfd_ioctl::abi::SvmFlags;
use kfd_ioctl::{Errno, Kfd, Version};
use kfd_svm::{Access, Error, INLINE_ATTRS, Location, SvmAttrs};

struct CountingAlloc;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counter is a
// const-initialised thread local, which itself never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: forwarded with the caller's pointer, layout and size.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// Allocations made by `f` on this thread.
fn allocations<T>(f: impl FnOnce() -> T) -> (usize, T) {
    let before = ALLOCATIONS.with(Cell::get);
    let out = f();
    (ALLOCATIONS.with(Cell::get) - before, out)
}

/// The largest attribute set that stays inline: the five scalar kinds and 27 GPUs.
fn full_inline_set() -> SvmAttrs {
    let mut attrs = SvmAttrs::new()
        .preferred_location(Location::Gpu(kfd_ioctl::GpuId(0x1000)))
        .prefetch_location(Location::System)
        .set_flags(SvmFlags::GPU_RO | SvmFlags::GPU_EXEC)
        .clear_flags(SvmFlags::COHERENT)
        .granularity(9);
    for gpu in 0..(INLINE_ATTRS as u32 - 5) {
        let access = [Access::Access, Access::AccessInPlace, Access::NoAccess][gpu as usize % 3];
        attrs = attrs.access(0x1000 + gpu, access);
    }
    attrs
}

#[test]
fn building_and_encoding_a_full_inline_set_allocates_nothing() {
    let (n, attrs) = allocations(|| {
        let attrs = full_inline_set()
            // Replacing entries (a second call of a kind) edits them in place.
            .preferred_location(Location::Undefined)
            .access(0x1000, Access::NoAccess)
            .set_flags(SvmFlags::COHERENT);
        let encoded = attrs.as_raw().len();
        (attrs, encoded)
    });
    assert_eq!(n, 0, "allocations while building {} attributes", attrs.1);
    assert_eq!(attrs.1, INLINE_ATTRS);
    assert!(attrs.0.list().is_inline());
}

#[test]
fn applying_a_full_inline_set_allocates_nothing_even_when_it_fails() {
    // `/dev/null` is no KFD: the ioctl fails with ENOTTY, after the whole call path (range
    // check, attribute copy into the stack buffer, ioctl, error construction) has run.
    let null: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
    let kfd = Kfd::from_fd_assume_version(
        null,
        Version {
            major: 1,
            minor: 17,
        },
    );
    let attrs = full_inline_set();
    let page = rustix::param::page_size() as u64;
    let (n, result) = allocations(|| {
        // SAFETY: the ioctl goes to /dev/null, which registers nothing.
        unsafe { attrs.apply(&kfd, 0x7f00_0000_0000, 512 * page) }
    });
    assert_eq!(
        n,
        0,
        "allocations while applying {} attributes",
        attrs.len()
    );
    match result {
        Err(Error::Kfd(e)) => assert_eq!(e.errno(), Some(Errno::NOTTY), "{e}"),
        other => panic!("expected ENOTTY from /dev/null, got {other:?}"),
    }
}

#[test]
fn one_attribute_more_moves_to_the_heap() {
    let attrs = full_inline_set();
    let (n, attrs) = allocations(|| attrs.access(0x9999, Access::Access));
    assert!(n > 0, "the 33rd attribute must spill");
    assert!(!attrs.list().is_inline());
    assert_eq!(attrs.len(), INLINE_ATTRS + 1);
}
