//! Pooled allocation of HOST memory against UMF's OS memory provider and `malloc`.
//!
//! One sample is UMF `ubench`'s `simple` shape: a batch of 64 blocks of one size (4 KiB –
//! 2 MiB) allocated, then freed last in first out. In the same run, per size:
//!
//! | bench | what allocates |
//! |---|---|
//! | `kfd_pool` | [`KfdPool`] over a HOST [`KfdProvider`] (Rust, no UMF) |
//! | `kfd_disjoint` | UMF's disjoint pool over `kfdMemoryProviderOps()` (this crate's C ABI) |
//! | `os_disjoint` | UMF's disjoint pool, same parameters, over UMF's OS memory provider |
//! | `os_provider` | UMF's OS memory provider itself (`umfMemoryProviderAlloc`/`Free`: an `mmap` and a `munmap` per block), the baseline of UMF's published numbers |
//! | `malloc` | glibc |
//!
//! The ratios printed at the end: each pooled KFD path against the OS provider (the target:
//! at least 5× faster, a ratio of time ≤ 0.2), against the OS provider under the same pool
//! (the same pool code, so about 1 in steady state: it shows the C ABI adds nothing), and
//! against `malloc`. The disjoint pools are set up (page-sized minimum slabs, a capacity of
//! 64 free slabs per bucket) so that in steady state no bench but `os_provider` reaches a
//! provider: a pool that did would measure KFD's allocation cost (an `mmap` and two ioctls)
//! against one `mmap`, not pooling.
//!
//! libumf is the `umf` 1.2.0 wheel that `scripts/fetch-umf.sh` unpacks into `target/umf`
//! (or `$KFD_UMF_DIR`), loaded with `dlopen`; without it only `kfd_pool` and `malloc` run.
//! Without `/dev/kfd` the bench runs under kfd-emu attached in-process; only warm-up reaches
//! KFD, so the emulator does not weigh on the measured numbers.

use std::ffi::{CString, c_void};
use std::hint::black_box;
use std::path::PathBuf;

use criterion::{BenchmarkGroup, BenchmarkId, Criterion, Throughput, measurement::WallTime};
use kfd_provider::{KfdPool, KfdProvider, MemoryKind, PoolParams, ProviderParams};
use kfd_umf::abi::{KFD_UMF_KIND_HOST, UMF_RESULT_SUCCESS, umf_memory_provider_ops_t};

#[path = "../../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

const GROUP: &str = "umf_vs_os";
const SIZES: [usize; 5] = [4 << 10, 64 << 10, 256 << 10, 1 << 20, 2 << 20];
const BATCH: usize = 64;

type Handle = *mut c_void;

/// The libumf 1.2 entry points the bench calls, with their C signatures.
struct Umf {
    provider_create:
        unsafe extern "C" fn(*const umf_memory_provider_ops_t, *const c_void, *mut Handle) -> i32,
    provider_destroy: unsafe extern "C" fn(Handle) -> i32,
    provider_alloc: unsafe extern "C" fn(Handle, usize, usize, *mut *mut c_void) -> i32,
    provider_free: unsafe extern "C" fn(Handle, *mut c_void, usize) -> i32,
    os_ops: unsafe extern "C" fn() -> *const umf_memory_provider_ops_t,
    os_params_create: unsafe extern "C" fn(*mut Handle) -> i32,
    os_params_destroy: unsafe extern "C" fn(Handle) -> i32,
    disjoint_ops: unsafe extern "C" fn() -> *const c_void,
    disjoint_params_create: unsafe extern "C" fn(*mut Handle) -> i32,
    disjoint_params_destroy: unsafe extern "C" fn(Handle) -> i32,
    disjoint_params_set_capacity: unsafe extern "C" fn(Handle, usize) -> i32,
    disjoint_params_set_slab_min_size: unsafe extern "C" fn(Handle, usize) -> i32,
    pool_create:
        unsafe extern "C" fn(*const c_void, Handle, *const c_void, u32, *mut Handle) -> i32,
    pool_destroy: unsafe extern "C" fn(Handle) -> i32,
    pool_malloc: unsafe extern "C" fn(Handle, usize) -> *mut c_void,
    pool_free: unsafe extern "C" fn(Handle, *mut c_void) -> i32,
}

/// Looks `name` up in `lib` as a function of type `F`.
///
/// # Safety
///
/// `F` is a function pointer type matching the C declaration of `name`.
unsafe fn symbol<F: Copy>(lib: *mut c_void, name: &str) -> Result<F, String> {
    let c_name = CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: `lib` is a live dlopen handle and the name is NUL-terminated.
    let ptr = unsafe { libc::dlsym(lib, c_name.as_ptr()) };
    if ptr.is_null() {
        return Err(format!("libumf has no {name}"));
    }
    assert_eq!(size_of::<F>(), size_of::<*mut c_void>());
    // SAFETY: a non-NULL symbol of a function whose C type `F` mirrors (caller's contract).
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&ptr) })
}

impl Umf {
    /// Loads `libumf.so` from `target/umf/lib` (or `$KFD_UMF_DIR/lib`).
    fn load() -> Result<Umf, String> {
        let dir = std::env::var_os("KFD_UMF_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/umf"));
        let path = dir.join("lib/libumf.so");
        if !path.is_file() {
            return Err(format!(
                "no {} (run `bash scripts/fetch-umf.sh`)",
                path.display()
            ));
        }
        let c_path =
            CString::new(path.to_string_lossy().into_owned()).map_err(|e| e.to_string())?;
        // SAFETY: loads UMF, whose initialisers only set up its own state; the handle stays
        // open for the process's life (the functions below point into it).
        let lib = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if lib.is_null() {
            return Err(format!("dlopen {} failed", path.display()));
        }
        // SAFETY: each type is the function's declaration in the umf 1.2.0 headers
        // (umf_result_t is an int; handles and ops are pointers; flags a uint32_t).
        unsafe {
            Ok(Umf {
                provider_create: symbol(lib, "umfMemoryProviderCreate")?,
                provider_destroy: symbol(lib, "umfMemoryProviderDestroy")?,
                provider_alloc: symbol(lib, "umfMemoryProviderAlloc")?,
                provider_free: symbol(lib, "umfMemoryProviderFree")?,
                os_ops: symbol(lib, "umfOsMemoryProviderOps")?,
                os_params_create: symbol(lib, "umfOsMemoryProviderParamsCreate")?,
                os_params_destroy: symbol(lib, "umfOsMemoryProviderParamsDestroy")?,
                disjoint_ops: symbol(lib, "umfDisjointPoolOps")?,
                disjoint_params_create: symbol(lib, "umfDisjointPoolParamsCreate")?,
                disjoint_params_destroy: symbol(lib, "umfDisjointPoolParamsDestroy")?,
                disjoint_params_set_capacity: symbol(lib, "umfDisjointPoolParamsSetCapacity")?,
                disjoint_params_set_slab_min_size: symbol(
                    lib,
                    "umfDisjointPoolParamsSetSlabMinSize",
                )?,
                pool_create: symbol(lib, "umfPoolCreate")?,
                pool_destroy: symbol(lib, "umfPoolDestroy")?,
                pool_malloc: symbol(lib, "umfPoolMalloc")?,
                pool_free: symbol(lib, "umfPoolFree")?,
            })
        }
    }

    /// UMF's OS memory provider with default params (private, read-write anonymous memory).
    fn os_provider(&self) -> Provider<'_> {
        let mut params = std::ptr::null_mut();
        let mut handle = std::ptr::null_mut();
        // SAFETY: the calls get out-pointers to locals and the params UMF just made.
        unsafe {
            assert_eq!((self.os_params_create)(&mut params), UMF_RESULT_SUCCESS);
            let r = (self.provider_create)((self.os_ops)(), params, &mut handle);
            assert_eq!(r, UMF_RESULT_SUCCESS, "creating the OS provider");
            (self.os_params_destroy)(params);
        }
        Provider { umf: self, handle }
    }

    /// A HOST KFD provider through this crate's C ABI.
    fn kfd_provider(&self) -> Provider<'_> {
        let mut params = std::ptr::null_mut();
        let mut handle = std::ptr::null_mut();
        // SAFETY: the calls get out-pointers to locals and the params just made.
        unsafe {
            assert_eq!(
                kfd_umf::kfdMemoryProviderParamsCreate(&mut params),
                UMF_RESULT_SUCCESS
            );
            kfd_umf::kfdMemoryProviderParamsSetKind(params, KFD_UMF_KIND_HOST);
            let r =
                (self.provider_create)(kfd_umf::kfdMemoryProviderOps(), params.cast(), &mut handle);
            assert_eq!(r, UMF_RESULT_SUCCESS, "creating the KFD provider");
            kfd_umf::kfdMemoryProviderParamsDestroy(params);
        }
        Provider { umf: self, handle }
    }
}

/// A UMF provider handle, destroyed on drop.
struct Provider<'a> {
    umf: &'a Umf,
    handle: Handle,
}

impl Drop for Provider<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle came from umfMemoryProviderCreate and its pools are gone.
        unsafe { (self.umf.provider_destroy)(self.handle) };
    }
}

/// A UMF disjoint pool over a provider, destroyed on drop (before the provider).
struct Pool<'a> {
    umf: &'a Umf,
    handle: Handle,
    _provider: Provider<'a>,
}

impl<'a> Pool<'a> {
    /// A disjoint pool that keeps a whole batch in steady state, for every size: slabs of
    /// (at least) a page, so that every bench size is a "chunked" bucket, which keeps up to
    /// `capacity` free slabs, and a capacity of a batch. (With UMF's defaults, 64 KiB slabs,
    /// buckets up to 32 KiB keep one free slab, so a batch of 4 KiB blocks goes to the
    /// provider three times.)
    fn disjoint(umf: &'a Umf, provider: Provider<'a>) -> Pool<'a> {
        let mut params = std::ptr::null_mut();
        let mut handle = std::ptr::null_mut();
        // SAFETY: out-pointers to locals, params and a provider UMF made.
        unsafe {
            assert_eq!(
                (umf.disjoint_params_create)(&mut params),
                UMF_RESULT_SUCCESS
            );
            assert_eq!(
                (umf.disjoint_params_set_capacity)(params, BATCH),
                UMF_RESULT_SUCCESS
            );
            let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
            assert_eq!(
                (umf.disjoint_params_set_slab_min_size)(params, page),
                UMF_RESULT_SUCCESS
            );
            let r = (umf.pool_create)(
                (umf.disjoint_ops)(),
                provider.handle,
                params,
                0,
                &mut handle,
            );
            assert_eq!(r, UMF_RESULT_SUCCESS, "creating the disjoint pool");
            (umf.disjoint_params_destroy)(params);
        }
        Pool {
            umf,
            handle,
            _provider: provider,
        }
    }
}

impl Drop for Pool<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle came from umfPoolCreate; every block was freed.
        unsafe { (self.umf.pool_destroy)(self.handle) };
    }
}

/// One bench: a batch of `size`-byte blocks from `alloc`, then each given to `free` LIFO.
fn batch(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    size: usize,
    mut alloc: impl FnMut(usize) -> *mut c_void,
    mut free: impl FnMut(*mut c_void, usize),
) {
    let mut blocks = Vec::with_capacity(BATCH);
    group.bench_function(BenchmarkId::new(name, size), |b| {
        b.iter(|| {
            for _ in 0..BATCH {
                let ptr = alloc(black_box(size));
                assert!(!ptr.is_null(), "{name}: allocating {size} bytes failed");
                blocks.push(ptr);
            }
            while let Some(ptr) = blocks.pop() {
                free(ptr, size);
            }
        })
    });
}

fn bench(c: &mut Criterion) {
    let umf = Umf::load()
        .map_err(|reason| println!("{GROUP}: UMF benches SKIPPED: {reason}"))
        .ok();
    // The handle the C ABI's providers use too: one per process.
    let kfd = kfd_umf::process_kfd().expect("/dev/kfd (or kfd-emu)");
    let params = PoolParams {
        retained_chunks: BATCH + 16,
        ..PoolParams::default()
    };
    let kfd_pool = KfdPool::new(
        KfdProvider::new(kfd, ProviderParams::new(MemoryKind::Host)).expect("provider"),
        params,
    )
    .expect("pool");
    let umf_side = umf.as_ref().map(|umf| {
        (
            Pool::disjoint(umf, umf.kfd_provider()),
            Pool::disjoint(umf, umf.os_provider()),
            umf.os_provider(),
        )
    });

    let mut group = c.benchmark_group(GROUP);
    group.throughput(Throughput::Elements(BATCH as u64));
    for size in SIZES {
        batch(
            &mut group,
            "kfd_pool",
            size,
            |n| kfd_pool.alloc(n, 0).expect("pool alloc").as_ptr().cast(),
            |p, _| kfd_pool.free(p.cast()).expect("pool free"),
        );
        if let (Some(umf), Some((kfd_disjoint, os_disjoint, os))) = (&umf, &umf_side) {
            for (name, pool) in [("kfd_disjoint", kfd_disjoint), ("os_disjoint", os_disjoint)] {
                batch(
                    &mut group,
                    name,
                    size,
                    // SAFETY: a live pool; every block goes back to it once.
                    |n| unsafe { (umf.pool_malloc)(pool.handle, n) },
                    |p, _| {
                        // SAFETY: as above.
                        let r = unsafe { (umf.pool_free)(pool.handle, p) };
                        assert_eq!(r, UMF_RESULT_SUCCESS);
                    },
                );
            }
            batch(
                &mut group,
                "os_provider",
                size,
                |n| {
                    let mut p = std::ptr::null_mut();
                    // SAFETY: a live provider and an out-pointer to a local.
                    let r = unsafe { (umf.provider_alloc)(os.handle, n, 0, &mut p) };
                    assert_eq!(r, UMF_RESULT_SUCCESS);
                    p
                },
                |p, n| {
                    // SAFETY: a block this provider allocated with size `n`, freed once.
                    let r = unsafe { (umf.provider_free)(os.handle, p, n) };
                    assert_eq!(r, UMF_RESULT_SUCCESS);
                },
            );
        }
        batch(
            &mut group,
            "malloc",
            size,
            // SAFETY: plain malloc; the result only goes back to free.
            |n| unsafe { libc::malloc(n) },
            // SAFETY: each pointer came from malloc above and is freed once.
            |p, _| unsafe { libc::free(p) },
        );
    }
    group.finish();
    drop(umf_side);
    assert_eq!(kfd_pool.stats().in_use, 0);
}

fn main() {
    let run = || {
        let mut c = Criterion::default().configure_from_args();
        bench(&mut c);
        c.final_summary();
    };
    kfd_emu::on_kfd_or_emulated(run);
    for size in SIZES {
        let at = |name: &str| format!("{name}/{size}");
        // ≥ 5× the OS provider's throughput is ≤ 1/5 of its time.
        ratio::report(GROUP, &at("kfd_pool"), &at("os_provider"), Some(0.2));
        ratio::report(GROUP, &at("kfd_disjoint"), &at("os_provider"), Some(0.2));
        ratio::report(GROUP, &at("kfd_disjoint"), &at("os_disjoint"), None);
        ratio::report(GROUP, &at("kfd_pool"), &at("os_disjoint"), None);
        ratio::report(GROUP, &at("kfd_pool"), &at("malloc"), None);
    }
}
