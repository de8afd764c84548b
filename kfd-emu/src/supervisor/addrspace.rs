//! The address-space system calls the filter notifies (see
//! [`Filter::kfd`](super::seccomp::Filter::kfd)), as the [`AddressSpaceChange`] the backend
//! applies before the kernel runs them ([`Backend::address_space`]).
//!
//! [`Backend::address_space`]: crate::backend::Backend::address_space

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::backend::{AddressSpaceChange, Backend, CallerId};

/// Tells `backend` what address-space call `nr` with `args` of `who` is about to do, if it is
/// one (see [`decode`]). A panic in the backend is reported and otherwise ignored: the call
/// runs anyway.
pub(crate) fn tell(backend: &dyn Backend, who: CallerId, nr: i64, args: [u64; 6]) {
    let Some(change) = decode(nr, args) else {
        return;
    };
    if catch_unwind(AssertUnwindSafe(|| backend.address_space(who, change))).is_err() {
        crate::own::elog!("kfd-emu: the backend panicked on {change:?}");
    }
}

/// The change system call `nr` with arguments `args` (x86_64) makes, if it is one of the
/// notified address-space calls; `mmap` only with `MAP_FIXED` (its fd, for a file mapping,
/// is the caller's to check first).
pub(crate) fn decode(nr: i64, args: [u64; 6]) -> Option<AddressSpaceChange> {
    Some(match nr {
        libc::SYS_munmap => AddressSpaceChange::Unmap {
            start: args[0],
            len: args[1],
        },
        libc::SYS_mmap if args[3] as u32 & libc::MAP_FIXED as u32 != 0 => {
            AddressSpaceChange::MapFixed {
                start: args[0],
                len: args[1],
            }
        }
        libc::SYS_mremap => AddressSpaceChange::Remap {
            old: args[0],
            old_len: args[1],
            new_len: args[2],
            flags: args[3] as u32,
            new_addr: args[4],
        },
        libc::SYS_madvise => AddressSpaceChange::Advise {
            start: args[0],
            len: args[1],
            advice: args[2] as i32,
        },
        libc::SYS_mprotect => AddressSpaceChange::Protect {
            start: args[0],
            len: args[1],
            prot: args[2] as u32,
        },
        libc::SYS_brk => AddressSpaceChange::Brk { addr: args[0] },
        libc::SYS_fork => AddressSpaceChange::Fork,
        libc::SYS_clone if args[0] & libc::CLONE_VM as u64 == 0 => AddressSpaceChange::Fork,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_call_is_its_change() {
        assert_eq!(
            decode(libc::SYS_munmap, [0x1000, 0x2000, 0, 0, 0, 0]),
            Some(AddressSpaceChange::Unmap {
                start: 0x1000,
                len: 0x2000
            })
        );
        let fixed = (libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
        assert_eq!(
            decode(libc::SYS_mmap, [0x1000, 0x2000, 3, fixed, u64::MAX, 0]),
            Some(AddressSpaceChange::MapFixed {
                start: 0x1000,
                len: 0x2000
            })
        );
        let hint = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
        assert_eq!(
            decode(libc::SYS_mmap, [0x1000, 0x2000, 3, hint, 0, 0]),
            None
        );
        assert_eq!(
            decode(libc::SYS_clone, [libc::SIGCHLD as u64, 0, 0, 0, 0, 0]),
            Some(AddressSpaceChange::Fork)
        );
        let thread = (libc::CLONE_VM | libc::CLONE_THREAD) as u64;
        assert_eq!(decode(libc::SYS_clone, [thread, 0, 0, 0, 0, 0]), None);
        assert_eq!(decode(libc::SYS_read, [0; 6]), None);
    }
}
