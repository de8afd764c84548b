//! The raw C ABI: UMF 1.x's `umf_memory_provider_ops_t` and the constants the provider speaks,
//! mirrored from the headers of the `umf` 1.2.0 package, and the constants of `kfd_umf.h`.
//!
//! C names stay C names here. Every item is checked against the real headers by
//! `tests/layout.rs`, which compiles a C probe from [`ops_layout`] and [`constants`] and
//! also checks the reverse direction (no member or enumerator of the headers is left without a
//! mirror).

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void};
use std::mem::{offset_of, size_of};

/// `umf_result_t`: a C enum, passed and returned as a 32-bit `int`.
pub type umf_result_t = i32;

/// `UMF_RESULT_SUCCESS`.
pub const UMF_RESULT_SUCCESS: umf_result_t = 0;
/// `UMF_RESULT_ERROR_OUT_OF_HOST_MEMORY`.
pub const UMF_RESULT_ERROR_OUT_OF_HOST_MEMORY: umf_result_t = 1;
/// `UMF_RESULT_ERROR_MEMORY_PROVIDER_SPECIFIC`: the details are the last native error.
pub const UMF_RESULT_ERROR_MEMORY_PROVIDER_SPECIFIC: umf_result_t = 2;
/// `UMF_RESULT_ERROR_INVALID_ARGUMENT`.
pub const UMF_RESULT_ERROR_INVALID_ARGUMENT: umf_result_t = 3;
/// `UMF_RESULT_ERROR_INVALID_ALIGNMENT`.
pub const UMF_RESULT_ERROR_INVALID_ALIGNMENT: umf_result_t = 4;
/// `UMF_RESULT_ERROR_NOT_SUPPORTED`.
pub const UMF_RESULT_ERROR_NOT_SUPPORTED: umf_result_t = 5;
/// `UMF_RESULT_ERROR_USER_SPECIFIC`.
pub const UMF_RESULT_ERROR_USER_SPECIFIC: umf_result_t = 6;
/// `UMF_RESULT_ERROR_DEPENDENCY_UNAVAILABLE`.
pub const UMF_RESULT_ERROR_DEPENDENCY_UNAVAILABLE: umf_result_t = 7;
/// `UMF_RESULT_ERROR_OUT_OF_RESOURCES`.
pub const UMF_RESULT_ERROR_OUT_OF_RESOURCES: umf_result_t = 8;
/// `UMF_RESULT_ERROR_INVALID_CTL_PATH`: what `ext_ctl` answers for a path it does not serve.
pub const UMF_RESULT_ERROR_INVALID_CTL_PATH: umf_result_t = 9;
/// `UMF_RESULT_ERROR_UNKNOWN`: what every entry point returns if Rust code panicked.
pub const UMF_RESULT_ERROR_UNKNOWN: umf_result_t = 0x7fff_fffe;

/// `UMF_MAKE_VERSION(major, minor)`.
#[doc(alias = "UMF_MAKE_VERSION")]
pub const fn umf_make_version(major: u32, minor: u32) -> u32 {
    (major << 16) | (minor & 0xffff)
}

/// `UMF_PROVIDER_OPS_VERSION_CURRENT` of UMF 1.2: `UMF_MAKE_VERSION(1, 2)`, the version whose
/// ops structure has every member below. UMF 1.2 ignores `ext_get_allocation_properties*`
/// and `get_cache_line_size` of ops that claim an older version.
pub const UMF_PROVIDER_OPS_VERSION_CURRENT: u32 = umf_make_version(1, 2);

/// `umf_ctl_query_source_t`.
pub type umf_ctl_query_source_t = u32;
/// `CTL_UNKNOWN_QUERY_SOURCE`.
pub const CTL_UNKNOWN_QUERY_SOURCE: umf_ctl_query_source_t = 0;
/// `CTL_QUERY_PROGRAMMATIC`: a query from `umfCtlGet`/`Set`/`Exec`.
pub const CTL_QUERY_PROGRAMMATIC: umf_ctl_query_source_t = 1;
/// `CTL_QUERY_CONFIG_INPUT`: a query from the `UMF_CONF` environment.
pub const CTL_QUERY_CONFIG_INPUT: umf_ctl_query_source_t = 2;

/// `umf_ctl_query_type_t`.
pub type umf_ctl_query_type_t = u32;
/// `CTL_QUERY_READ`.
pub const CTL_QUERY_READ: umf_ctl_query_type_t = 0;
/// `CTL_QUERY_WRITE`.
pub const CTL_QUERY_WRITE: umf_ctl_query_type_t = 1;
/// `CTL_QUERY_RUNNABLE`.
pub const CTL_QUERY_RUNNABLE: umf_ctl_query_type_t = 2;

/// `umf_memory_property_id_t`.
pub type umf_memory_property_id_t = i32;
/// `UMF_MEMORY_PROPERTY_INVALID`.
pub const UMF_MEMORY_PROPERTY_INVALID: umf_memory_property_id_t = -1;
/// `UMF_MEMORY_PROPERTY_PROVIDER_HANDLE` (answered by UMF itself).
pub const UMF_MEMORY_PROPERTY_PROVIDER_HANDLE: umf_memory_property_id_t = 0;
/// `UMF_MEMORY_PROPERTY_POOL_HANDLE` (answered by UMF itself).
pub const UMF_MEMORY_PROPERTY_POOL_HANDLE: umf_memory_property_id_t = 1;
/// `UMF_MEMORY_PROPERTY_BASE_ADDRESS` (answered by UMF itself).
pub const UMF_MEMORY_PROPERTY_BASE_ADDRESS: umf_memory_property_id_t = 10;
/// `UMF_MEMORY_PROPERTY_BASE_SIZE` (answered by UMF itself).
pub const UMF_MEMORY_PROPERTY_BASE_SIZE: umf_memory_property_id_t = 11;
/// `UMF_MEMORY_PROPERTY_BUFFER_ID` (answered by UMF itself).
pub const UMF_MEMORY_PROPERTY_BUFFER_ID: umf_memory_property_id_t = 12;
/// `UMF_MEMORY_PROPERTY_POINTER_TYPE`: an [`umf_usm_memory_type_t`].
pub const UMF_MEMORY_PROPERTY_POINTER_TYPE: umf_memory_property_id_t = 20;
/// `UMF_MEMORY_PROPERTY_CONTEXT` (no such thing for KFD memory).
pub const UMF_MEMORY_PROPERTY_CONTEXT: umf_memory_property_id_t = 21;
/// `UMF_MEMORY_PROPERTY_DEVICE`: for this provider, the GPU's KFD `gpu_id` as a `uint32_t`.
pub const UMF_MEMORY_PROPERTY_DEVICE: umf_memory_property_id_t = 22;
/// `UMF_MEMORY_PROPERTY_MAX_RESERVED`.
pub const UMF_MEMORY_PROPERTY_MAX_RESERVED: umf_memory_property_id_t = 0x1000;

/// `umf_usm_memory_type_t` (`umf/memory_provider_gpu.h`).
pub type umf_usm_memory_type_t = u32;
/// `UMF_MEMORY_TYPE_UNKNOWN`.
pub const UMF_MEMORY_TYPE_UNKNOWN: umf_usm_memory_type_t = 0;
/// `UMF_MEMORY_TYPE_HOST`.
pub const UMF_MEMORY_TYPE_HOST: umf_usm_memory_type_t = 1;
/// `UMF_MEMORY_TYPE_DEVICE`.
pub const UMF_MEMORY_TYPE_DEVICE: umf_usm_memory_type_t = 2;
/// `UMF_MEMORY_TYPE_SHARED`.
pub const UMF_MEMORY_TYPE_SHARED: umf_usm_memory_type_t = 3;

/// `kfd_umf_kind_t` (`kfd_umf.h`): the kind of memory a provider hands out. The values are
/// those of [`umf_usm_memory_type_t`].
pub type kfd_umf_kind_t = u32;
/// `KFD_UMF_KIND_HOST`: system memory the GPUs reach ([`MemoryKind::Host`]).
///
/// [`MemoryKind::Host`]: kfd_provider::MemoryKind::Host
pub const KFD_UMF_KIND_HOST: kfd_umf_kind_t = UMF_MEMORY_TYPE_HOST;
/// `KFD_UMF_KIND_DEVICE`: VRAM of one GPU ([`MemoryKind::Device`]).
///
/// [`MemoryKind::Device`]: kfd_provider::MemoryKind::Device
pub const KFD_UMF_KIND_DEVICE: kfd_umf_kind_t = UMF_MEMORY_TYPE_DEVICE;
/// `KFD_UMF_KIND_SHARED`: SVM memory ([`MemoryKind::Shared`]).
///
/// [`MemoryKind::Shared`]: kfd_provider::MemoryKind::Shared
pub const KFD_UMF_KIND_SHARED: kfd_umf_kind_t = UMF_MEMORY_TYPE_SHARED;

/// `KFD_UMF_RESULTS_START_FROM`: the native error codes (`get_last_native_error`) are this
/// plus a step, as UMF's OS provider does with `UMF_OS_RESULTS_START_FROM`.
pub const KFD_UMF_RESULTS_START_FROM: i32 = 2000;
/// `KFD_UMF_RESULT_ALLOC_FAILED` ([`NativeCode::AllocFailed`]).
///
/// [`NativeCode::AllocFailed`]: kfd_provider::NativeCode::AllocFailed
pub const KFD_UMF_RESULT_ALLOC_FAILED: i32 = KFD_UMF_RESULTS_START_FROM + 1;
/// `KFD_UMF_RESULT_FREE_FAILED` ([`NativeCode::FreeFailed`]).
///
/// [`NativeCode::FreeFailed`]: kfd_provider::NativeCode::FreeFailed
pub const KFD_UMF_RESULT_FREE_FAILED: i32 = KFD_UMF_RESULTS_START_FROM + 2;
/// `KFD_UMF_RESULT_PURGE_LAZY_FAILED` ([`NativeCode::PurgeLazyFailed`]).
///
/// [`NativeCode::PurgeLazyFailed`]: kfd_provider::NativeCode::PurgeLazyFailed
pub const KFD_UMF_RESULT_PURGE_LAZY_FAILED: i32 = KFD_UMF_RESULTS_START_FROM + 3;
/// `KFD_UMF_RESULT_PURGE_FORCE_FAILED` ([`NativeCode::PurgeForceFailed`]).
///
/// [`NativeCode::PurgeForceFailed`]: kfd_provider::NativeCode::PurgeForceFailed
pub const KFD_UMF_RESULT_PURGE_FORCE_FAILED: i32 = KFD_UMF_RESULTS_START_FROM + 4;
/// `KFD_UMF_RESULT_IPC_GET_FAILED` ([`NativeCode::IpcGetFailed`]).
///
/// [`NativeCode::IpcGetFailed`]: kfd_provider::NativeCode::IpcGetFailed
pub const KFD_UMF_RESULT_IPC_GET_FAILED: i32 = KFD_UMF_RESULTS_START_FROM + 5;
/// `KFD_UMF_RESULT_IPC_OPEN_FAILED` ([`NativeCode::IpcOpenFailed`]).
///
/// [`NativeCode::IpcOpenFailed`]: kfd_provider::NativeCode::IpcOpenFailed
pub const KFD_UMF_RESULT_IPC_OPEN_FAILED: i32 = KFD_UMF_RESULTS_START_FROM + 6;
/// `KFD_UMF_RESULT_IPC_CLOSE_FAILED` ([`NativeCode::IpcCloseFailed`]).
///
/// [`NativeCode::IpcCloseFailed`]: kfd_provider::NativeCode::IpcCloseFailed
pub const KFD_UMF_RESULT_IPC_CLOSE_FAILED: i32 = KFD_UMF_RESULTS_START_FROM + 7;
/// `KFD_UMF_RESULT_INIT_FAILED` ([`NativeCode::InitFailed`]): opening `/dev/kfd`, the
/// topology, `ACQUIRE_VM` or the apertures failed in `initialize`.
///
/// [`NativeCode::InitFailed`]: kfd_provider::NativeCode::InitFailed
pub const KFD_UMF_RESULT_INIT_FAILED: i32 = KFD_UMF_RESULTS_START_FROM + 8;
/// `KFD_UMF_RESULT_WRONG_PROCESS` ([`NativeCode::WrongProcess`]): a provider used in a
/// forked child; the child must create its own.
///
/// [`NativeCode::WrongProcess`]: kfd_provider::NativeCode::WrongProcess
pub const KFD_UMF_RESULT_WRONG_PROCESS: i32 = KFD_UMF_RESULTS_START_FROM + 9;

/// `initialize(const void *params, void **provider)`.
pub type InitializeFn = unsafe extern "C" fn(*const c_void, *mut *mut c_void) -> umf_result_t;
/// `finalize(void *provider)`.
pub type FinalizeFn = unsafe extern "C" fn(*mut c_void) -> umf_result_t;
/// `alloc(void *provider, size_t size, size_t alignment, void **ptr)`.
pub type AllocFn =
    unsafe extern "C" fn(*mut c_void, usize, usize, *mut *mut c_void) -> umf_result_t;
/// `free(void *provider, void *ptr, size_t size)`, and the purges of the same shape.
pub type RangeFn = unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> umf_result_t;
/// `get_last_native_error(void *provider, const char **ppMessage, int32_t *pError)`.
pub type LastNativeErrorFn =
    unsafe extern "C" fn(*mut c_void, *mut *const c_char, *mut i32) -> umf_result_t;
/// `get_recommended_page_size(void *provider, size_t size, size_t *pageSize)`.
pub type RecommendedPageSizeFn =
    unsafe extern "C" fn(*mut c_void, usize, *mut usize) -> umf_result_t;
/// `get_min_page_size(void *provider, const void *ptr, size_t *pageSize)`.
pub type MinPageSizeFn =
    unsafe extern "C" fn(*mut c_void, *const c_void, *mut usize) -> umf_result_t;
/// `get_name(void *provider, const char **name)`.
pub type GetNameFn = unsafe extern "C" fn(*mut c_void, *mut *const c_char) -> umf_result_t;
/// `ext_allocation_merge(void *hProvider, void *lowPtr, void *highPtr, size_t totalSize)`.
pub type MergeFn =
    unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, usize) -> umf_result_t;
/// `ext_allocation_split(void *hProvider, void *ptr, size_t totalSize, size_t firstSize)`.
pub type SplitFn = unsafe extern "C" fn(*mut c_void, *mut c_void, usize, usize) -> umf_result_t;
/// `ext_get_ipc_handle_size(void *provider, size_t *size)`, and `get_cache_line_size` of the
/// same shape.
pub type SizeOutFn = unsafe extern "C" fn(*mut c_void, *mut usize) -> umf_result_t;
/// `ext_get_ipc_handle(void *provider, const void *ptr, size_t size, void *providerIpcData)`.
pub type GetIpcHandleFn =
    unsafe extern "C" fn(*mut c_void, *const c_void, usize, *mut c_void) -> umf_result_t;
/// `ext_put_ipc_handle(void *provider, void *providerIpcData)`.
pub type PutIpcHandleFn = unsafe extern "C" fn(*mut c_void, *mut c_void) -> umf_result_t;
/// `ext_open_ipc_handle(void *provider, void *providerIpcData, void **ptr)`.
pub type OpenIpcHandleFn =
    unsafe extern "C" fn(*mut c_void, *mut c_void, *mut *mut c_void) -> umf_result_t;
/// `ext_ctl(void *provider, umf_ctl_query_source_t source, const char *name, void *arg,
/// size_t size, umf_ctl_query_type_t queryType, va_list args)`.
///
/// A `va_list` parameter is passed as a pointer on the 64-bit Linux ABIs (x86-64: the array
/// `__va_list_tag[1]` decays to a pointer; AArch64: a 32-byte aggregate is passed by
/// reference), so it is mirrored as one. This provider never reads it.
pub type CtlFn = unsafe extern "C" fn(
    *mut c_void,
    umf_ctl_query_source_t,
    *const c_char,
    *mut c_void,
    usize,
    umf_ctl_query_type_t,
    *mut c_void,
) -> umf_result_t;
/// `ext_get_allocation_properties(void *provider, const void *ptr,
/// umf_memory_property_id_t memory_property_id, void *property_value)`.
pub type AllocationPropertiesFn = unsafe extern "C" fn(
    *mut c_void,
    *const c_void,
    umf_memory_property_id_t,
    *mut c_void,
) -> umf_result_t;
/// `ext_get_allocation_properties_size(void *provider,
/// umf_memory_property_id_t memory_property_id, size_t *size)`.
pub type AllocationPropertiesSizeFn =
    unsafe extern "C" fn(*mut c_void, umf_memory_property_id_t, *mut usize) -> umf_result_t;

/// UMF 1.x's `umf_memory_provider_ops_t` (`umf/memory_provider_ops.h` of UMF 1.2): the
/// version, then one function pointer per operation, NULL (`None`) for an optional one the
/// provider lacks.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct umf_memory_provider_ops_t {
    /// The ops structure's version ([`UMF_PROVIDER_OPS_VERSION_CURRENT`]).
    pub version: u32,
    /// The padding C puts between the `uint32_t` and the first pointer.
    pub _pad0: [u8; 4],
    /// Creates the provider from its params.
    pub initialize: Option<InitializeFn>,
    /// Destroys the provider.
    pub finalize: Option<FinalizeFn>,
    /// Allocates.
    pub alloc: Option<AllocFn>,
    /// Frees.
    pub free: Option<RangeFn>,
    /// This thread's last provider-specific error.
    pub get_last_native_error: Option<LastNativeErrorFn>,
    /// The page size allocations should be made in.
    pub get_recommended_page_size: Option<RecommendedPageSizeFn>,
    /// The smallest page size of the provider's memory.
    pub get_min_page_size: Option<MinPageSizeFn>,
    /// The provider's name.
    pub get_name: Option<GetNameFn>,
    /// Discards pages, possibly later.
    pub ext_purge_lazy: Option<RangeFn>,
    /// Discards pages now; they read back as zeros.
    pub ext_purge_force: Option<RangeFn>,
    /// Merges two adjacent allocations.
    pub ext_allocation_merge: Option<MergeFn>,
    /// Splits an allocation in two.
    pub ext_allocation_split: Option<SplitFn>,
    /// The size of the provider's IPC data.
    pub ext_get_ipc_handle_size: Option<SizeOutFn>,
    /// Fills IPC data for a range.
    pub ext_get_ipc_handle: Option<GetIpcHandleFn>,
    /// Releases IPC data.
    pub ext_put_ipc_handle: Option<PutIpcHandleFn>,
    /// Maps another process's memory from its IPC data.
    pub ext_open_ipc_handle: Option<OpenIpcHandleFn>,
    /// Unmaps what `ext_open_ipc_handle` mapped.
    pub ext_close_ipc_handle: Option<RangeFn>,
    /// A CTL query.
    pub ext_ctl: Option<CtlFn>,
    /// A property of an allocation (ops version 1.1).
    pub ext_get_allocation_properties: Option<AllocationPropertiesFn>,
    /// The size of a property (ops version 1.1).
    pub ext_get_allocation_properties_size: Option<AllocationPropertiesSizeFn>,
    /// The cache-line size of the memory (ops version 1.2).
    pub get_cache_line_size: Option<SizeOutFn>,
}

const PTR: usize = size_of::<usize>();
const _: () = {
    assert!(PTR == 8, "the mirror is for 64-bit targets");
    assert!(size_of::<umf_memory_provider_ops_t>() == 8 + 21 * PTR);
    assert!(offset_of!(umf_memory_provider_ops_t, initialize) == 8);
    assert!(offset_of!(umf_memory_provider_ops_t, get_name) == 8 + 7 * PTR);
    assert!(offset_of!(umf_memory_provider_ops_t, ext_allocation_merge) == 8 + 10 * PTR);
    assert!(offset_of!(umf_memory_provider_ops_t, ext_allocation_split) == 8 + 11 * PTR);
    assert!(offset_of!(umf_memory_provider_ops_t, ext_ctl) == 8 + 17 * PTR);
    assert!(offset_of!(umf_memory_provider_ops_t, get_cache_line_size) == 8 + 20 * PTR);
    // `Option` of a function pointer is a nullable pointer.
    assert!(size_of::<Option<CtlFn>>() == PTR);
};

/// One member of a mirrored C struct, as the Rust mirror lays it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldLayout {
    /// The member's C name.
    pub name: &'static str,
    /// `offsetof`.
    pub offset: usize,
    /// `sizeof` of the member.
    pub size: usize,
}

fn size_of_field<T, F>(_: impl Fn(&T) -> &F) -> usize {
    size_of::<F>()
}

macro_rules! ops_fields {
    ($($field:ident),* $(,)?) => {
        vec![$(FieldLayout {
            name: stringify!($field),
            offset: offset_of!(umf_memory_provider_ops_t, $field),
            size: size_of_field(|ops: &umf_memory_provider_ops_t| &ops.$field),
        }),*]
    };
}

/// The layout of [`umf_memory_provider_ops_t`]: every C member (not the explicit padding), in
/// declaration order, for the layout test's C probe.
pub fn ops_layout() -> Vec<FieldLayout> {
    ops_fields!(
        version,
        initialize,
        finalize,
        alloc,
        free,
        get_last_native_error,
        get_recommended_page_size,
        get_min_page_size,
        get_name,
        ext_purge_lazy,
        ext_purge_force,
        ext_allocation_merge,
        ext_allocation_split,
        ext_get_ipc_handle_size,
        ext_get_ipc_handle,
        ext_put_ipc_handle,
        ext_open_ipc_handle,
        ext_close_ipc_handle,
        ext_ctl,
        ext_get_allocation_properties,
        ext_get_allocation_properties_size,
        get_cache_line_size,
    )
}

macro_rules! constants {
    ($($name:ident),* $(,)?) => {
        vec![$((stringify!($name), i64::from($name))),*]
    };
}

/// Every constant of this module by its C name, with its value, for the layout test's C
/// probe (`UMF_PROVIDER_OPS_VERSION_CURRENT` included).
pub fn constants() -> Vec<(&'static str, i64)> {
    constants!(
        UMF_RESULT_SUCCESS,
        UMF_RESULT_ERROR_OUT_OF_HOST_MEMORY,
        UMF_RESULT_ERROR_MEMORY_PROVIDER_SPECIFIC,
        UMF_RESULT_ERROR_INVALID_ARGUMENT,
        UMF_RESULT_ERROR_INVALID_ALIGNMENT,
        UMF_RESULT_ERROR_NOT_SUPPORTED,
        UMF_RESULT_ERROR_USER_SPECIFIC,
        UMF_RESULT_ERROR_DEPENDENCY_UNAVAILABLE,
        UMF_RESULT_ERROR_OUT_OF_RESOURCES,
        UMF_RESULT_ERROR_INVALID_CTL_PATH,
        UMF_RESULT_ERROR_UNKNOWN,
        UMF_PROVIDER_OPS_VERSION_CURRENT,
        CTL_UNKNOWN_QUERY_SOURCE,
        CTL_QUERY_PROGRAMMATIC,
        CTL_QUERY_CONFIG_INPUT,
        CTL_QUERY_READ,
        CTL_QUERY_WRITE,
        CTL_QUERY_RUNNABLE,
        UMF_MEMORY_PROPERTY_INVALID,
        UMF_MEMORY_PROPERTY_PROVIDER_HANDLE,
        UMF_MEMORY_PROPERTY_POOL_HANDLE,
        UMF_MEMORY_PROPERTY_BASE_ADDRESS,
        UMF_MEMORY_PROPERTY_BASE_SIZE,
        UMF_MEMORY_PROPERTY_BUFFER_ID,
        UMF_MEMORY_PROPERTY_POINTER_TYPE,
        UMF_MEMORY_PROPERTY_CONTEXT,
        UMF_MEMORY_PROPERTY_DEVICE,
        UMF_MEMORY_PROPERTY_MAX_RESERVED,
        UMF_MEMORY_TYPE_UNKNOWN,
        UMF_MEMORY_TYPE_HOST,
        UMF_MEMORY_TYPE_DEVICE,
        UMF_MEMORY_TYPE_SHARED,
        KFD_UMF_KIND_HOST,
        KFD_UMF_KIND_DEVICE,
        KFD_UMF_KIND_SHARED,
        KFD_UMF_RESULTS_START_FROM,
        KFD_UMF_RESULT_ALLOC_FAILED,
        KFD_UMF_RESULT_FREE_FAILED,
        KFD_UMF_RESULT_PURGE_LAZY_FAILED,
        KFD_UMF_RESULT_PURGE_FORCE_FAILED,
        KFD_UMF_RESULT_IPC_GET_FAILED,
        KFD_UMF_RESULT_IPC_OPEN_FAILED,
        KFD_UMF_RESULT_IPC_CLOSE_FAILED,
        KFD_UMF_RESULT_INIT_FAILED,
        KFD_UMF_RESULT_WRONG_PROCESS,
    )
}

/// The C types whose size the layout test compares (enums are `int`-sized).
pub fn type_sizes() -> Vec<(&'static str, usize)> {
    vec![
        (
            "umf_memory_provider_ops_t",
            size_of::<umf_memory_provider_ops_t>(),
        ),
        ("umf_result_t", size_of::<umf_result_t>()),
        (
            "umf_ctl_query_source_t",
            size_of::<umf_ctl_query_source_t>(),
        ),
        ("umf_ctl_query_type_t", size_of::<umf_ctl_query_type_t>()),
        (
            "umf_memory_property_id_t",
            size_of::<umf_memory_property_id_t>(),
        ),
        ("umf_usm_memory_type_t", size_of::<umf_usm_memory_type_t>()),
        ("kfd_umf_kind_t", size_of::<kfd_umf_kind_t>()),
    ]
}
