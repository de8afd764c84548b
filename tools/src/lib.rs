//! `kfd-tools`: the `kfdtool` command line and, later, a UMF-style memory provider over KFD.
//!
//! The provider (alloc/free/purge/split/merge/IPC, HOST/DEVICE/SHARED kinds, a pooling layer and
//! a C ABI for real UMF pools) will live here; today the crate carries the `kfdtool` binary.
