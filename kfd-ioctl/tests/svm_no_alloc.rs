//! SVM set/get with up to 32 attributes marshal on the stack: zero heap allocations per call.
//!
//! The calls go to `/dev/null`, which fails them with `ENOTTY` after the full marshalling path
//! (version gate, buffer, ioctl, typed error) — the path a real call takes. A call with 33
//! attributes must allocate, which shows the counter sees what it should.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fs::File;
use std::os::fd::OwnedFd;

use kfd_ioctl::{Kfd, SVM_INLINE_ATTRS, Version, abi};

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counter is a thread-local Cell touched only
// by the allocating thread, so other test threads cannot disturb the count.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCS.with(Cell::get);
    f();
    ALLOCS.with(Cell::get) - before
}

fn kfd_on_dev_null() -> Kfd {
    let fd = OwnedFd::from(
        File::options()
            .read(true)
            .write(true)
            .open("/dev/null")
            .unwrap(),
    );
    Kfd::from_fd_assume_version(
        fd,
        Version {
            major: 1,
            minor: 23,
        },
    )
}

fn attrs(n: usize) -> Vec<abi::kfd_ioctl_svm_attribute> {
    (0..n)
        .map(|i| abi::kfd_ioctl_svm_attribute {
            r#type: abi::KFD_IOCTL_SVM_ATTR_ACCESS,
            value: 0x1000 + i as u32,
        })
        .collect()
}

#[test]
fn svm_calls_with_up_to_32_attributes_do_not_allocate() {
    let kfd = kfd_on_dev_null();
    for n in [0, 1, 8, SVM_INLINE_ATTRS] {
        let set = attrs(n);
        let mut get = attrs(n);
        let count = allocations_during(|| {
            // SAFETY: /dev/null does not register memory; nothing is handed to a GPU.
            let r = unsafe { kfd.svm_set_attr(0x7f00_0000_0000, 1 << 21, &set) };
            assert!(r.is_err());
            assert!(
                kfd.svm_get_attr(0x7f00_0000_0000, 1 << 21, &mut get)
                    .is_err()
            );
        });
        assert_eq!(count, 0, "{n} attributes: {count} heap allocations");
    }
}

#[test]
fn svm_calls_past_the_inline_buffer_do_allocate() {
    let kfd = kfd_on_dev_null();
    let mut get = attrs(SVM_INLINE_ATTRS + 1);
    let count = allocations_during(|| {
        assert!(
            kfd.svm_get_attr(0x7f00_0000_0000, 1 << 21, &mut get)
                .is_err()
        );
    });
    assert!(count > 0, "the counting allocator saw no allocation");
}

#[test]
fn svm_errors_name_the_ioctl_range_and_errno() {
    let kfd = kfd_on_dev_null();
    let mut get = attrs(2);
    let err = kfd
        .svm_get_attr(0x7f00_0000_0000, 1 << 21, &mut get)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "SVM (2 MiB at 0x7f0000000000) failed: ENOTTY"
    );
}
