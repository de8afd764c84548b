//! The ops: each member of [`umf_memory_provider_ops_t`] as an `extern "C"` function over a
//! [`KfdProvider`].
//!
//! The `void *provider` UMF passes back is a `Box<UmfProvider>` made by `initialize` and
//! freed by `finalize`. Every function checks its pointers (NULL is an invalid argument, as
//! UMF's `providerHandleCheck` test requires, except `get_name`, which answers the default
//! name for a NULL provider), runs inside [`guard`] so that no panic crosses into C, and
//! records a provider-specific error as this thread's last native error before returning
//! `UMF_RESULT_ERROR_MEMORY_PROVIDER_SPECIFIC`.

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_void};
use std::ptr::NonNull;
use std::sync::{Mutex, PoisonError};

use kfd_ioctl::Kfd;
use kfd_provider::{Error, IPC_HANDLE_SIZE, IpcHandle, KfdProvider, NativeCode, NativeError};

use crate::abi::*;
use crate::guard;
use crate::params::{kfd_memory_provider_params_t, kind_to_raw};

/// The name of a provider created without `kfdMemoryProviderParamsSetName`, and what
/// `get_name(NULL, &name)` answers.
pub const DEFAULT_NAME: &CStr = c"KFD";

/// What `initialize` hands UMF as the provider.
struct UmfProvider {
    provider: KfdProvider,
    name: CString,
}

/// The process's `/dev/kfd` handle, and the process it was opened in.
///
/// KFD binds each GPU's VM to one render-node file per process, so every provider of a
/// process must share one `Kfd`. A forked child is a new KFD process: the handle it inherited
/// is the parent's, so the first provider created in the child opens `/dev/kfd` afresh.
static PROCESS_KFD: Mutex<Option<(u32, Kfd)>> = Mutex::new(None);

/// The `/dev/kfd` handle the providers of this process share: opened by the first call in
/// the process (a forked child's first call opens its own), and a clone of it afterwards.
///
/// Rust code that makes [`KfdProvider`]s in a process that also creates providers through
/// [`kfdMemoryProviderOps`] must make them from this handle: a second `Kfd::open` in the same
/// process cannot acquire the GPUs again. Errors are [`Error::ProviderSpecific`] with
/// [`NativeCode::InitFailed`].
pub fn process_kfd() -> Result<Kfd, Error> {
    let pid = std::process::id();
    let mut slot = PROCESS_KFD.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((owner, kfd)) = slot.as_ref()
        && *owner == pid
    {
        return Ok(kfd.clone());
    }
    let kfd = Kfd::open().map_err(|e| {
        Error::ProviderSpecific(NativeError {
            code: NativeCode::InitFailed,
            errno: e.errno(),
            message: format!("initialize: opening {}: {e}", kfd_ioctl::KFD_DEVICE_PATH),
        })
    })?;
    *slot = Some((pid, kfd.clone()));
    Ok(kfd)
}

thread_local! {
    /// This thread's last provider-specific error: its code and message.
    static LAST_NATIVE: RefCell<Option<(i32, CString)>> = const { RefCell::new(None) };
}

/// The UMF result of `error`; a provider-specific one is first stored as this thread's last
/// native error.
fn fail(error: &Error) -> umf_result_t {
    if let Some(native) = error.native() {
        let message = CString::new(native.message.replace('\0', " ")).unwrap_or_default();
        LAST_NATIVE.with(|last| *last.borrow_mut() = Some((native.raw_code(), message)));
    }
    error.umf_result() as umf_result_t
}

fn result(r: Result<(), Error>) -> umf_result_t {
    match r {
        Ok(()) => UMF_RESULT_SUCCESS,
        Err(e) => fail(&e),
    }
}

/// The provider behind UMF's `void *provider`.
///
/// # Safety
///
/// `provider` is NULL or a pointer `initialize` returned that `finalize` has not freed.
unsafe fn provider<'a>(provider: *mut c_void) -> Option<&'a UmfProvider> {
    // SAFETY: by the caller's contract, a non-NULL pointer is a live Box<UmfProvider>; UMF
    // only shares it (every method takes `&self` and the provider is Sync).
    unsafe { provider.cast::<UmfProvider>().as_ref() }
}

/// Writes `value` to the out-pointer `out`: success, or an invalid argument when it is NULL.
///
/// # Safety
///
/// `out` is NULL or valid for a (possibly unaligned) write of a `T`.
unsafe fn put<T>(out: *mut T, value: T) -> umf_result_t {
    if out.is_null() {
        return UMF_RESULT_ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: non-NULL and writable by the caller's contract; C may hand any alignment.
    unsafe { out.write_unaligned(value) };
    UMF_RESULT_SUCCESS
}

/// Runs `f` on the provider, or answers an invalid argument for a NULL one.
///
/// # Safety
///
/// As [`provider`].
unsafe fn with(p: *mut c_void, f: impl FnOnce(&UmfProvider) -> umf_result_t) -> umf_result_t {
    // SAFETY: forwarded caller contract.
    match unsafe { provider(p) } {
        Some(p) => f(p),
        None => UMF_RESULT_ERROR_INVALID_ARGUMENT,
    }
}

/// Clears the out-pointer `out`, runs `make` on the provider and writes the pointer it makes
/// to `out`, which stays NULL unless the answer is success. `make` returns `None` for an
/// invalid argument.
///
/// # Safety
///
/// As [`provider`] for `p`, and as [`put`] for `out`.
unsafe fn put_made(
    p: *mut c_void,
    out: *mut *mut c_void,
    make: impl FnOnce(&UmfProvider) -> Option<Result<NonNull<u8>, Error>>,
) -> umf_result_t {
    // SAFETY: forwarded caller contract.
    let cleared = unsafe { put(out, std::ptr::null_mut()) };
    if cleared != UMF_RESULT_SUCCESS {
        return cleared;
    }
    // SAFETY: forwarded caller contract; `out` was writable just above.
    unsafe {
        with(p, |p| match make(p) {
            None => UMF_RESULT_ERROR_INVALID_ARGUMENT,
            Some(Ok(ptr)) => put(out, ptr.as_ptr().cast()),
            Some(Err(e)) => fail(&e),
        })
    }
}

/// `initialize(params, &provider)`: opens (or shares) this process's `/dev/kfd` and creates a
/// [`KfdProvider`] from the `kfd_memory_provider_params_t` at `params`.
unsafe extern "C" fn initialize(params: *const c_void, out: *mut *mut c_void) -> umf_result_t {
    guard(|| {
        // SAFETY: UMF passes the params pointer the user gave `umfMemoryProviderCreate`,
        // which for these ops is NULL or a live kfd_memory_provider_params_handle_t.
        let params = unsafe { params.cast::<kfd_memory_provider_params_t>().as_ref() };
        let (Some(params), false) = (params, out.is_null()) else {
            return UMF_RESULT_ERROR_INVALID_ARGUMENT;
        };
        let created = process_kfd().and_then(|kfd| KfdProvider::new(kfd, params.provider_params()));
        let provider = match created {
            Ok(provider) => provider,
            Err(e) => return fail(&e),
        };
        let name = CString::new(provider.name()).unwrap_or_else(|_| DEFAULT_NAME.to_owned());
        let boxed = Box::into_raw(Box::new(UmfProvider { provider, name }));
        // SAFETY: checked non-NULL; UMF passes a writable slot.
        unsafe { out.write(boxed.cast()) };
        UMF_RESULT_SUCCESS
    })
}

/// `finalize(provider)`: frees everything the provider still holds (in a forked child:
/// without touching the parent's KFD objects).
unsafe extern "C" fn finalize(p: *mut c_void) -> umf_result_t {
    guard(|| {
        if p.is_null() {
            return UMF_RESULT_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: UMF calls finalize once, with the pointer initialize made by Box::into_raw.
        drop(unsafe { Box::from_raw(p.cast::<UmfProvider>()) });
        UMF_RESULT_SUCCESS
    })
}

unsafe extern "C" fn alloc(
    p: *mut c_void,
    size: usize,
    alignment: usize,
    out: *mut *mut c_void,
) -> umf_result_t {
    guard(|| {
        // SAFETY: UMF passes its provider pointer and an out slot (NULL checked by `put`).
        unsafe { put_made(p, out, |p| Some(p.provider.alloc(size, alignment))) }
    })
}

unsafe extern "C" fn free(p: *mut c_void, ptr: *mut c_void, size: usize) -> umf_result_t {
    // SAFETY: UMF passes its provider pointer.
    guard(|| unsafe { with(p, |p| result(p.provider.free(ptr.cast(), size))) })
}

/// `get_last_native_error(provider, &message, &code)`: this thread's last provider-specific
/// error (an empty message and 0 before any). The message stays valid until the next
/// provider-specific error on this thread.
unsafe extern "C" fn get_last_native_error(
    _p: *mut c_void,
    message: *mut *const c_char,
    code: *mut i32,
) -> umf_result_t {
    guard(|| {
        if message.is_null() || code.is_null() {
            return UMF_RESULT_ERROR_INVALID_ARGUMENT;
        }
        LAST_NATIVE.with(|last| {
            let last = last.borrow();
            let (raw, text) = match last.as_ref() {
                Some((raw, text)) => (*raw, text.as_ptr()),
                None => (0, c"".as_ptr()),
            };
            // SAFETY: both checked non-NULL; the text lives in this thread's slot until the
            // next error replaces it (static for the empty one).
            unsafe {
                message.write_unaligned(text);
                code.write_unaligned(raw);
            }
        });
        UMF_RESULT_SUCCESS
    })
}

unsafe extern "C" fn get_recommended_page_size(
    p: *mut c_void,
    size: usize,
    out: *mut usize,
) -> umf_result_t {
    guard(|| {
        // SAFETY: UMF passes its provider pointer and an out slot (NULL checked by `put`).
        unsafe { with(p, |p| put(out, p.provider.recommended_page_size(size))) }
    })
}

unsafe extern "C" fn get_min_page_size(
    p: *mut c_void,
    ptr: *const c_void,
    out: *mut usize,
) -> umf_result_t {
    guard(|| {
        // SAFETY: UMF passes its provider pointer and an out slot (NULL checked by `put`).
        unsafe { with(p, |p| put(out, p.provider.min_page_size(ptr.cast()))) }
    })
}

/// `get_name(provider, &name)`: the provider's name, or [`DEFAULT_NAME`] for a NULL provider.
unsafe extern "C" fn get_name(p: *mut c_void, out: *mut *const c_char) -> umf_result_t {
    guard(|| {
        // SAFETY: UMF passes its provider pointer (or NULL) and an out slot (NULL checked).
        unsafe {
            let name = match provider(p) {
                Some(p) => p.name.as_ptr(),
                None => DEFAULT_NAME.as_ptr(),
            };
            put(out, name)
        }
    })
}

unsafe extern "C" fn purge_lazy(p: *mut c_void, ptr: *mut c_void, size: usize) -> umf_result_t {
    // SAFETY: UMF passes its provider pointer.
    guard(|| unsafe { with(p, |p| result(p.provider.purge_lazy(ptr.cast(), size))) })
}

unsafe extern "C" fn purge_force(p: *mut c_void, ptr: *mut c_void, size: usize) -> umf_result_t {
    // SAFETY: UMF passes its provider pointer.
    guard(|| unsafe { with(p, |p| result(p.provider.purge_force(ptr.cast(), size))) })
}

unsafe extern "C" fn allocation_merge(
    p: *mut c_void,
    low: *mut c_void,
    high: *mut c_void,
    total: usize,
) -> umf_result_t {
    guard(|| {
        // SAFETY: UMF passes its provider pointer.
        unsafe {
            with(p, |p| {
                result(p.provider.allocation_merge(low.cast(), high.cast(), total))
            })
        }
    })
}

unsafe extern "C" fn allocation_split(
    p: *mut c_void,
    ptr: *mut c_void,
    total: usize,
    first: usize,
) -> umf_result_t {
    guard(|| {
        // SAFETY: UMF passes its provider pointer.
        unsafe {
            with(p, |p| {
                result(p.provider.allocation_split(ptr.cast(), total, first))
            })
        }
    })
}

unsafe extern "C" fn get_ipc_handle_size(p: *mut c_void, out: *mut usize) -> umf_result_t {
    guard(|| {
        // SAFETY: UMF passes its provider pointer and an out slot (NULL checked by `put`).
        unsafe { with(p, |p| put(out, p.provider.get_ipc_handle_size())) }
    })
}

unsafe extern "C" fn get_ipc_handle(
    p: *mut c_void,
    ptr: *const c_void,
    size: usize,
    data: *mut c_void,
) -> umf_result_t {
    guard(|| {
        if data.is_null() {
            return UMF_RESULT_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: UMF passes its provider pointer, and IPC data of the size
        // `get_ipc_handle_size` gave (IPC_HANDLE_SIZE bytes).
        unsafe {
            with(p, |p| {
                match p.provider.get_ipc_handle(ptr.cast_mut().cast(), size) {
                    Ok(handle) => {
                        std::ptr::copy_nonoverlapping(
                            handle.as_bytes().as_ptr(),
                            data.cast::<u8>(),
                            IPC_HANDLE_SIZE,
                        );
                        UMF_RESULT_SUCCESS
                    }
                    Err(e) => fail(&e),
                }
            })
        }
    })
}

/// The handle in UMF's provider IPC data; `None` for NULL.
///
/// # Safety
///
/// `data` is NULL or readable for `IPC_HANDLE_SIZE` bytes.
unsafe fn ipc_handle(data: *const c_void) -> Option<Result<IpcHandle, Error>> {
    if data.is_null() {
        return None;
    }
    // SAFETY: non-NULL and readable for the handle's size by the caller's contract.
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), IPC_HANDLE_SIZE) };
    Some(IpcHandle::from_bytes(bytes))
}

unsafe extern "C" fn put_ipc_handle(p: *mut c_void, data: *mut c_void) -> umf_result_t {
    guard(|| {
        // SAFETY: UMF passes its provider pointer and IPC data of the handle size.
        unsafe {
            with(p, |p| match ipc_handle(data) {
                None => UMF_RESULT_ERROR_INVALID_ARGUMENT,
                Some(handle) => result(handle.and_then(|h| p.provider.put_ipc_handle(&h))),
            })
        }
    })
}

unsafe extern "C" fn open_ipc_handle(
    p: *mut c_void,
    data: *mut c_void,
    out: *mut *mut c_void,
) -> umf_result_t {
    guard(|| {
        // SAFETY: UMF passes its provider pointer, IPC data of the handle size and an out
        // slot (NULL checked by `put`).
        unsafe {
            put_made(p, out, |p| {
                let handle = ipc_handle(data)?;
                Some(handle.and_then(|h| p.provider.open_ipc_handle(&h)))
            })
        }
    })
}

unsafe extern "C" fn close_ipc_handle(
    p: *mut c_void,
    ptr: *mut c_void,
    size: usize,
) -> umf_result_t {
    // SAFETY: UMF passes its provider pointer.
    guard(|| unsafe { with(p, |p| result(p.provider.close_ipc_handle(ptr.cast(), size))) })
}

/// `ext_ctl`: reads `stats.allocated_memory` and `stats.peak_memory` (a `size_t` each, as
/// UMF's OS provider serves them under `umf.provider.by_handle.{}.`); every other path is
/// `UMF_RESULT_ERROR_INVALID_CTL_PATH`.
unsafe extern "C" fn ctl(
    p: *mut c_void,
    _source: umf_ctl_query_source_t,
    name: *const c_char,
    arg: *mut c_void,
    size: usize,
    query: umf_ctl_query_type_t,
    _args: *mut c_void,
) -> umf_result_t {
    guard(|| {
        if name.is_null() {
            return UMF_RESULT_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: UMF passes a NUL-terminated path.
        let name = unsafe { CStr::from_ptr(name) }.to_bytes();
        // SAFETY: UMF passes its provider pointer.
        unsafe {
            with(p, |p| {
                let stats = p.provider.stats();
                let value = match name {
                    b"stats.allocated_memory" => stats.allocated,
                    b"stats.peak_memory" => stats.peak,
                    _ => return UMF_RESULT_ERROR_INVALID_CTL_PATH,
                };
                if query != CTL_QUERY_READ || size < size_of::<usize>() {
                    return UMF_RESULT_ERROR_INVALID_ARGUMENT;
                }
                // SAFETY: a READ query's `arg` is writable for `size` bytes, checked above.
                put(arg.cast::<usize>(), value)
            })
        }
    })
}

/// The size of a property this provider answers: `POINTER_TYPE` (an `umf_usm_memory_type_t`)
/// and `DEVICE` (the GPU's `gpu_id`, a `uint32_t`).
fn property_size(id: umf_memory_property_id_t) -> Option<usize> {
    match id {
        UMF_MEMORY_PROPERTY_POINTER_TYPE => Some(size_of::<umf_usm_memory_type_t>()),
        UMF_MEMORY_PROPERTY_DEVICE => Some(size_of::<u32>()),
        _ => None,
    }
}

unsafe extern "C" fn get_allocation_properties(
    p: *mut c_void,
    ptr: *const c_void,
    id: umf_memory_property_id_t,
    value: *mut c_void,
) -> umf_result_t {
    guard(|| {
        if value.is_null() || property_size(id).is_none() {
            return UMF_RESULT_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: UMF passes its provider pointer, and a value buffer of the size
        // `get_allocation_properties_size` gave for `id`.
        unsafe {
            with(p, |p| {
                let Some(info) = p.provider.allocation_info(ptr.cast()) else {
                    return UMF_RESULT_ERROR_INVALID_ARGUMENT;
                };
                let raw = match id {
                    UMF_MEMORY_PROPERTY_POINTER_TYPE => kind_to_raw(info.kind),
                    _ => info.gpu_id.get(),
                };
                value.cast::<u32>().write_unaligned(raw);
                UMF_RESULT_SUCCESS
            })
        }
    })
}

unsafe extern "C" fn get_allocation_properties_size(
    p: *mut c_void,
    id: umf_memory_property_id_t,
    out: *mut usize,
) -> umf_result_t {
    guard(|| {
        // SAFETY: UMF passes its provider pointer and an out slot (NULL checked by `put`).
        unsafe {
            with(p, |_| match property_size(id) {
                Some(size) => put(out, size),
                None => UMF_RESULT_ERROR_INVALID_ARGUMENT,
            })
        }
    })
}

unsafe extern "C" fn get_cache_line_size(p: *mut c_void, out: *mut usize) -> umf_result_t {
    guard(|| {
        // SAFETY: UMF passes its provider pointer and an out slot (NULL checked by `put`).
        unsafe { with(p, |p| put(out, p.provider.cache_line_size())) }
    })
}

/// The ops: every member set, at [`UMF_PROVIDER_OPS_VERSION_CURRENT`].
static OPS: umf_memory_provider_ops_t = umf_memory_provider_ops_t {
    version: UMF_PROVIDER_OPS_VERSION_CURRENT,
    _pad0: [0; 4],
    initialize: Some(initialize),
    finalize: Some(finalize),
    alloc: Some(alloc),
    free: Some(free),
    get_last_native_error: Some(get_last_native_error),
    get_recommended_page_size: Some(get_recommended_page_size),
    get_min_page_size: Some(get_min_page_size),
    get_name: Some(get_name),
    ext_purge_lazy: Some(purge_lazy),
    ext_purge_force: Some(purge_force),
    ext_allocation_merge: Some(allocation_merge),
    ext_allocation_split: Some(allocation_split),
    ext_get_ipc_handle_size: Some(get_ipc_handle_size),
    ext_get_ipc_handle: Some(get_ipc_handle),
    ext_put_ipc_handle: Some(put_ipc_handle),
    ext_open_ipc_handle: Some(open_ipc_handle),
    ext_close_ipc_handle: Some(close_ipc_handle),
    ext_ctl: Some(ctl),
    ext_get_allocation_properties: Some(get_allocation_properties),
    ext_get_allocation_properties_size: Some(get_allocation_properties_size),
    get_cache_line_size: Some(get_cache_line_size),
};

/// `kfdMemoryProviderOps()`: the ops of the KFD memory provider, for
/// `umfMemoryProviderCreate(kfdMemoryProviderOps(), hParams, &hProvider)` with params from
/// [`kfdMemoryProviderParamsCreate`](crate::kfdMemoryProviderParamsCreate). Every member is
/// set; the pointer is valid for the life of the library.
#[unsafe(no_mangle)]
pub extern "C" fn kfdMemoryProviderOps() -> *const umf_memory_provider_ops_t {
    &OPS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_name_is_the_rust_providers() {
        assert_eq!(DEFAULT_NAME.to_str(), Ok(KfdProvider::DEFAULT_NAME));
    }

    #[test]
    fn every_op_refuses_a_null_provider_and_null_out_pointers() {
        let ops = OPS;
        let mut size = 0usize;
        let mut ptr = std::ptr::null_mut();
        let mut name = std::ptr::null();
        let null = std::ptr::null_mut();
        let bad = UMF_RESULT_ERROR_INVALID_ARGUMENT;
        // SAFETY: every call passes NULL or pointers to the locals above.
        unsafe {
            assert_eq!(ops.alloc.unwrap()(null, 4096, 0, &mut ptr), bad);
            assert_eq!(ops.alloc.unwrap()(null, 4096, 0, null.cast()), bad);
            ptr = 8 as *mut c_void;
            assert_eq!(ops.ext_open_ipc_handle.unwrap()(null, null, &mut ptr), bad);
            assert_eq!(ptr, null, "the out slot is cleared on failure");
            assert_eq!(
                ops.ext_open_ipc_handle.unwrap()(null, null, null.cast()),
                bad
            );
            assert_eq!(ops.free.unwrap()(null, null, 0), bad);
            assert_eq!(
                ops.get_recommended_page_size.unwrap()(null, 0, &mut size),
                bad
            );
            assert_eq!(ops.get_min_page_size.unwrap()(null, null, &mut size), bad);
            assert_eq!(ops.get_cache_line_size.unwrap()(null, &mut size), bad);
            assert_eq!(ops.ext_purge_lazy.unwrap()(null, null, 0), bad);
            assert_eq!(ops.ext_purge_force.unwrap()(null, null, 0), bad);
            assert_eq!(ops.ext_get_ipc_handle_size.unwrap()(null, &mut size), bad);
            assert_eq!(ops.finalize.unwrap()(null), bad);
            assert_eq!(ops.initialize.unwrap()(null, &mut ptr), bad);
            assert_eq!(ops.get_name.unwrap()(null, null.cast()), bad);
            assert_eq!(ops.get_name.unwrap()(null, &mut name), UMF_RESULT_SUCCESS);
            assert_eq!(CStr::from_ptr(name), DEFAULT_NAME);
            assert_eq!(
                ops.get_last_native_error.unwrap()(null, null.cast(), null.cast()),
                bad
            );
        }
        assert_eq!(ptr, std::ptr::null_mut());
    }

    #[test]
    fn a_panic_becomes_unknown() {
        assert_eq!(guard(|| panic!("deliberate")), UMF_RESULT_ERROR_UNKNOWN);
        assert_eq!(guard(|| UMF_RESULT_SUCCESS), UMF_RESULT_SUCCESS);
    }

    #[test]
    fn a_provider_specific_error_is_this_threads_last_native_error() {
        let error = Error::ProviderSpecific(NativeError {
            code: NativeCode::FreeFailed,
            errno: None,
            message: "free: 0x1 is not an allocation of this provider".into(),
        });
        assert_eq!(fail(&error), UMF_RESULT_ERROR_MEMORY_PROVIDER_SPECIFIC);
        let read = || {
            let (mut message, mut code) = (std::ptr::null(), 0);
            // SAFETY: both out pointers are locals; the message is read before any other
            // error on this thread.
            unsafe {
                let r = get_last_native_error(std::ptr::null_mut(), &mut message, &mut code);
                assert_eq!(r, UMF_RESULT_SUCCESS);
                (code, CStr::from_ptr(message).to_string_lossy().into_owned())
            }
        };
        assert_eq!(
            read(),
            (
                KFD_UMF_RESULT_FREE_FAILED,
                "free: 0x1 is not an allocation of this provider".to_owned()
            )
        );
        // Other errors leave it; another thread has none.
        assert_eq!(
            fail(&Error::NotSupported("x".into())),
            UMF_RESULT_ERROR_NOT_SUPPORTED
        );
        assert_eq!(read().0, KFD_UMF_RESULT_FREE_FAILED);
        assert_eq!(std::thread::spawn(read).join().unwrap(), (0, String::new()));
    }
}
