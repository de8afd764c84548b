//! The KFD memory provider as a provider of Intel's Unified Memory Framework (UMF 1.x):
//! `libkfd_umf.so` and its header `include/kfd_umf.h`.
//!
//! [`kfd_provider::KfdProvider`] already has UMF's operations and rules; this crate is
//! the C ABI around it, in UMF's own style, so that real UMF pools (disjoint, proxy, jemalloc,
//! scalable) and UMF's IPC run over KFD memory:
//!
//! ```c
//! #include <umf/memory_provider.h>
//! #include <umf/pools/pool_disjoint.h>
//! #include <kfd_umf.h>
//!
//! kfd_memory_provider_params_handle_t params;
//! kfdMemoryProviderParamsCreate(&params);
//! kfdMemoryProviderParamsSetKind(params, KFD_UMF_KIND_DEVICE);
//! kfdMemoryProviderParamsSetGpuId(params, 0); // 0: the first GPU
//! umf_memory_provider_handle_t provider;
//! umfMemoryProviderCreate(kfdMemoryProviderOps(), params, &provider);
//! kfdMemoryProviderParamsDestroy(params);
//! umf_memory_pool_handle_t pool;
//! umfPoolCreate(umfDisjointPoolOps(), provider, NULL, UMF_POOL_CREATE_FLAG_OWN_PROVIDER, &pool);
//! void *vram = umfPoolMalloc(pool, 4096);
//! ```
//!
//! # The ops
//!
//! [`kfdMemoryProviderOps`] fills every member of UMF 1.2's `umf_memory_provider_ops_t`
//! (mirrored in [`abi::umf_memory_provider_ops_t`], checked against the `umf` 1.2.0 package's
//! header by `tests/layout.rs`), at ops version `UMF_MAKE_VERSION(1, 2)`: UMF 1.2 reads
//! `ext_get_allocation_properties*` and `get_cache_line_size` only from ops of that version.
//!
//! | op | [`KfdProvider`] |
//! |---|---|
//! | `initialize(params, &p)` | [`KfdProvider::new`] on the process's `/dev/kfd` (opened once per process, again in a forked child) |
//! | `finalize` | drop |
//! | `alloc`, `free` | [`KfdProvider::alloc`], [`KfdProvider::free`] |
//! | `get_last_native_error` | this thread's last provider-specific error: a `KFD_UMF_RESULT_*` code and a message naming the step, ioctl, GPU and errno |
//! | `get_recommended_page_size`, `get_min_page_size`, `get_cache_line_size` | [`KfdProvider::recommended_page_size`], [`KfdProvider::min_page_size`], [`KfdProvider::cache_line_size`] |
//! | `get_name` | the name from the params, `"KFD"` by default and for a NULL provider |
//! | `ext_purge_lazy`, `ext_purge_force` | [`KfdProvider::purge_lazy`], [`KfdProvider::purge_force`] |
//! | `ext_allocation_split`, `ext_allocation_merge` | [`KfdProvider::allocation_split`], [`KfdProvider::allocation_merge`] |
//! | `ext_get_ipc_handle_size`, `ext_get_ipc_handle`, `ext_put_ipc_handle`, `ext_open_ipc_handle`, `ext_close_ipc_handle` | the [`IpcHandle`] bytes and the provider's IPC methods (SHARED memory: `NOT_SUPPORTED`) |
//! | `ext_ctl` | `stats.allocated_memory` and `stats.peak_memory` from [`KfdProvider::stats`]; other paths `INVALID_CTL_PATH` |
//! | `ext_get_allocation_properties(_size)` | `POINTER_TYPE` (the kind as `umf_usm_memory_type_t`) and `DEVICE` (the `gpu_id`) from [`KfdProvider::allocation_info`] |
//!
//! Errors map through [`Error::umf_result`]. No panic crosses the FFI: every entry point
//! runs under [`std::panic::catch_unwind`] and answers `UMF_RESULT_ERROR_UNKNOWN` if Rust
//! code panicked.
//!
//! # Processes
//!
//! KFD binds each GPU's VM to one file per process, so all providers of a process share one
//! `/dev/kfd` handle, opened by the first `initialize`. A forked child is a new KFD process:
//! the providers it inherited refuse every call (`MEMORY_PROVIDER_SPECIFIC` with
//! `KFD_UMF_RESULT_WRONG_PROCESS`), and the first provider it creates opens `/dev/kfd`
//! again. IPC handles name a file of the producer by pid and fd, which the consumer takes with
//! `pidfd_getfd` (it needs ptrace rights on the producer).
//!
//! # Example (the ops called from Rust, as UMF calls them)
//!
//! ```
//! # kfd_emu::supervisor::run_attached(
//! #     kfd_emu::model::Model::new(kfd_emu::model::ModelConfig::default()).unwrap(),
//! #     || {
//! use kfd_umf::abi::{KFD_UMF_KIND_HOST, UMF_RESULT_SUCCESS};
//! use kfd_umf::*;
//!
//! // SAFETY: the ops get what UMF would give them: the params made here, then the provider
//! // `initialize` returned, until `finalize`.
//! unsafe {
//!     let ops = &*kfdMemoryProviderOps();
//!     let mut params = std::ptr::null_mut();
//!     assert_eq!(kfdMemoryProviderParamsCreate(&mut params), UMF_RESULT_SUCCESS);
//!     assert_eq!(kfdMemoryProviderParamsSetKind(params, KFD_UMF_KIND_HOST), UMF_RESULT_SUCCESS);
//!     let mut provider = std::ptr::null_mut();
//!     assert_eq!(ops.initialize.unwrap()(params.cast(), &mut provider), UMF_RESULT_SUCCESS);
//!     kfdMemoryProviderParamsDestroy(params);
//!     let mut ptr = std::ptr::null_mut();
//!     assert_eq!(ops.alloc.unwrap()(provider, 4096, 0, &mut ptr), UMF_RESULT_SUCCESS);
//!     ptr.cast::<u8>().write(7);
//!     assert_eq!(ops.free.unwrap()(provider, ptr, 4096), UMF_RESULT_SUCCESS);
//!     assert_eq!(ops.finalize.unwrap()(provider), UMF_RESULT_SUCCESS);
//! }
//! # }).unwrap();
//! ```
//!
//! [`KfdProvider`]: kfd_provider::KfdProvider
//! [`KfdProvider::new`]: kfd_provider::KfdProvider::new
//! [`KfdProvider::alloc`]: kfd_provider::KfdProvider::alloc
//! [`KfdProvider::free`]: kfd_provider::KfdProvider::free
//! [`KfdProvider::recommended_page_size`]: kfd_provider::KfdProvider::recommended_page_size
//! [`KfdProvider::min_page_size`]: kfd_provider::KfdProvider::min_page_size
//! [`KfdProvider::cache_line_size`]: kfd_provider::KfdProvider::cache_line_size
//! [`KfdProvider::purge_lazy`]: kfd_provider::KfdProvider::purge_lazy
//! [`KfdProvider::purge_force`]: kfd_provider::KfdProvider::purge_force
//! [`KfdProvider::allocation_split`]: kfd_provider::KfdProvider::allocation_split
//! [`KfdProvider::allocation_merge`]: kfd_provider::KfdProvider::allocation_merge
//! [`KfdProvider::stats`]: kfd_provider::KfdProvider::stats
//! [`KfdProvider::allocation_info`]: kfd_provider::KfdProvider::allocation_info
//! [`IpcHandle`]: kfd_provider::IpcHandle
//! [`Error::umf_result`]: kfd_provider::Error::umf_result

#![allow(non_snake_case)]

pub mod abi;
mod params;
mod provider;

use std::panic::{AssertUnwindSafe, catch_unwind};

pub use params::{
    kfd_memory_provider_params_handle_t, kfd_memory_provider_params_t,
    kfdMemoryProviderParamsCreate, kfdMemoryProviderParamsDestroy, kfdMemoryProviderParamsSetGpuId,
    kfdMemoryProviderParamsSetKind, kfdMemoryProviderParamsSetName, kind_from_raw, kind_to_raw,
};
pub use provider::{DEFAULT_NAME, kfdMemoryProviderOps, process_kfd};

/// Runs the body of an `extern "C"` entry point: a panic becomes `UMF_RESULT_ERROR_UNKNOWN`
/// instead of unwinding into C.
fn guard(body: impl FnOnce() -> abi::umf_result_t) -> abi::umf_result_t {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(abi::UMF_RESULT_ERROR_UNKNOWN)
}
