//! AMDKFD_IOC_SVM as `kfd_chardev.c` hands it to `svm_ioctl`: the argument and its attribute
//! array in the kernel buffer, the ioctl-level checks, then SET_ATTR or GET_ATTR of
//! [`svm`](super::svm).

use kfd_ioctl::abi::{
    KFD_IOCTL_SVM_OP_GET_ATTR, KFD_IOCTL_SVM_OP_SET_ATTR, kfd_ioctl_svm_args,
    kfd_ioctl_svm_attribute,
};
use rustix::io::Errno;
use zerocopy::{FromBytes, IntoBytes};

use super::chardev::{Ctx, get};
use super::memory::PAGE_SIZE;
use super::svm;
use crate::backend::IoctlResult;

/// The attributes of an SVM call, from the kernel buffer after the header.
fn read_attrs(buf: &[u8], nattr: u32) -> Vec<kfd_ioctl_svm_attribute> {
    let bytes = buf.get(24..24 + 8 * nattr as usize).unwrap_or(&[]);
    bytes
        .chunks_exact(8)
        .filter_map(|c| kfd_ioctl_svm_attribute::read_from_bytes(c).ok())
        .collect()
}

/// AMDKFD_IOC_SVM: the ioctl-level checks, then SET_ATTR or GET_ATTR. An unknown op returns
/// the *positive* `EINVAL` of `svm_ioctl`'s `r = EINVAL`, which the dispatcher passes on as
/// the ioctl's return value.
pub(super) fn ioctl(ctx: &Ctx<'_>, buf: &mut [u8]) -> IoctlResult {
    let a: kfd_ioctl_svm_args = get(buf);
    ctx.m.lock().process(ctx.tgid, ctx.serial)?;
    let page = PAGE_SIZE - 1;
    if a.start_addr & page != 0 || a.size & page != 0 || a.start_addr == 0 || a.size == 0 {
        return Err(Errno::INVAL);
    }
    let (start, npages) = (a.start_addr / PAGE_SIZE, a.size / PAGE_SIZE);
    let mut attrs = read_attrs(buf, a.nattr);
    match a.op {
        KFD_IOCTL_SVM_OP_SET_ATTR => {
            svm::set_attr(ctx.m, ctx.tgid, start, npages, &attrs).map(|()| 0)
        }
        KFD_IOCTL_SVM_OP_GET_ATTR => {
            let r = svm::get_attr(ctx.m, ctx.tgid, start, npages, &mut attrs);
            // The kernel fills the attributes in its buffer, which is copied back even when a
            // later one failed.
            if let Some(dst) = buf.get_mut(24..24 + attrs.as_bytes().len()) {
                dst.copy_from_slice(attrs.as_bytes());
            }
            r.map(|()| 0)
        }
        _ => Ok(i64::from(Errno::INVAL.raw_os_error())),
    }
}
