//! `kfd-svm`: shared virtual memory (SVM/HMM) on top of `kfd-ioctl`.
//!
//! It will hold an attribute builder, GET with per-GPU access queries, prefetch, XNACK,
//! granularity, an owned SVM buffer (mmap + register, unregister + munmap on drop), and SMI
//! event streams decoded into typed events with a Chrome-trace timeline export.
