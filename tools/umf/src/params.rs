//! `kfd_memory_provider_params_t`: what the C side sets before `umfMemoryProviderCreate`.

#![allow(non_camel_case_types)]

use std::ffi::{CStr, c_char};

use kfd_provider::{MemoryKind, ProviderParams};

use crate::abi::{
    KFD_UMF_KIND_DEVICE, KFD_UMF_KIND_HOST, KFD_UMF_KIND_SHARED, UMF_RESULT_ERROR_INVALID_ARGUMENT,
    UMF_RESULT_SUCCESS, kfd_umf_kind_t, umf_result_t,
};
use crate::guard;

/// The longest provider name UMF accepts without truncating it in CTL paths.
const MAX_NAME: usize = 63;

/// The parameters of a KFD provider: its kind, its GPU and its name. Opaque to C, which
/// holds it through a [`kfd_memory_provider_params_handle_t`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct kfd_memory_provider_params_t {
    kind: MemoryKind,
    gpu_id: u32,
    name: Option<String>,
}

/// `kfd_memory_provider_params_handle_t`: the C handle on [`kfd_memory_provider_params_t`].
pub type kfd_memory_provider_params_handle_t = *mut kfd_memory_provider_params_t;

impl Default for kfd_memory_provider_params_t {
    /// HOST memory on the first GPU, with the default name.
    fn default() -> Self {
        kfd_memory_provider_params_t {
            kind: MemoryKind::Host,
            gpu_id: 0,
            name: None,
        }
    }
}

impl kfd_memory_provider_params_t {
    /// The Rust provider's parameters these stand for.
    pub fn provider_params(&self) -> ProviderParams {
        let params = ProviderParams::new(self.kind).gpu(self.gpu_id);
        match &self.name {
            Some(name) => params.name(name.clone()),
            None => params,
        }
    }
}

/// The [`MemoryKind`] of a `KFD_UMF_KIND_*` value.
pub fn kind_from_raw(kind: kfd_umf_kind_t) -> Option<MemoryKind> {
    match kind {
        KFD_UMF_KIND_HOST => Some(MemoryKind::Host),
        KFD_UMF_KIND_DEVICE => Some(MemoryKind::Device),
        KFD_UMF_KIND_SHARED => Some(MemoryKind::Shared),
        _ => None,
    }
}

/// The `KFD_UMF_KIND_*` value of a [`MemoryKind`] (also its `umf_usm_memory_type_t`).
pub fn kind_to_raw(kind: MemoryKind) -> kfd_umf_kind_t {
    match kind {
        MemoryKind::Host => KFD_UMF_KIND_HOST,
        MemoryKind::Device => KFD_UMF_KIND_DEVICE,
        MemoryKind::Shared => KFD_UMF_KIND_SHARED,
    }
}

/// Runs `f` on the params behind `handle`; a NULL handle is an invalid argument.
///
/// # Safety
///
/// `handle` is NULL or a handle from [`kfdMemoryProviderParamsCreate`] not yet destroyed,
/// which no other thread uses during the call.
unsafe fn with_params(
    handle: kfd_memory_provider_params_handle_t,
    f: impl FnOnce(&mut kfd_memory_provider_params_t) -> umf_result_t,
) -> umf_result_t {
    // SAFETY: by the caller's contract, a non-NULL handle is a live, unshared Box allocation.
    match unsafe { handle.as_mut() } {
        Some(params) => f(params),
        None => UMF_RESULT_ERROR_INVALID_ARGUMENT,
    }
}

/// `kfdMemoryProviderParamsCreate(&hParams)`: new params (HOST memory on the first GPU,
/// named `"KFD"`) for `umfMemoryProviderCreate(kfdMemoryProviderOps(), hParams, …)`; free
/// them with [`kfdMemoryProviderParamsDestroy`].
///
/// # Safety
///
/// `h_params` is NULL (an invalid argument) or valid for writing a handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kfdMemoryProviderParamsCreate(
    h_params: *mut kfd_memory_provider_params_handle_t,
) -> umf_result_t {
    guard(|| {
        if h_params.is_null() {
            return UMF_RESULT_ERROR_INVALID_ARGUMENT;
        }
        let params = Box::into_raw(Box::default());
        // SAFETY: checked non-NULL; the caller promises it is writable.
        unsafe { h_params.write(params) };
        UMF_RESULT_SUCCESS
    })
}

/// `kfdMemoryProviderParamsDestroy(hParams)`: frees params; NULL is fine (nothing to free).
/// Providers created from them keep their own copy.
///
/// # Safety
///
/// `h_params` is NULL or a handle from [`kfdMemoryProviderParamsCreate`] not yet destroyed
/// and not in use by another thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kfdMemoryProviderParamsDestroy(
    h_params: kfd_memory_provider_params_handle_t,
) -> umf_result_t {
    guard(|| {
        if !h_params.is_null() {
            // SAFETY: the handle came from `Box::into_raw` in Create and is destroyed once.
            drop(unsafe { Box::from_raw(h_params) });
        }
        UMF_RESULT_SUCCESS
    })
}

/// `kfdMemoryProviderParamsSetKind(hParams, kind)`: `KFD_UMF_KIND_HOST`, `_DEVICE` or
/// `_SHARED`; any other value is an invalid argument.
///
/// # Safety
///
/// As [`kfdMemoryProviderParamsDestroy`], but `h_params` stays valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kfdMemoryProviderParamsSetKind(
    h_params: kfd_memory_provider_params_handle_t,
    kind: kfd_umf_kind_t,
) -> umf_result_t {
    guard(|| {
        let Some(kind) = kind_from_raw(kind) else {
            return UMF_RESULT_ERROR_INVALID_ARGUMENT;
        };
        // SAFETY: forwarded caller contract.
        unsafe {
            with_params(h_params, |p| {
                p.kind = kind;
                UMF_RESULT_SUCCESS
            })
        }
    })
}

/// `kfdMemoryProviderParamsSetGpuId(hParams, gpu_id)`: the GPU (its KFD `gpu_id`) whose VRAM
/// DEVICE memory is and on which every kind is mapped; 0 means the first GPU of the topology.
/// An id the topology lacks makes `umfMemoryProviderCreate` fail with an invalid argument.
///
/// # Safety
///
/// As [`kfdMemoryProviderParamsSetKind`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kfdMemoryProviderParamsSetGpuId(
    h_params: kfd_memory_provider_params_handle_t,
    gpu_id: u32,
) -> umf_result_t {
    guard(|| {
        // SAFETY: forwarded caller contract.
        unsafe {
            with_params(h_params, |p| {
                p.gpu_id = gpu_id;
                UMF_RESULT_SUCCESS
            })
        }
    })
}

/// `kfdMemoryProviderParamsSetName(hParams, name)`: the provider's name instead of `"KFD"`:
/// 1 to 63 characters of `[A-Za-z0-9_-]` (UMF's rule for names usable in CTL paths); anything
/// else is an invalid argument. The string is copied.
///
/// # Safety
///
/// As [`kfdMemoryProviderParamsSetKind`]; `name` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kfdMemoryProviderParamsSetName(
    h_params: kfd_memory_provider_params_handle_t,
    name: *const c_char,
) -> umf_result_t {
    guard(|| {
        if name.is_null() {
            return UMF_RESULT_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: checked non-NULL; the caller promises a NUL-terminated string.
        let name = unsafe { CStr::from_ptr(name) }.to_bytes();
        let valid = (1..=MAX_NAME).contains(&name.len())
            && name
                .iter()
                .all(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-');
        if !valid {
            return UMF_RESULT_ERROR_INVALID_ARGUMENT;
        }
        let name = String::from_utf8_lossy(name).into_owned();
        // SAFETY: forwarded caller contract.
        unsafe {
            with_params(h_params, |p| {
                p.name = Some(name);
                UMF_RESULT_SUCCESS
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_set_checked_and_freed() {
        let mut h: kfd_memory_provider_params_handle_t = std::ptr::null_mut();
        // SAFETY: every handle passed is NULL or the live one created here.
        unsafe {
            assert_eq!(
                kfdMemoryProviderParamsCreate(std::ptr::null_mut()),
                UMF_RESULT_ERROR_INVALID_ARGUMENT
            );
            assert_eq!(kfdMemoryProviderParamsCreate(&mut h), UMF_RESULT_SUCCESS);
            assert_eq!(*h, kfd_memory_provider_params_t::default());
            assert_eq!(
                kfdMemoryProviderParamsSetKind(h, KFD_UMF_KIND_DEVICE),
                UMF_RESULT_SUCCESS
            );
            assert_eq!(
                kfdMemoryProviderParamsSetKind(h, 0),
                UMF_RESULT_ERROR_INVALID_ARGUMENT
            );
            assert_eq!(
                kfdMemoryProviderParamsSetKind(std::ptr::null_mut(), KFD_UMF_KIND_HOST),
                UMF_RESULT_ERROR_INVALID_ARGUMENT
            );
            assert_eq!(
                kfdMemoryProviderParamsSetGpuId(h, 0x1234),
                UMF_RESULT_SUCCESS
            );
            assert_eq!(
                kfdMemoryProviderParamsSetName(h, c"vram-0_a".as_ptr()),
                UMF_RESULT_SUCCESS
            );
            for bad in [c"", c"has space", c"dot.ted"] {
                assert_eq!(
                    kfdMemoryProviderParamsSetName(h, bad.as_ptr()),
                    UMF_RESULT_ERROR_INVALID_ARGUMENT,
                    "{bad:?}"
                );
            }
            let long = std::ffi::CString::new("x".repeat(MAX_NAME + 1)).unwrap();
            assert_eq!(
                kfdMemoryProviderParamsSetName(h, long.as_ptr()),
                UMF_RESULT_ERROR_INVALID_ARGUMENT
            );
            assert_eq!(
                (*h).provider_params(),
                ProviderParams::new(MemoryKind::Device)
                    .gpu(0x1234)
                    .name("vram-0_a")
            );
            assert_eq!(kfdMemoryProviderParamsDestroy(h), UMF_RESULT_SUCCESS);
            assert_eq!(
                kfdMemoryProviderParamsDestroy(std::ptr::null_mut()),
                UMF_RESULT_SUCCESS
            );
        }
    }

    #[test]
    fn kinds_round_trip_through_their_c_values() {
        for kind in [MemoryKind::Host, MemoryKind::Device, MemoryKind::Shared] {
            assert_eq!(kind_from_raw(kind_to_raw(kind)), Some(kind));
        }
        assert_eq!(kind_from_raw(0), None);
        assert_eq!(kind_from_raw(4), None);
    }
}
