//! The provider's errors, one variant per UMF result, and the per-thread last native error.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;

use kfd_ioctl::{Errno, ErrnoName};

/// UMF's `umf_result_t` (UMF 1.x `include/umf/base.h`), for the C ABI to return.
///
/// The discriminants are UMF's values; the C ABI's layout test checks them against the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
#[doc(alias = "umf_result_t")]
pub enum UmfResult {
    /// `UMF_RESULT_SUCCESS`.
    Success = 0,
    /// `UMF_RESULT_ERROR_OUT_OF_HOST_MEMORY`.
    OutOfHostMemory = 1,
    /// `UMF_RESULT_ERROR_MEMORY_PROVIDER_SPECIFIC`: details in [`last_native_error`].
    MemoryProviderSpecific = 2,
    /// `UMF_RESULT_ERROR_INVALID_ARGUMENT`.
    InvalidArgument = 3,
    /// `UMF_RESULT_ERROR_INVALID_ALIGNMENT`.
    InvalidAlignment = 4,
    /// `UMF_RESULT_ERROR_NOT_SUPPORTED`.
    NotSupported = 5,
}

/// The provider-specific error codes `get_last_native_error` reports, after the model of UMF's
/// OS provider (`UMF_OS_RESULTS_START_FROM` + n): the failing step; the errno is kept beside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
#[non_exhaustive]
pub enum NativeCode {
    /// Allocating: a size too large to round, `mmap`, `ALLOC_MEMORY_OF_GPU`,
    /// `MAP_MEMORY_TO_GPU` or the SVM `SET_ATTR` failed.
    AllocFailed = 2001,
    /// Freeing: the pointer is not an allocation of this provider, or the unmap/free failed.
    FreeFailed = 2002,
    /// `purge_lazy`: `madvise` failed.
    PurgeLazyFailed = 2003,
    /// `purge_force`: `madvise` failed.
    PurgeForceFailed = 2004,
    /// `get_ipc_handle`: `EXPORT_DMABUF` failed.
    IpcGetFailed = 2005,
    /// `open_ipc_handle`: `pidfd_open`, `pidfd_getfd`, the mapping, the import or the GPU
    /// mapping failed.
    IpcOpenFailed = 2006,
    /// `close_ipc_handle`: unmapping or freeing the imported memory failed.
    IpcCloseFailed = 2007,
    /// Creating the provider: opening the topology, `ACQUIRE_VM` or the aperture query failed.
    InitFailed = 2008,
    /// The provider was created by another process: this is a forked child, which is a new
    /// KFD process and must create its own provider (see [`KfdProvider`](super::KfdProvider)).
    WrongProcess = 2009,
}

/// What `get_last_native_error` returns: a provider-specific code, the errno behind it, and
/// a message naming the step, the ioctl, the GPU and the range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeError {
    /// The step that failed.
    pub code: NativeCode,
    /// The errno of the failing system call, when there was one.
    pub errno: Option<Errno>,
    /// `"<step>: <cause>"`, e.g. `"alloc: ALLOC_MEMORY_OF_GPU (VRAM, …) on gpu 0x… failed: ENOMEM"`.
    pub message: String,
}

impl NativeError {
    /// The code as the C ABI's `int32_t *pError` carries it.
    pub fn raw_code(&self) -> i32 {
        self.code as i32
    }
}

impl fmt::Display for NativeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Everything a provider or pool call can fail with; each variant is one UMF result
/// ([`Error::umf_result`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A bad argument: an unknown or interior pointer where an allocation's start is needed,
    /// a wrong size, an alignment that is neither 0, a divisor nor a multiple of the page size,
    /// a split or merge the rules refuse, a malformed IPC handle.
    #[error("invalid argument: {0}")]
    InvalidArgument(Cow<'static, str>),
    /// A pointer or size that must be page aligned is not (purges).
    #[error("invalid alignment: {0}")]
    InvalidAlignment(Cow<'static, str>),
    /// A NULL pointer where one is needed (LLVM Offload's `INVALID_NULL_POINTER`); UMF knows it
    /// as `INVALID_ARGUMENT`.
    #[error("null pointer: {0}")]
    NullPointer(&'static str),
    /// The pool's own bookkeeping could not grow (a failed heap reservation).
    #[error("out of host memory: {0}")]
    OutOfHostMemory(Cow<'static, str>),
    /// This kind of memory cannot do that (purging VRAM without a CPU mapping, IPC of SVM
    /// memory); the reason says why.
    #[error("not supported: {0}")]
    NotSupported(Cow<'static, str>),
    /// The system or KFD refused: the native code, the errno and the message, also stored as
    /// this thread's [`last_native_error`]. Running out of VRAM or GTT is this, with `ENOMEM`.
    #[error("{0}")]
    ProviderSpecific(NativeError),
}

impl Error {
    /// The UMF result this error is returned as.
    pub fn umf_result(&self) -> UmfResult {
        match self {
            Error::InvalidArgument(_) | Error::NullPointer(_) => UmfResult::InvalidArgument,
            Error::InvalidAlignment(_) => UmfResult::InvalidAlignment,
            Error::OutOfHostMemory(_) => UmfResult::OutOfHostMemory,
            Error::NotSupported(_) => UmfResult::NotSupported,
            Error::ProviderSpecific(_) => UmfResult::MemoryProviderSpecific,
        }
    }

    /// The native error of a [`Error::ProviderSpecific`].
    pub fn native(&self) -> Option<&NativeError> {
        match self {
            Error::ProviderSpecific(native) => Some(native),
            _ => None,
        }
    }

    /// Whether the kernel said `ENOMEM` (VRAM, GTT or system memory exhausted).
    pub fn is_out_of_memory(&self) -> bool {
        self.native().and_then(|n| n.errno) == Some(Errno::NOMEM)
    }

    pub(crate) fn invalid(reason: impl Into<Cow<'static, str>>) -> Error {
        Error::InvalidArgument(reason.into())
    }

    pub(crate) fn alignment(reason: impl Into<Cow<'static, str>>) -> Error {
        Error::InvalidAlignment(reason.into())
    }

    pub(crate) fn unsupported(reason: impl Into<Cow<'static, str>>) -> Error {
        Error::NotSupported(reason.into())
    }

    /// A provider-specific error: the native code, the errno behind it if any, the message.
    pub(crate) fn provider_specific(
        code: NativeCode,
        errno: Option<Errno>,
        message: String,
    ) -> Error {
        Error::ProviderSpecific(NativeError {
            code,
            errno,
            message,
        })
    }

    /// A provider-specific error from a KFD call made during `step`.
    pub(crate) fn kfd(code: NativeCode, step: &str, source: &kfd_ioctl::Error) -> Error {
        Error::provider_specific(code, source.errno(), format!("{step}: {source}"))
    }

    /// A provider-specific error from an SVM call made during `step`.
    pub(crate) fn svm(code: NativeCode, step: &str, source: &kfd_svm::Error) -> Error {
        Error::provider_specific(code, source.errno(), format!("{step}: {source}"))
    }

    /// A provider-specific error from a system call made during `step`.
    pub(crate) fn sys(code: NativeCode, step: &str, errno: Errno) -> Error {
        Error::provider_specific(code, Some(errno), format!("{step}: {}", ErrnoName(errno)))
    }

    /// A provider-specific error with an errno and a message of its own.
    pub(crate) fn native_with(code: NativeCode, errno: Errno, message: String) -> Error {
        Error::provider_specific(code, Some(errno), message)
    }
}

/// The result type of the provider and the pool.
pub type Result<T, E = Error> = std::result::Result<T, E>;

thread_local! {
    static LAST_NATIVE: RefCell<Option<NativeError>> = const { RefCell::new(None) };
}

/// The native error of the last [`Error::ProviderSpecific`] a provider or pool call returned
/// on this thread (UMF's `get_last_native_error`, kept per thread as UMF requires); `None`
/// before any. Later successes do not clear it.
pub fn last_native_error() -> Option<NativeError> {
    LAST_NATIVE.with(|last| last.borrow().clone())
}

/// Runs one provider or pool operation: a provider-specific error it returns is stored as
/// this thread's last native error, then passed on. Every public operation runs through here,
/// so this is the one place that records.
pub(crate) fn recorded<T>(op: impl FnOnce() -> Result<T>) -> Result<T> {
    let result = op();
    if let Err(Error::ProviderSpecific(native)) = &result {
        LAST_NATIVE.with(|last| *last.borrow_mut() = Some(native.clone()));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_maps_to_its_umf_result() {
        let native = NativeError {
            code: NativeCode::FreeFailed,
            errno: Some(Errno::INVAL),
            message: "free: 0x1 is not an allocation of this provider".into(),
        };
        let cases = [
            (Error::invalid("x"), UmfResult::InvalidArgument),
            (Error::NullPointer("ptr"), UmfResult::InvalidArgument),
            (Error::alignment("x"), UmfResult::InvalidAlignment),
            (
                Error::OutOfHostMemory("x".into()),
                UmfResult::OutOfHostMemory,
            ),
            (Error::unsupported("x"), UmfResult::NotSupported),
            (
                Error::ProviderSpecific(native.clone()),
                UmfResult::MemoryProviderSpecific,
            ),
        ];
        for (error, umf) in cases {
            assert_eq!(error.umf_result(), umf, "{error}");
        }
        assert_eq!(UmfResult::MemoryProviderSpecific as i32, 2);
        assert_eq!(native.raw_code(), 2002);
    }

    #[test]
    fn the_last_native_error_is_per_thread() {
        let failed: Result<()> = Err(Error::sys(
            NativeCode::PurgeLazyFailed,
            "purge_lazy",
            Errno::INVAL,
        ));
        assert!(recorded(|| failed).is_err());
        let here = last_native_error().expect("recorded on this thread");
        assert_eq!(here.code, NativeCode::PurgeLazyFailed);
        assert_eq!(here.errno, Some(Errno::INVAL));
        assert_eq!(here.message, "purge_lazy: EINVAL");
        // Other kinds of error do not overwrite it, and other threads have their own.
        assert!(recorded::<()>(|| Err(Error::invalid("x"))).is_err());
        assert_eq!(last_native_error(), Some(here));
        let elsewhere = std::thread::spawn(last_native_error).join().unwrap();
        assert_eq!(elsewhere, None);
    }
}
