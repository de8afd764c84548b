//! What the SVM and SMI tests share: memory of the test process to register (SVM ranges live
//! over the caller's own mappings), attribute constructors, models on presets, the SMI
//! records with their timestamps taken out, and a second real process for the tests that need
//! another pid.
#![allow(dead_code)]

use std::sync::Arc;

use kfd_emu::machine::Machine;
use kfd_emu::model::{Model, ModelConfig};
use kfd_ioctl::abi::{
    KFD_IOCTL_SVM_ATTR_ACCESS, KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE, KFD_IOCTL_SVM_ATTR_CLR_FLAGS,
    KFD_IOCTL_SVM_ATTR_GRANULARITY, KFD_IOCTL_SVM_ATTR_NO_ACCESS, KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
    KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, KFD_IOCTL_SVM_ATTR_SET_FLAGS, kfd_ioctl_svm_attribute,
};
use kfd_ioctl::{Kfd, SmiEvents};
use rustix::mm::{MapFlags, ProtFlags};

pub const PAGE: u64 = 4096;
pub const MIB: u64 = 1 << 20;

/// A model of preset `machine` at the newest KFD minor.
pub fn model(machine: &str) -> Arc<Model> {
    model_at(machine, kfd_ioctl::abi::KFD_IOCTL_MINOR_VERSION)
}

/// A model of preset `machine` acting as KFD 1.`minor`.
pub fn model_at(machine: &str, minor: u32) -> Arc<Model> {
    Model::new(ModelConfig {
        machine: Machine::preset(machine).expect("preset"),
        kfd_minor: minor,
        ..ModelConfig::default()
    })
    .expect("model")
}

/// Opens the emulated `/dev/kfd` (on a thread attached to the model) and acquires every GPU.
pub fn open_all(model: &Model) -> (Kfd, Vec<u32>) {
    let kfd = Kfd::open().expect("open the emulated /dev/kfd");
    let gpus: Vec<u32> = model.machine().gpus().iter().map(|g| g.gpu_id).collect();
    for g in model.machine().gpus() {
        kfd.acquire_vm(g.gpu_id, g.render_minor)
            .expect("acquire_vm");
    }
    (kfd, gpus)
}

/// This process's pid (the KFD process the attached thread belongs to).
pub fn pid() -> i32 {
    std::process::id() as i32
}

pub fn attr(kind: u32, value: u32) -> kfd_ioctl_svm_attribute {
    kfd_ioctl_svm_attribute {
        r#type: kind,
        value,
    }
}
pub fn preferred(v: u32) -> kfd_ioctl_svm_attribute {
    attr(KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, v)
}
pub fn prefetch(v: u32) -> kfd_ioctl_svm_attribute {
    attr(KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, v)
}
pub fn access(gpu: u32) -> kfd_ioctl_svm_attribute {
    attr(KFD_IOCTL_SVM_ATTR_ACCESS, gpu)
}
pub fn in_place(gpu: u32) -> kfd_ioctl_svm_attribute {
    attr(KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE, gpu)
}
pub fn no_access(gpu: u32) -> kfd_ioctl_svm_attribute {
    attr(KFD_IOCTL_SVM_ATTR_NO_ACCESS, gpu)
}
pub fn set_flags(v: u32) -> kfd_ioctl_svm_attribute {
    attr(KFD_IOCTL_SVM_ATTR_SET_FLAGS, v)
}
pub fn clr_flags(v: u32) -> kfd_ioctl_svm_attribute {
    attr(KFD_IOCTL_SVM_ATTR_CLR_FLAGS, v)
}
pub fn granularity(v: u32) -> kfd_ioctl_svm_attribute {
    attr(KFD_IOCTL_SVM_ATTR_GRANULARITY, v)
}

/// A mapping this test owns, 2 MiB aligned (so granularity blocks line up with it), unmapped
/// on drop.
#[derive(Debug)]
pub struct Anon {
    pub addr: u64,
    pub len: u64,
    /// Which pages this value still maps: after [`Anon::unmap`] another thread of the test
    /// process may get the address, so dropping must not unmap it again.
    owned: std::sync::Mutex<Vec<bool>>,
}

impl Anon {
    /// Private anonymous read-write memory.
    pub fn new(len: u64) -> Anon {
        Anon::with(len, ProtFlags::READ | ProtFlags::WRITE, MapFlags::PRIVATE)
    }

    /// Shared anonymous memory (shmem: HMM does not migrate it).
    pub fn shared(len: u64) -> Anon {
        Anon::with(len, ProtFlags::READ | ProtFlags::WRITE, MapFlags::SHARED)
    }

    /// Anonymous memory with `prot` and `flags` (plus `MAP_NORESERVE`).
    pub fn with(len: u64, prot: ProtFlags, flags: MapFlags) -> Anon {
        let align = 2 * MIB;
        let span = len + align;
        // SAFETY: a fresh anonymous mapping at an address the kernel picks; nothing aliases
        // it. The parts outside the aligned window are unmapped right away.
        let base = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                span as usize,
                prot,
                flags | MapFlags::NORESERVE,
            )
        }
        .expect("mmap") as u64;
        let addr = base.next_multiple_of(align);
        let unmap = |at: u64, n: u64| {
            if n > 0 {
                // SAFETY: unmaps part of the mapping made above, which nothing uses.
                unsafe { rustix::mm::munmap(at as *mut _, n as usize) }.expect("trim");
            }
        };
        unmap(base, addr - base);
        unmap(addr + len, base + span - addr - len);
        let owned = std::sync::Mutex::new(vec![true; len.div_ceil(PAGE) as usize]);
        Anon { addr, len, owned }
    }

    fn set_owned(&self, first: u64, count: u64, owned: bool) {
        let mut pages = self.owned.lock().unwrap_or_else(|e| e.into_inner());
        for page in &mut pages[first as usize..(first + count) as usize] {
            *page = owned;
        }
    }

    /// Records that pages `[first, first + count)`, unmapped before, were mapped again by the
    /// test at the same place (with `MAP_FIXED_NOREPLACE`), so this value owns them again.
    pub fn mapped_again(&self, first: u64, count: u64) {
        self.set_owned(first, count, true);
    }

    /// Records that pages `[first, first + count)` are no longer this value's: the test
    /// unmapped them another way (an mremap moved them off), so dropping must leave them.
    pub fn forget(&self, first: u64, count: u64) {
        self.set_owned(first, count, false);
    }

    /// The address of page `i`.
    pub fn page(&self, i: u64) -> u64 {
        self.addr + i * PAGE
    }

    /// The page number (address / 4096) of page `i`, as SMI records print it.
    pub fn pfn(&self, i: u64) -> u64 {
        self.page(i) / PAGE
    }

    /// Unmaps pages `[first, first + count)` (as a program's `munmap` would).
    pub fn unmap(&self, first: u64, count: u64) {
        // SAFETY: the pages belong to this mapping; nothing holds references into them.
        unsafe { rustix::mm::munmap(self.page(first) as *mut _, (count * PAGE) as usize) }
            .expect("munmap");
        self.set_owned(first, count, false);
    }

    /// Writes `data` at byte `offset` from the CPU.
    pub fn write(&self, offset: u64, data: &[u8]) {
        assert!(offset + data.len() as u64 <= self.len);
        // SAFETY: inside the mapping, which is readable and writable; the model only reaches
        // these bytes through process_vm_readv/writev while the test does not hold them.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                (self.addr + offset) as *mut u8,
                data.len(),
            )
        };
    }

    /// Reads `out.len()` bytes at byte `offset` from the CPU.
    pub fn read(&self, offset: u64, out: &mut [u8]) {
        assert!(offset + out.len() as u64 <= self.len);
        // SAFETY: as in `write`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (self.addr + offset) as *const u8,
                out.as_mut_ptr(),
                out.len(),
            )
        };
    }
}

impl Drop for Anon {
    fn drop(&mut self) {
        let pages = std::mem::take(self.owned.get_mut().unwrap_or_else(|e| e.into_inner()));
        let mut i = 0;
        while i < pages.len() {
            if !pages[i] {
                i += 1;
                continue;
            }
            let start = i;
            while i < pages.len() && pages[i] {
                i += 1;
            }
            // SAFETY: pages this value still maps; the ones it unmapped may belong to someone
            // else by now and are left alone.
            let _ = unsafe {
                rustix::mm::munmap(
                    self.page(start as u64) as *mut _,
                    (i - start) * PAGE as usize,
                )
            };
        }
    }
}

/// A record with its CLOCK_BOOTTIME timestamp (the second field of events 5–11) replaced by
/// `T`, so that a test can compare the rest exactly.
pub fn shape(record: &str) -> String {
    let mut fields: Vec<&str> = record.splitn(3, ' ').collect();
    let id = fields
        .first()
        .and_then(|id| u32::from_str_radix(id, 16).ok());
    if let Some(5..=11) = id
        && fields.len() == 3
    {
        assert!(
            fields[1].parse::<i64>().is_ok_and(|ns| ns > 0),
            "no timestamp in {record:?}"
        );
        fields[1] = "T";
    }
    fields.join(" ")
}

/// The timestamp of a record of events 5–11.
pub fn timestamp(record: &str) -> i64 {
    record
        .split(' ')
        .nth(1)
        .and_then(|ns| ns.parse().ok())
        .expect("a timestamp")
}

/// Every record pending on `smi`, shaped (see [`shape`]).
pub fn drain(smi: &mut SmiEvents) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(line) = smi.read_line().expect("read the SMI fd") {
        out.push(shape(&line));
    }
    out
}

/// The records pending now, then more as they come until there are `n` (the restore worker
/// runs 1 ms after an eviction, on a thread of the model), for at most 10 s.
pub fn records(smi: &mut SmiEvents, n: usize) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut out = drain(smi);
    while out.len() < n && std::time::Instant::now() < deadline {
        let mut fds = [rustix::event::PollFd::new(
            smi,
            rustix::event::PollFlags::IN,
        )];
        let _ = rustix::event::poll(
            &mut fds,
            Some(&rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: 50_000_000,
            }),
        );
        out.extend(drain(smi));
    }
    out
}

/// Every record pending on `smi`, as read.
pub fn drain_raw(smi: &mut SmiEvents) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(line) = smi.read_line().expect("read the SMI fd") {
        out.push(line);
    }
    out
}

/// CLOCK_BOOTTIME now, in ns.
pub fn boottime_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec to a local.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    assert_eq!(r, 0);
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// A real second process (`sleep`), killed on drop: a pid with its own address space, for the
/// tests that need events of another process.
#[derive(Debug)]
pub struct OtherProcess {
    child: std::process::Child,
}

impl OtherProcess {
    pub fn spawn() -> OtherProcess {
        let child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("spawn sleep");
        OtherProcess { child }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// A readable, writable private anonymous VMA of the process (its stack): `(start, end)`.
    pub fn stack(&self) -> (u64, u64) {
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", self.pid())).expect("maps");
        maps.lines()
            .find(|l| l.ends_with("[stack]"))
            .and_then(|l| {
                let (lo, hi) = l.split_whitespace().next()?.split_once('-')?;
                Some((
                    u64::from_str_radix(lo, 16).ok()?,
                    u64::from_str_radix(hi, 16).ok()?,
                ))
            })
            .expect("a stack")
    }
}

impl Drop for OtherProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// SVM SET_ATTR through the product's `Kfd`, as the errno.
pub fn svm_set(
    kfd: &Kfd,
    start: u64,
    size: u64,
    attrs: &[kfd_ioctl::abi::kfd_ioctl_svm_attribute],
) -> Result<(), kfd_ioctl::Errno> {
    // SAFETY: the tests register memory they mapped themselves (`Anon`) or never touch, and
    // hold no Rust references into it while the model reaches it.
    unsafe { kfd.svm_set_attr(start, size, attrs) }
        .map_err(|e| e.errno().expect("an ioctl failure"))
}

/// SVM GET_ATTR through the product's `Kfd`, as the errno.
pub fn svm_get(
    kfd: &Kfd,
    start: u64,
    size: u64,
    attrs: &mut [kfd_ioctl::abi::kfd_ioctl_svm_attribute],
) -> Result<(), kfd_ioctl::Errno> {
    kfd.svm_get_attr(start, size, attrs)
        .map_err(|e| e.errno().expect("an ioctl failure"))
}

/// The values GET_ATTR reports for one attribute type at a time over `[start, start+size)`.
pub fn svm_get_one(kfd: &Kfd, start: u64, size: u64, kind: u32, value: u32) -> (u32, u32) {
    let mut a = [attr(kind, value)];
    svm_get(kfd, start, size, &mut a).expect("GET_ATTR");
    (a[0].r#type, a[0].value)
}

/// Preset `name` with the SVM capability bit cleared on its GPU number `gpu`.
pub fn without_svm(name: &str, gpu: usize) -> Machine {
    let machine = Machine::preset(name).expect("preset");
    let node = machine.gpus()[gpu].node_id;
    let mut topology = machine.topology().clone();
    for n in topology.nodes.iter_mut().filter(|n| n.id == node) {
        if let Some(cap) = &mut n.properties.capability {
            *cap &= !u64::from(kfd_ioctl::topology::Capability::SVM_API_SUPPORTED.bits());
        }
    }
    Machine::from_topology(format!("{name}-without-svm"), topology).expect("machine")
}

/// A raw SVM call with the backend and this process as the caller (for what the product's
/// `Kfd` refuses to send, and for tests without an attached thread); `attrs` are copied back.
pub fn raw_svm(
    model: &Model,
    caller: &dyn kfd_emu::backend::Caller,
    kfd: std::os::fd::BorrowedFd<'_>,
    start: u64,
    size: u64,
    op: u32,
    attrs: &mut [kfd_ioctl_svm_attribute],
) -> Result<i64, kfd_ioctl::Errno> {
    use kfd_emu::backend::Backend;
    use zerocopy::{FromBytes, IntoBytes};
    let mut buf = vec![0u64; 3 + attrs.len()];
    let bytes = buf.as_mut_slice().as_mut_bytes();
    bytes[0..8].copy_from_slice(&start.to_ne_bytes());
    bytes[8..16].copy_from_slice(&size.to_ne_bytes());
    bytes[16..20].copy_from_slice(&op.to_ne_bytes());
    bytes[20..24].copy_from_slice(&(attrs.len() as u32).to_ne_bytes());
    bytes[24..].copy_from_slice(attrs.as_bytes());
    let cmd = kfd_ioctl::abi::amdkfd_ioc_svm(attrs.len() as u32);
    let r = model
        .ioctl(caller, kfd, cmd, bytes.as_mut_ptr() as u64)
        .expect("the kfd stand-in is the model's");
    let back = <[kfd_ioctl_svm_attribute]>::ref_from_bytes(&bytes[24..]).expect("attributes");
    attrs.copy_from_slice(back);
    r
}
