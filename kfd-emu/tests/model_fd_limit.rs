//! The model keeps a memfd per buffer object, so it raises the soft limit of open files to
//! the hard limit. Alone in its binary: it changes a process-wide limit.

mod model_support;

use kfd_ioctl::abi::*;
use model_support::*;
use rustix::process::{Resource, getrlimit, setrlimit};

#[test]
fn more_buffer_objects_than_the_soft_fd_limit() {
    let mut limit = getrlimit(Resource::Nofile);
    let hard = limit.maximum;
    let low = 256;
    if hard.is_some_and(|h| h < 2 * low) {
        panic!("the hard limit of open files ({hard:?}) is too low for this test");
    }
    limit.current = Some(low);
    setrlimit(Resource::Nofile, limit).expect("lower the soft limit");
    let mut emu = Emu::machine("mi300x");
    assert_eq!(
        getrlimit(Resource::Nofile).current,
        hard,
        "raised to the hard limit"
    );
    emu.acquire_all();
    let gpu = emu.gpu();
    let flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let handles: Vec<u64> = (0..low + 44)
        .map(|i| {
            emu.alloc(gpu, va(i), 4096, flags)
                .unwrap_or_else(|e| panic!("BO {i}: {e}"))
                .0
        })
        .collect();
    for h in handles {
        emu.free(h).expect("free");
    }
}
