//! The SVM ioctl: [`Kfd::svm_set_attr`] and [`Kfd::svm_get_attr`].

use std::os::fd::AsFd;

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::abi;
use crate::error::{Error, IoctlContext, Result};
use crate::kfd::ioctl_error;
use crate::{Kfd, sys};

/// How many SVM attributes an SVM call carries without touching the heap.
pub const SVM_INLINE_ATTRS: usize = 32;

/// The size of the fixed header of an SVM call (`kfd_ioctl_svm_args`), after which the
/// attributes follow.
const SVM_HEADER_SIZE: usize = size_of::<abi::kfd_ioctl_svm_args>();

/// `kfd_ioctl_svm_args` followed by its attributes, laid out as the kernel reads them.
#[repr(C)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout)]
struct SvmCall {
    head: abi::kfd_ioctl_svm_args,
    attrs: [abi::kfd_ioctl_svm_attribute; SVM_INLINE_ATTRS],
}

impl Kfd {
    /// `SVM` `SET_ATTR` on `[start, start + size)` (bytes, page aligned) with raw attributes.
    ///
    /// Up to [`SVM_INLINE_ATTRS`] attributes travel in a stack buffer: no heap allocation.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for SVM flags or queries newer than the running KFD;
    /// [`Error::InvalidArgument`] for more attributes than the ioctl's size field carries;
    /// `EINVAL` for an empty or unaligned range, an unknown attribute or `gpu_id`, or a range not
    /// wholly mapped in this process; `EPERM` when the kernel has no SVM support (or the process
    /// disabled it); `ENOMEM`. A prefetch may also fail with the migration's errno.
    ///
    /// # Safety
    /// The range is this process's memory; registering it lets the GPUs named in the attributes
    /// read and write it and the kernel migrate it. The caller must own the range and hold no
    /// Rust reference into it across GPU access.
    #[doc(alias = "AMDKFD_IOC_SVM")]
    #[doc(alias = "KFD_IOCTL_SVM_OP_SET_ATTR")]
    pub unsafe fn svm_set_attr(
        &self,
        start: u64,
        size: u64,
        attrs: &[abi::kfd_ioctl_svm_attribute],
    ) -> Result<()> {
        // SAFETY: the caller's guarantee on the range, passed on.
        unsafe { self.svm(abi::KFD_IOCTL_SVM_OP_SET_ATTR, start, size, attrs, &mut []) }
    }

    /// `SVM` `GET_ATTR` on `[start, start + size)`: the kernel overwrites each attribute's
    /// value (and, for access queries, its type) in `attrs`.
    ///
    /// Up to [`SVM_INLINE_ATTRS`] attributes travel in a stack buffer: no heap allocation.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for SVM flags or queries newer than the running KFD;
    /// [`Error::InvalidArgument`] for more attributes than the ioctl's size field carries;
    /// `EINVAL` for an empty or unaligned range, an unknown attribute or `gpu_id`, or a range not
    /// wholly mapped in this process; `EPERM` when the kernel has no SVM support (or the process
    /// disabled it); `ENOMEM`.
    #[doc(alias = "AMDKFD_IOC_SVM")]
    #[doc(alias = "KFD_IOCTL_SVM_OP_GET_ATTR")]
    pub fn svm_get_attr(
        &self,
        start: u64,
        size: u64,
        attrs: &mut [abi::kfd_ioctl_svm_attribute],
    ) -> Result<()> {
        // SAFETY: GET_ATTR reads the kernel's records of the range (and its VMAs) and never
        // touches the range's memory.
        unsafe { self.svm(abi::KFD_IOCTL_SVM_OP_GET_ATTR, start, size, &[], attrs) }
    }

    /// The SVM call: `input` for SET (read only), `output` for GET (copied back).
    ///
    /// # Safety
    /// For SET_ATTR, the obligation of [`Kfd::svm_set_attr`] on `[start, start + size)`.
    unsafe fn svm(
        &self,
        op: u32,
        start: u64,
        size: u64,
        input: &[abi::kfd_ioctl_svm_attribute],
        output: &mut [abi::kfd_ioctl_svm_attribute],
    ) -> Result<()> {
        self.require_nr(abi::AMDKFD_IOC_SVM)?;
        // Flags newer than the running KFD would be silently ignored by it: refuse them.
        for attr in input {
            if matches!(
                attr.r#type,
                abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS | abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS
            ) {
                let needed = abi::svm_flags_min_minor(abi::SvmFlags::from_bits_retain(attr.value));
                self.require_minor("SVM flags", needed)?;
            }
        }
        // CLR_FLAGS as a GET query arrived in 1.6.
        if output
            .iter()
            .any(|a| a.r#type == abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS)
        {
            self.require_minor("SVM GET_ATTR of cleared flags", 6)?;
        }
        let n = input.len().max(output.len());
        if n > abi::SVM_MAX_ATTRS as usize {
            return Err(Error::InvalidArgument {
                ioctl: "SVM",
                reason: "more attributes than the ioctl size field can carry",
            });
        }
        let head = abi::kfd_ioctl_svm_args {
            start_addr: start,
            size,
            op,
            nattr: n as u32,
        };
        let context = IoctlContext::range(start, size);
        let opcode = abi::amdkfd_ioc_svm(n as u32);
        let op_name = if input.is_empty() {
            "GET_ATTR"
        } else {
            "SET_ATTR"
        };
        let explain = |e: Error, sent: &[abi::kfd_ioctl_svm_attribute]| {
            self.explain_svm_error(e, op_name, context, sent)
        };
        if n <= SVM_INLINE_ATTRS {
            let mut call = SvmCall {
                head,
                attrs: [abi::kfd_ioctl_svm_attribute::default(); SVM_INLINE_ATTRS],
            };
            let src: &[abi::kfd_ioctl_svm_attribute] =
                if input.is_empty() { output } else { input };
            call.attrs[..n].copy_from_slice(src);
            // What was asked, for the error path: the kernel writes GET's answers over it.
            let sent = call.attrs;
            // SAFETY: the one address the kernel follows is the range, vouched for by our
            // caller; the attributes travel inside `call`, at least as long as `opcode` says.
            let result = unsafe { self.call_with_pointers(opcode, &mut call, context) };
            output.copy_from_slice(&call.attrs[..output.len()]);
            result.map(drop).map_err(|e| explain(e, &sent[..n]))
        } else {
            // Header and attributes as one u64-aligned buffer.
            let attrs_size = n * size_of::<abi::kfd_ioctl_svm_attribute>();
            let mut buf = vec![0u64; (SVM_HEADER_SIZE + attrs_size).div_ceil(8)];
            let bytes = buf.as_mut_bytes();
            bytes[..SVM_HEADER_SIZE].copy_from_slice(head.as_bytes());
            let src: &[abi::kfd_ioctl_svm_attribute] =
                if input.is_empty() { output } else { input };
            bytes[SVM_HEADER_SIZE..].copy_from_slice(src.as_bytes());
            let sent = src.to_vec();
            // SAFETY: as for the inline call: the range is vouched for by our caller and the
            // attributes travel inside `bytes`.
            let result = unsafe { sys::ioctl_bytes(self.inner.fd.as_fd(), opcode, bytes) }
                .map_err(|failure| ioctl_error("SVM", context, failure));
            if !output.is_empty() {
                output
                    .as_mut_bytes()
                    .copy_from_slice(&bytes[SVM_HEADER_SIZE..]);
            }
            result.map(drop).map_err(|e| explain(e, &sent))
        }
    }

    /// An `EINVAL` of an SVM call whose attributes name a GPU the process does not have, or
    /// one this handle has not acquired, becomes [`Error::SvmGpu`] naming the attribute and
    /// the GPU; any other error is returned as it is. Asks the kernel for the process's GPUs
    /// (GET_PROCESS_APERTURES_NEW), on this failure path only.
    fn explain_svm_error(
        &self,
        error: Error,
        op: &'static str,
        context: IoctlContext,
        attrs: &[abi::kfd_ioctl_svm_attribute],
    ) -> Error {
        if error.errno() != Some(crate::Errno::INVAL) {
            return error;
        }
        let Ok(apertures) = self.get_process_apertures() else {
            return error;
        };
        let known: Vec<crate::GpuId> = apertures.iter().map(|a| a.gpu_id).collect();
        let named = attrs.iter().filter_map(|a| {
            let name = svm_gpu_attribute(a.r#type, a.value)?;
            Some((name, crate::GpuId(a.value)))
        });
        for (attribute, gpu_id) in named {
            if !known.contains(&gpu_id) || self.render_fd(gpu_id).is_none() {
                return Error::SvmGpu {
                    op,
                    range: context.range.unwrap_or_default(),
                    errno: crate::Errno::INVAL,
                    attribute,
                    gpu_id,
                    known,
                };
            }
        }
        error
    }
}

/// The name of an SVM attribute whose value is a gpu_id (`svm_range_check_attr`): a
/// location that is neither system memory nor undefined, or an access attribute.
fn svm_gpu_attribute(r#type: u32, value: u32) -> Option<&'static str> {
    let location = value != abi::KFD_IOCTL_SVM_LOCATION_SYSMEM
        && value != abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED;
    match r#type {
        abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC if location => Some("PREFERRED_LOC"),
        abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC if location => Some("PREFETCH_LOC"),
        abi::KFD_IOCTL_SVM_ATTR_ACCESS => Some("ACCESS"),
        abi::KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE => Some("ACCESS_IN_PLACE"),
        abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS => Some("NO_ACCESS"),
        _ => None,
    }
}
