//! `kfd-ring`: mirrored ("magic") ring mappings on the host and on the GPU.
//!
//! It will hold `[prev][base][next]` mappings of one physical buffer (a host memfd mapped three
//! times, a GPU-visible host ring through SVM or USERPTR, a device-local ring through dmabuf
//! export/import at three GPU VAs), and an SPSC byte ring with reserve/commit on top.
