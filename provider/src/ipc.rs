//! The IPC handle: what another process needs to reach a piece of this provider's memory.

use std::fmt;

use super::MemoryKind;
use super::error::{Error, Result};

/// The size of every [`IpcHandle`] in bytes (`get_ipc_handle_size`).
pub const IPC_HANDLE_SIZE: usize = 64;

const MAGIC: u32 = u32::from_le_bytes(*b"KFDI");
const VERSION: u16 = 1;
/// The exported memory can be mapped for the CPU (HOST memory, large-BAR VRAM).
const FLAG_CPU_VISIBLE: u8 = 1;

/// An IPC handle: fixed-size bytes that another process passes to
/// [`KfdProvider::open_ipc_handle`](super::KfdProvider::open_ipc_handle).
///
/// It names an open file of the producing process — the HOST provider's memfd or a DEVICE
/// buffer object's dma-buf — by its pid and fd number; the consumer takes its own reference
/// with `pidfd_open` + `pidfd_getfd` (Linux ≥ 5.6; the consumer needs ptrace-attach rights on
/// the producer: same user, and under Yama `ptrace_scope=1` the producer must allow it with
/// `prctl(PR_SET_PTRACER, …)`). So the producer must stay alive, and keep the allocation,
/// until the consumer has opened the handle.
///
/// Layout (little-endian): magic `"KFDI"` u32, version u16, kind u8, flags u8, pid i32, fd
/// i32, gpu_id u32, reserved u32, offset u64 (into the memfd, or into the buffer object),
/// size u64 (bytes shared), object size u64 (the buffer object's size; 0 for HOST), mmap
/// offset u64 (the exporting BO's render-node offset, for a CPU mapping of the import),
/// provider id u64 (which provider of the producer made it).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpcHandle([u8; IPC_HANDLE_SIZE]);

/// The fields of an [`IpcHandle`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IpcFields {
    pub kind: MemoryKind,
    pub cpu_visible: bool,
    pub pid: i32,
    pub fd: i32,
    pub gpu_id: u32,
    pub offset: u64,
    pub size: u64,
    pub object_size: u64,
    pub mmap_offset: u64,
    pub provider_id: u64,
}

fn kind_code(kind: MemoryKind) -> u8 {
    match kind {
        MemoryKind::Host => 1,
        MemoryKind::Device => 2,
        MemoryKind::Shared => 3,
    }
}

impl IpcHandle {
    pub(crate) fn encode(f: &IpcFields) -> IpcHandle {
        let mut b = [0u8; IPC_HANDLE_SIZE];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&VERSION.to_le_bytes());
        b[6] = kind_code(f.kind);
        b[7] = if f.cpu_visible { FLAG_CPU_VISIBLE } else { 0 };
        b[8..12].copy_from_slice(&f.pid.to_le_bytes());
        b[12..16].copy_from_slice(&f.fd.to_le_bytes());
        b[16..20].copy_from_slice(&f.gpu_id.to_le_bytes());
        b[24..32].copy_from_slice(&f.offset.to_le_bytes());
        b[32..40].copy_from_slice(&f.size.to_le_bytes());
        b[40..48].copy_from_slice(&f.object_size.to_le_bytes());
        b[48..56].copy_from_slice(&f.mmap_offset.to_le_bytes());
        b[56..64].copy_from_slice(&f.provider_id.to_le_bytes());
        IpcHandle(b)
    }

    pub(crate) fn decode(&self) -> Result<IpcFields> {
        let b = &self.0;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        if u32_at(0) != MAGIC {
            return Err(Error::invalid("IPC handle: not a KFD provider handle"));
        }
        if u16::from_le_bytes([b[4], b[5]]) != VERSION {
            return Err(Error::invalid("IPC handle: unknown handle version"));
        }
        let kind = match b[6] {
            1 => MemoryKind::Host,
            2 => MemoryKind::Device,
            3 => MemoryKind::Shared,
            _ => return Err(Error::invalid("IPC handle: unknown memory kind")),
        };
        let fields = IpcFields {
            kind,
            cpu_visible: b[7] & FLAG_CPU_VISIBLE != 0,
            pid: u32_at(8) as i32,
            fd: u32_at(12) as i32,
            gpu_id: u32_at(16),
            offset: u64_at(24),
            size: u64_at(32),
            object_size: u64_at(40),
            mmap_offset: u64_at(48),
            provider_id: u64_at(56),
        };
        if fields.pid <= 0 || fields.fd < 0 || fields.size == 0 {
            return Err(Error::invalid(
                "IPC handle: no producer pid, fd or size in it",
            ));
        }
        Ok(fields)
    }

    /// The handle's bytes, to send to another process.
    pub fn as_bytes(&self) -> &[u8; IPC_HANDLE_SIZE] {
        &self.0
    }

    /// A handle received from another process. The bytes are checked when the handle is
    /// opened or put (a wrong magic, version or kind is an invalid argument then).
    pub fn from_bytes(bytes: &[u8]) -> Result<IpcHandle> {
        let bytes: [u8; IPC_HANDLE_SIZE] = bytes
            .try_into()
            .map_err(|_| Error::invalid(format!("IPC handle: expected {IPC_HANDLE_SIZE} bytes")))?;
        Ok(IpcHandle(bytes))
    }

    /// The kind of memory the handle shares, when it is a well-formed handle.
    pub fn kind(&self) -> Option<MemoryKind> {
        self.decode().ok().map(|f| f.kind)
    }

    /// The number of bytes the handle shares, when it is a well-formed handle.
    pub fn size(&self) -> Option<usize> {
        self.decode()
            .ok()
            .and_then(|f| usize::try_from(f.size).ok())
    }
}

impl fmt::Debug for IpcHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.decode() {
            Ok(fields) => f
                .debug_struct("IpcHandle")
                .field("kind", &fields.kind)
                .field("pid", &fields.pid)
                .field("fd", &fields.fd)
                .field("gpu_id", &format_args!("{:#x}", fields.gpu_id))
                .field("offset", &fields.offset)
                .field("size", &fields.size)
                .finish_non_exhaustive(),
            Err(_) => f.debug_tuple("IpcHandle").field(&"malformed").finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_round_trips_through_its_bytes() {
        let fields = IpcFields {
            kind: MemoryKind::Device,
            cpu_visible: true,
            pid: 4242,
            fd: 17,
            gpu_id: 0x1a2b,
            offset: 4096,
            size: 1 << 20,
            object_size: 2 << 20,
            mmap_offset: 0x20_0000,
            provider_id: 7,
        };
        let handle = IpcHandle::encode(&fields);
        let again = IpcHandle::from_bytes(handle.as_bytes()).unwrap();
        assert_eq!(again.decode().unwrap(), fields);
        assert_eq!(again.kind(), Some(MemoryKind::Device));
        assert_eq!(again.size(), Some(1 << 20));
        assert!(IpcHandle::from_bytes(&[0; 10]).is_err());
        let garbage = IpcHandle::from_bytes(&[0xAB; IPC_HANDLE_SIZE]).unwrap();
        assert!(matches!(garbage.decode(), Err(Error::InvalidArgument(_))));
        assert_eq!(garbage.kind(), None);
    }
}
