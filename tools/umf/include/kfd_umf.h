/*
 * kfd_umf.h: the KFD memory provider for the Unified Memory Framework (UMF 1.x).
 *
 * Memory of AMD GPUs through raw /dev/kfd, as a UMF memory provider: HOST (system memory
 * the GPUs reach), DEVICE (VRAM of one GPU) or SHARED (SVM) allocations for any UMF pool,
 * with purges, split/merge and IPC across processes. Link with -lkfd_umf (libkfd_umf.so, the
 * kfd-umf crate of kfd-rs) and -lumf.
 *
 *     kfd_memory_provider_params_handle_t params;
 *     kfdMemoryProviderParamsCreate(&params);
 *     kfdMemoryProviderParamsSetKind(params, KFD_UMF_KIND_DEVICE);
 *     umf_memory_provider_handle_t provider;
 *     umfMemoryProviderCreate(kfdMemoryProviderOps(), params, &provider);
 *     kfdMemoryProviderParamsDestroy(params);
 *
 * SPDX-License-Identifier: MIT OR Apache-2.0
 */

#ifndef KFD_UMF_H
#define KFD_UMF_H 1

#include <stdint.h>

#include <umf/base.h>
#include <umf/memory_provider_ops.h>

#ifdef __cplusplus
extern "C" {
#endif

/// @brief The kind of memory a KFD provider hands out (the values of umf_usm_memory_type_t).
typedef enum kfd_umf_kind_t {
    /// System memory the provider's GPUs can reach, mapped on them, CPU-visible.
    KFD_UMF_KIND_HOST = 1,
    /// VRAM of one GPU; CPU-visible when the BAR allows. The pointer is the GPU address.
    KFD_UMF_KIND_DEVICE = 2,
    /// Shared virtual memory: one pointer for the CPU and the GPUs, migrated between them.
    KFD_UMF_KIND_SHARED = 3,
} kfd_umf_kind_t;

/// @brief The native error codes get_last_native_error reports with
///        UMF_RESULT_ERROR_MEMORY_PROVIDER_SPECIFIC (the message names the step, the ioctl,
///        the GPU and the errno).
typedef enum kfd_memory_provider_native_error {
    KFD_UMF_RESULTS_START_FROM = 2000,
    /// Allocating: the size, mmap, ALLOC_MEMORY_OF_GPU, MAP_MEMORY_TO_GPU or SVM SET_ATTR.
    KFD_UMF_RESULT_ALLOC_FAILED = KFD_UMF_RESULTS_START_FROM + 1,
    /// Freeing: not an allocation of this provider, or the unmap/free failed.
    KFD_UMF_RESULT_FREE_FAILED = KFD_UMF_RESULTS_START_FROM + 2,
    /// ext_purge_lazy: madvise failed.
    KFD_UMF_RESULT_PURGE_LAZY_FAILED = KFD_UMF_RESULTS_START_FROM + 3,
    /// ext_purge_force: madvise failed.
    KFD_UMF_RESULT_PURGE_FORCE_FAILED = KFD_UMF_RESULTS_START_FROM + 4,
    /// ext_get_ipc_handle: EXPORT_DMABUF failed.
    KFD_UMF_RESULT_IPC_GET_FAILED = KFD_UMF_RESULTS_START_FROM + 5,
    /// ext_open_ipc_handle: pidfd_open/pidfd_getfd, the mapping or the import failed.
    KFD_UMF_RESULT_IPC_OPEN_FAILED = KFD_UMF_RESULTS_START_FROM + 6,
    /// ext_close_ipc_handle: unmapping or freeing the imported memory failed.
    KFD_UMF_RESULT_IPC_CLOSE_FAILED = KFD_UMF_RESULTS_START_FROM + 7,
    /// initialize: opening /dev/kfd, the topology, ACQUIRE_VM or the apertures failed.
    KFD_UMF_RESULT_INIT_FAILED = KFD_UMF_RESULTS_START_FROM + 8,
    /// The provider was created by another process: a forked child is a new KFD process
    /// and must create its own provider.
    KFD_UMF_RESULT_WRONG_PROCESS = KFD_UMF_RESULTS_START_FROM + 9,
} kfd_memory_provider_native_error_t;

/// @brief The parameters of a KFD memory provider (opaque).
typedef struct kfd_memory_provider_params_t *kfd_memory_provider_params_handle_t;

/// @brief Creates provider parameters: HOST memory on the first GPU, named "KFD".
/// @param hParams [out] the new parameters; free them with kfdMemoryProviderParamsDestroy.
/// @return UMF_RESULT_SUCCESS, or UMF_RESULT_ERROR_INVALID_ARGUMENT for a NULL hParams.
umf_result_t
kfdMemoryProviderParamsCreate(kfd_memory_provider_params_handle_t *hParams);

/// @brief Destroys provider parameters (providers made from them keep their own copy).
/// @param hParams the parameters, or NULL (nothing to do).
/// @return UMF_RESULT_SUCCESS.
umf_result_t
kfdMemoryProviderParamsDestroy(kfd_memory_provider_params_handle_t hParams);

/// @brief Sets the kind of memory.
/// @param hParams the parameters.
/// @param kind KFD_UMF_KIND_HOST, KFD_UMF_KIND_DEVICE or KFD_UMF_KIND_SHARED.
/// @return UMF_RESULT_SUCCESS, or UMF_RESULT_ERROR_INVALID_ARGUMENT for a NULL handle or
///         another kind.
umf_result_t
kfdMemoryProviderParamsSetKind(kfd_memory_provider_params_handle_t hParams,
                               kfd_umf_kind_t kind);

/// @brief Sets the GPU: whose VRAM DEVICE memory is, and on which every kind is mapped.
/// @param hParams the parameters.
/// @param gpu_id the GPU's KFD gpu_id (topology/nodes/N/gpu_id); 0 means the first GPU.
///        umfMemoryProviderCreate fails with UMF_RESULT_ERROR_INVALID_ARGUMENT for an id
///        the topology lacks.
/// @return UMF_RESULT_SUCCESS, or UMF_RESULT_ERROR_INVALID_ARGUMENT for a NULL handle.
umf_result_t
kfdMemoryProviderParamsSetGpuId(kfd_memory_provider_params_handle_t hParams,
                                uint32_t gpu_id);

/// @brief Sets the provider's name (get_name), instead of "KFD".
/// @param hParams the parameters.
/// @param name 1 to 63 characters of [A-Za-z0-9_-]; copied.
/// @return UMF_RESULT_SUCCESS, or UMF_RESULT_ERROR_INVALID_ARGUMENT for a NULL handle or
///         name, or another name.
umf_result_t
kfdMemoryProviderParamsSetName(kfd_memory_provider_params_handle_t hParams,
                               const char *name);

/// @brief The operations of the KFD memory provider (UMF ops version 1.2, every member
///        set), for umfMemoryProviderCreate with params from kfdMemoryProviderParamsCreate.
const umf_memory_provider_ops_t *kfdMemoryProviderOps(void);

#ifdef __cplusplus
}
#endif

#endif /* KFD_UMF_H */
