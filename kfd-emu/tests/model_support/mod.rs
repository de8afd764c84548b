//! Driving the model through the `Backend` trait without seccomp: a `Caller` that is this
//! test process itself (its memory through `process_vm_readv`/`writev`, its fd table for
//! installed fds), and helpers for the common ioctl sequences.
#![allow(dead_code)]

pub mod aql;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use kfd_emu::backend::{Backend, Caller, CallerId, MmapAction, OpenAction};
use kfd_emu::machine::Machine;
use kfd_emu::model::{Model, ModelConfig};
use kfd_ioctl::abi::*;
use rustix::io::Errno;
use rustix::ioctl::Opcode;
use zerocopy::{Immutable, IntoBytes};

/// This process as the caller (or a pretend other process with the same memory, to play a
/// forked child).
#[derive(Debug, Clone, Copy)]
pub struct TestCaller {
    pub tid: i32,
    pub tgid: i32,
}

impl TestCaller {
    /// This process.
    pub fn current() -> TestCaller {
        let pid = std::process::id() as i32;
        TestCaller {
            tid: rustix::thread::gettid().as_raw_nonzero().get(),
            tgid: pid,
        }
    }

    /// A process with another pid (a forked child using an inherited fd).
    pub fn other() -> TestCaller {
        let pid = std::process::id() as i32;
        TestCaller {
            tid: pid + 100_000,
            tgid: pid + 100_000,
        }
    }
}

impl Caller for TestCaller {
    fn id(&self) -> CallerId {
        CallerId {
            tid: self.tid,
            tgid: self.tgid,
        }
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        use nix::sys::uio::{RemoteIoVec, process_vm_readv};
        if buf.is_empty() {
            return Ok(());
        }
        let len = buf.len();
        let remote = [RemoteIoVec {
            base: addr as usize,
            len,
        }];
        let mut local = [std::io::IoSliceMut::new(buf)];
        match process_vm_readv(nix::unistd::getpid(), &mut local, &remote) {
            Ok(n) if n == len => Ok(()),
            _ => Err(Errno::FAULT),
        }
    }

    fn write(&self, addr: u64, buf: &[u8]) -> Result<(), Errno> {
        use nix::sys::uio::{RemoteIoVec, process_vm_writev};
        if buf.is_empty() {
            return Ok(());
        }
        let remote = [RemoteIoVec {
            base: addr as usize,
            len: buf.len(),
        }];
        let local = [std::io::IoSlice::new(buf)];
        match process_vm_writev(nix::unistd::getpid(), &local, &remote) {
            Ok(n) if n == buf.len() => Ok(()),
            _ => Err(Errno::FAULT),
        }
    }

    fn dup_fd(&self, fd: i32) -> Result<OwnedFd, Errno> {
        // The caller's fd table is this process's.
        if fd < 0 {
            return Err(Errno::BADF);
        }
        // SAFETY: fcntl takes plain integers; it fails with EBADF when `fd` is not open.
        let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if new < 0 {
            return Err(Errno::BADF);
        }
        // SAFETY: `new` was just made by the fcntl above and is owned by nothing else.
        Ok(unsafe { OwnedFd::from_raw_fd(new) })
    }

    fn install_fd(&self, fd: BorrowedFd<'_>, cloexec: bool) -> Result<i32, Errno> {
        let new = if cloexec {
            rustix::io::fcntl_dupfd_cloexec(fd, 0)?
        } else {
            rustix::io::dup(fd)?
        };
        let raw = new.as_raw_fd();
        std::mem::forget(new);
        Ok(raw)
    }

    fn install_fd_in(
        &self,
        fd: BorrowedFd<'_>,
        range: std::ops::Range<u32>,
        cloexec: bool,
    ) -> Result<i32, Errno> {
        // The test's caller is this process: the lowest free number from the range's start,
        // as fcntl(F_DUPFD) gives it.
        let arg = if cloexec {
            nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(range.start as i32)
        } else {
            nix::fcntl::FcntlArg::F_DUPFD(range.start as i32)
        };
        let raw = nix::fcntl::fcntl(fd.as_raw_fd(), arg).map_err(|e| match e as i32 {
            libc::EINVAL => Errno::MFILE,
            other => Errno::from_raw_os_error(other),
        })?;
        if raw as u32 >= range.end {
            // SAFETY: `raw` was just made by the fcntl above and is owned by nothing.
            drop(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) });
            return Err(Errno::MFILE);
        }
        Ok(raw)
    }
}

/// A model with `/dev/kfd` opened by this process.
pub struct Emu {
    pub model: Arc<Model>,
    pub caller: TestCaller,
    pub kfd: OwnedFd,
    /// Render-node fds, by GPU index, once [`acquire_all`](Self::acquire_all) opened them.
    pub renders: Vec<OwnedFd>,
}

/// The `OwnedFd` an open was answered with.
pub fn injected(action: OpenAction) -> OwnedFd {
    match action {
        OpenAction::Inject(fd) => fd,
        other => panic!("expected a stand-in, got {other:?}"),
    }
}

impl Emu {
    pub fn new(cfg: ModelConfig) -> Emu {
        let model = Model::new(cfg).expect("model");
        let caller = TestCaller::current();
        let kfd = injected(model.open(&caller, "/dev/kfd", libc::O_RDWR | libc::O_CLOEXEC, 0));
        Emu {
            model,
            caller,
            kfd,
            renders: Vec::new(),
        }
    }

    /// The default config on `machine`.
    pub fn machine(name: &str) -> Emu {
        Emu::new(ModelConfig {
            machine: Machine::preset(name).expect("preset"),
            ..ModelConfig::default()
        })
    }

    pub fn gpu_ids(&self) -> Vec<u32> {
        self.model
            .machine()
            .gpus()
            .iter()
            .map(|g| g.gpu_id)
            .collect()
    }

    pub fn gpu(&self) -> u32 {
        self.gpu_ids()[0]
    }

    /// ioctl `cmd` on `/dev/kfd` with `arg` (any object), as `caller`.
    pub fn ioctl_as<T: IntoBytes + Immutable>(
        &self,
        caller: &TestCaller,
        cmd: Opcode,
        arg: &mut T,
    ) -> Result<i64, Errno> {
        self.model
            .ioctl(caller, self.kfd.as_fd(), cmd, arg as *mut T as u64)
            .expect("the kfd stand-in is the model's")
    }

    /// ioctl `cmd` on `/dev/kfd` with `arg`.
    pub fn ioctl<T: IntoBytes + Immutable>(&self, cmd: Opcode, arg: &mut T) -> Result<i64, Errno> {
        self.ioctl_as(&self.caller, cmd, arg)
    }

    /// ioctl with a raw command word and address.
    pub fn ioctl_raw(&self, cmd: u32, addr: u64) -> Result<i64, Errno> {
        self.model
            .ioctl(&self.caller, self.kfd.as_fd(), cmd, addr)
            .expect("the kfd stand-in is the model's")
    }

    /// EXPORT_DMABUF of `handle` (close-on-exec): the dma-buf fd.
    pub fn export(&self, handle: u64) -> Result<OwnedFd, Errno> {
        let mut a = kfd_ioctl_export_dmabuf_args {
            handle,
            flags: libc::O_CLOEXEC as u32,
            dmabuf_fd: 0,
        };
        self.ioctl(AMDKFD_IOC_EXPORT_DMABUF, &mut a)?;
        Ok(own_fd(a.dmabuf_fd))
    }

    /// Opens GPU `index`'s render node.
    pub fn open_render(&self, index: usize) -> OwnedFd {
        let minor = self.model.machine().gpus()[index].render_minor;
        injected(self.model.open(
            &self.caller,
            &format!("/dev/dri/renderD{minor}"),
            libc::O_RDWR | libc::O_CLOEXEC,
            0,
        ))
    }

    /// ACQUIRE_VM of GPU `index` with a new render fd.
    pub fn acquire(&mut self, index: usize) -> Result<i64, Errno> {
        let fd = self.open_render(index);
        let mut a = kfd_ioctl_acquire_vm_args {
            drm_fd: fd.as_raw_fd() as u32,
            gpu_id: self.gpu_ids()[index],
        };
        let r = self.ioctl(AMDKFD_IOC_ACQUIRE_VM, &mut a);
        self.renders.push(fd);
        r
    }

    /// ACQUIRE_VM on every GPU.
    pub fn acquire_all(&mut self) {
        for i in 0..self.gpu_ids().len() {
            self.acquire(i).expect("acquire_vm");
        }
    }

    /// ALLOC_MEMORY_OF_GPU; `(handle, mmap_offset)`.
    pub fn alloc(&self, gpu_id: u32, va: u64, size: u64, flags: u32) -> Result<(u64, u64), Errno> {
        self.alloc_at(gpu_id, va, size, flags, 0)
    }

    /// ALLOC_MEMORY_OF_GPU with `mmap_offset` in (the CPU address of a USERPTR).
    pub fn alloc_at(
        &self,
        gpu_id: u32,
        va: u64,
        size: u64,
        flags: u32,
        mmap_offset: u64,
    ) -> Result<(u64, u64), Errno> {
        let mut a = kfd_ioctl_alloc_memory_of_gpu_args {
            va_addr: va,
            size,
            handle: 0,
            mmap_offset,
            gpu_id,
            flags,
        };
        self.ioctl(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mut a)?;
        Ok((a.handle, a.mmap_offset))
    }

    /// Acquires every GPU, allocates a 32 KiB GTT BO and creates an auto-reset signal event
    /// with that BO as the signal page. Returns the BO's handle, its render-node offset and
    /// the CREATE_EVENT answer.
    pub fn signal_event_on_a_bo(&mut self) -> (u64, u64, kfd_ioctl_create_event_args) {
        self.acquire_all();
        let gpu = self.gpu();
        let flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
        let (page, offset) = self.alloc(gpu, va(1), 32 * 1024, flags).expect("alloc");
        let mut a = kfd_ioctl_create_event_args {
            event_page_offset: page,
            event_type: KFD_IOC_EVENT_SIGNAL,
            auto_reset: 1,
            ..Default::default()
        };
        self.ioctl(AMDKFD_IOC_CREATE_EVENT, &mut a)
            .expect("create with a BO as the page");
        (page, offset, a)
    }

    pub fn free(&self, handle: u64) -> Result<i64, Errno> {
        let mut a = kfd_ioctl_free_memory_of_gpu_args { handle };
        self.ioctl(AMDKFD_IOC_FREE_MEMORY_OF_GPU, &mut a)
    }

    /// MAP (or UNMAP) `handle` on `gpus` from `n_success`; the result and the `n_success` the
    /// kernel wrote back.
    pub fn map_from(
        &self,
        unmap: bool,
        handle: u64,
        gpus: &[u32],
        n_success: u32,
    ) -> (Result<i64, Errno>, u32) {
        let ptr = gpus.as_ptr() as u64;
        self.map_raw(unmap, handle, ptr, gpus.len() as u32, n_success)
    }

    /// MAP (or UNMAP) with every argument given (the device array at `ptr`).
    pub fn map_raw(
        &self,
        unmap: bool,
        handle: u64,
        ptr: u64,
        n_devices: u32,
        n_success: u32,
    ) -> (Result<i64, Errno>, u32) {
        let mut a = kfd_ioctl_map_memory_to_gpu_args {
            handle,
            device_ids_array_ptr: ptr,
            n_devices,
            n_success,
        };
        let cmd = if unmap {
            AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU
        } else {
            AMDKFD_IOC_MAP_MEMORY_TO_GPU
        };
        let r = self.ioctl(cmd, &mut a);
        (r, a.n_success)
    }

    pub fn map(&self, handle: u64, gpus: &[u32]) -> (Result<i64, Errno>, u32) {
        self.map_from(false, handle, gpus, 0)
    }

    pub fn unmap(&self, handle: u64, gpus: &[u32]) -> (Result<i64, Errno>, u32) {
        self.map_from(true, handle, gpus, 0)
    }

    /// What the model decides for a shared read-write mapping of `len` bytes of stand-in `fd`
    /// at `offset` by this process.
    pub fn mmap_action(&self, fd: BorrowedFd<'_>, offset: u64, len: u64) -> MmapAction {
        self.mmap_action_as(&self.caller, fd, offset, len)
    }

    /// [`mmap_action`](Self::mmap_action) as `caller`.
    pub fn mmap_action_as(
        &self,
        caller: &TestCaller,
        fd: BorrowedFd<'_>,
        offset: u64,
        len: u64,
    ) -> MmapAction {
        let prot = (libc::PROT_READ | libc::PROT_WRITE) as u32;
        self.model
            .mmap(caller.id(), fd, offset, len, prot, libc::MAP_SHARED as u32)
    }

    /// Maps `len` bytes of stand-in `fd` at `offset` the way the supervisor carries out
    /// `Backend::mmap`: the redirected memory, the file itself for `Continue`, or the errno.
    pub fn cpu_map(&self, fd: BorrowedFd<'_>, offset: u64, len: usize) -> Result<CpuMap, Errno> {
        match self.mmap_action(fd, offset, len as u64) {
            MmapAction::Redirect { fd, offset } => Ok(CpuMap::new(fd.as_fd(), offset, len)),
            MmapAction::Continue => Ok(CpuMap::new(fd, offset, len)),
            MmapAction::Fail(errno) => Err(errno),
        }
    }

    pub fn available(&self, gpu_id: u32) -> u64 {
        let mut a = kfd_ioctl_get_available_memory_args {
            available: 0,
            gpu_id,
            pad: 0,
        };
        self.ioctl(AMDKFD_IOC_AVAILABLE_MEMORY, &mut a)
            .expect("available memory");
        a.available
    }
}

/// VRAM | WRITABLE | EXECUTABLE | PUBLIC: what libhsakmt asks for host-visible VRAM.
pub const VRAM_RW: u32 = KFD_IOC_ALLOC_MEM_FLAGS_VRAM
    | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
    | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE
    | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;

/// A fresh page-aligned GPU VA for each call, in a range no test maps twice.
pub fn va(n: u64) -> u64 {
    0x7000_0000_0000 + n * 0x1000_0000
}

/// A shared read-write mapping of `len` bytes of `fd` at `offset`, unmapped on drop.
pub struct CpuMap {
    pub ptr: *mut u8,
    pub len: usize,
}

impl CpuMap {
    pub fn new(fd: BorrowedFd<'_>, offset: u64, len: usize) -> CpuMap {
        // SAFETY: a fresh shared mapping of a memfd the test owns; nothing else aliases it in
        // Rust terms, and it is unmapped on drop.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::SHARED,
                fd,
                offset,
            )
        }
        .expect("mmap");
        CpuMap {
            ptr: ptr.cast(),
            len,
        }
    }

    pub fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is `len` bytes, readable and writable, and lives as long as
        // `self`; the returned borrow is tied to `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for CpuMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` made.
        let _ = unsafe { rustix::mm::munmap(self.ptr.cast(), self.len) };
    }
}

/// An fd number's `OwnedFd` (for fds the model installed into this process).
pub fn own_fd(raw: u32) -> OwnedFd {
    // SAFETY: the model's install_fd (TestCaller) created this fd for the test, which now
    // takes ownership of it.
    unsafe { OwnedFd::from_raw_fd(raw as i32) }
}

/// CREATE_EVENT of `kind`; panics on failure.
pub fn create(emu: &Emu, kind: u32, auto_reset: bool) -> kfd_ioctl_create_event_args {
    let mut a = kfd_ioctl_create_event_args {
        event_type: kind,
        auto_reset: u32::from(auto_reset),
        ..Default::default()
    };
    emu.ioctl(AMDKFD_IOC_CREATE_EVENT, &mut a)
        .expect("create event");
    a
}

/// SET_EVENT of `id`.
pub fn set(emu: &Emu, id: u32) -> Result<i64, Errno> {
    let mut a = kfd_ioctl_set_event_args {
        event_id: id,
        pad: 0,
    };
    emu.ioctl(AMDKFD_IOC_SET_EVENT, &mut a)
}

/// RESET_EVENT of `id`.
pub fn reset(emu: &Emu, id: u32) -> Result<i64, Errno> {
    let mut a = kfd_ioctl_reset_event_args {
        event_id: id,
        pad: 0,
    };
    emu.ioctl(AMDKFD_IOC_RESET_EVENT, &mut a)
}

/// DESTROY_EVENT of `id`.
pub fn destroy(emu: &Emu, id: u32) -> Result<i64, Errno> {
    let mut a = kfd_ioctl_destroy_event_args {
        event_id: id,
        pad: 0,
    };
    emu.ioctl(AMDKFD_IOC_DESTROY_EVENT, &mut a)
}

/// WAIT_EVENTS on `events`: the result and `wait_result`.
pub fn wait(
    emu: &Emu,
    events: &mut [kfd_event_data],
    all: bool,
    timeout: u32,
) -> (Result<i64, Errno>, u32) {
    let mut a = kfd_ioctl_wait_events_args {
        events_ptr: events.as_mut_ptr() as u64,
        num_events: events.len() as u32,
        wait_for_all: u32::from(all),
        timeout,
        wait_result: 99,
    };
    let r = emu.ioctl(AMDKFD_IOC_WAIT_EVENTS, &mut a);
    (r, a.wait_result)
}

/// A WAIT_EVENTS entry for event `id`, no event age.
pub fn data(id: u32) -> kfd_event_data {
    kfd_event_data {
        event_id: id,
        ..Default::default()
    }
}

/// AMDKFD_IOC_SVM SET_ATTR of `[addr, addr + size)` with `attrs` (type, value).
pub fn svm_set(emu: &Emu, addr: u64, size: u64, attrs: &[(u32, u32)]) -> Result<i64, Errno> {
    let mut buf = Vec::with_capacity(24 + attrs.len() * 8);
    buf.extend_from_slice(&addr.to_ne_bytes());
    buf.extend_from_slice(&size.to_ne_bytes());
    buf.extend_from_slice(&KFD_IOCTL_SVM_OP_SET_ATTR.to_ne_bytes());
    buf.extend_from_slice(&u32::try_from(attrs.len()).unwrap().to_ne_bytes());
    for &(kind, value) in attrs {
        buf.extend_from_slice(&kind.to_ne_bytes());
        buf.extend_from_slice(&value.to_ne_bytes());
    }
    // The word carries the whole size, header and attributes (as libhsakmt encodes it).
    let cmd = rustix::ioctl::opcode::from_components(
        rustix::ioctl::Direction::ReadWrite,
        b'K',
        0x20,
        buf.len(),
    );
    emu.ioctl_raw(cmd, buf.as_mut_ptr() as u64)
}
