//! The DRM ioctls on a render node: those libdrm issues to name the GPU (anchors §4.1.3):
//! `DRM_IOCTL_VERSION`, `DRM_IOCTL_GET_CLIENT` and `DRM_IOCTL_AMDGPU_INFO` (ACCEL_WORKING,
//! DEV_INFO, READ_MMR_REG, and RAS_ENABLED_FEATURES, which kfdtest's RAS test asks); and
//! amdgpu's GEM and PRIME ioctls ([`gem_ioctls`](super::gem_ioctls): GEM_CREATE, GEM_CLOSE,
//! GEM_MMAP, GEM_METADATA, GEM_WAIT_IDLE, GEM_VA, GEM_OP, PRIME_HANDLE_TO_FD,
//! PRIME_FD_TO_HANDLE) and command submission ([`cs_ioctls`](super::cs_ioctls): CTX,
//! BO_LIST, CS, WAIT_CS). Every other DRM
//! ioctl is refused with `EINVAL`, as `drm_ioctl` refuses a number without a handler.
//! Arguments are copied in and out as `drm_ioctl` does: what both the caller's and the
//! kernel's direction bits and sizes allow.

use kfd_ioctl::abi::{IOC_READ, IOC_WRITE, ioc_dir, ioc_nr, ioc_size};
use rustix::io::Errno;

use super::chardev::{set_u32, set_u64, u32_at, u64_at};
use super::cs_ioctls as cs;
use super::device::Device;
use super::driver::Driver;
use super::files::FileKey;
use super::gem_ioctls as gem;
use super::trace;
use crate::backend::{Caller, IoctlResult};
use crate::machine::Gpu;

/// `DRM_IOCTL_VERSION`, `DRM_IOWR(0x00, struct drm_version)`.
const NR_VERSION: u32 = 0x00;
/// `DRM_IOCTL_GET_CLIENT`, `DRM_IOWR(0x05, struct drm_client)`.
const NR_GET_CLIENT: u32 = 0x05;
/// `DRM_IOCTL_AMDGPU_INFO`, `DRM_IOW(DRM_COMMAND_BASE + 0x05, struct drm_amdgpu_info)`.
const NR_AMDGPU_INFO: u32 = 0x45;
/// `DRM_IOCTL_GEM_CLOSE`, `DRM_IOW(0x09, struct drm_gem_close)`.
const NR_GEM_CLOSE: u32 = 0x09;
/// `DRM_IOCTL_PRIME_HANDLE_TO_FD` / `_FD_TO_HANDLE`, `DRM_IOWR(0x2d/0x2e, struct
/// drm_prime_handle)`.
const NR_PRIME_HANDLE_TO_FD: u32 = 0x2D;
const NR_PRIME_FD_TO_HANDLE: u32 = 0x2E;
/// amdgpu's commands, `DRM_COMMAND_BASE` (0x40) + `DRM_AMDGPU_*`.
const NR_GEM_CREATE: u32 = 0x40;
const NR_GEM_MMAP: u32 = 0x41;
const NR_CTX: u32 = 0x42;
const NR_BO_LIST: u32 = 0x43;
const NR_CS: u32 = 0x44;
const NR_GEM_METADATA: u32 = 0x46;
const NR_GEM_WAIT_IDLE: u32 = 0x47;
const NR_GEM_VA: u32 = 0x48;
const NR_WAIT_CS: u32 = 0x49;
const NR_GEM_OP: u32 = 0x50;

const AMDGPU_INFO_ACCEL_WORKING: u32 = 0x00;
const AMDGPU_INFO_READ_MMR_REG: u32 = 0x15;
const AMDGPU_INFO_DEV_INFO: u32 = 0x16;
const AMDGPU_INFO_RAS_ENABLED_FEATURES: u32 = 0x20;
/// `GB_ADDR_CONFIG`, the register libdrm reads on GFX9 and later.
const GB_ADDR_CONFIG: u32 = 0x263E;
/// The size of `struct drm_amdgpu_info_device` the model fills.
const DEV_INFO_SIZE: usize = 368;

/// The amdgpu KMS version (3.x is what libdrm's amdgpu requires).
const KMS_VERSION: (i32, i32, i32) = (3, 61, 0);

/// Answers DRM ioctl `cmd` on DRM file `key`, a render node of GPU index `gpu`.
pub(super) fn ioctl(
    m: &Driver,
    caller: &dyn Caller,
    key: FileKey,
    gpu: usize,
    cmd: u32,
    arg: u64,
) -> IoctlResult {
    let dev = &m.dev;
    let nr = u32::from(ioc_nr(cmd));
    let rw = IOC_READ | IOC_WRITE;
    let (name, kdir, ksize): (&str, u32, usize) = match nr {
        NR_VERSION => ("DRM_IOCTL_VERSION", rw, 64),
        NR_GET_CLIENT => ("DRM_IOCTL_GET_CLIENT", rw, 40),
        NR_AMDGPU_INFO => ("DRM_IOCTL_AMDGPU_INFO", IOC_WRITE, 32),
        NR_GEM_CLOSE => ("DRM_IOCTL_GEM_CLOSE", IOC_WRITE, 8),
        NR_PRIME_HANDLE_TO_FD => ("DRM_IOCTL_PRIME_HANDLE_TO_FD", rw, 12),
        NR_PRIME_FD_TO_HANDLE => ("DRM_IOCTL_PRIME_FD_TO_HANDLE", rw, 12),
        NR_GEM_CREATE => ("DRM_IOCTL_AMDGPU_GEM_CREATE", rw, 32),
        NR_GEM_MMAP => ("DRM_IOCTL_AMDGPU_GEM_MMAP", rw, 8),
        NR_CTX => ("DRM_IOCTL_AMDGPU_CTX", rw, 16),
        NR_BO_LIST => ("DRM_IOCTL_AMDGPU_BO_LIST", rw, 24),
        NR_CS => ("DRM_IOCTL_AMDGPU_CS", rw, 24),
        NR_GEM_METADATA => ("DRM_IOCTL_AMDGPU_GEM_METADATA", rw, 288),
        NR_GEM_WAIT_IDLE => ("DRM_IOCTL_AMDGPU_GEM_WAIT_IDLE", rw, 16),
        NR_GEM_VA => ("DRM_IOCTL_AMDGPU_GEM_VA", IOC_WRITE, 40),
        NR_WAIT_CS => ("DRM_IOCTL_AMDGPU_WAIT_CS", rw, 32),
        NR_GEM_OP => ("DRM_IOCTL_AMDGPU_GEM_OP", rw, 16),
        _ => {
            if dev.cfg.trace {
                trace::drm(caller, &format!("DRM_IOCTL({cmd:#x})"), Err(Errno::INVAL));
            }
            return Err(Errno::INVAL);
        }
    };
    // drm_ioctl: copy in and out only what both the caller's and the kernel's words allow.
    let udir = ioc_dir(cmd);
    let usize = ioc_size(cmd);
    let in_size = if udir & kdir & IOC_WRITE != 0 {
        usize
    } else {
        0
    };
    let out_size = if udir & kdir & IOC_READ != 0 {
        usize
    } else {
        0
    };
    let mut buf = vec![0u8; usize.max(ksize)];
    let mut r = caller
        .read(arg, &mut buf[..in_size])
        .map_err(|_| Errno::FAULT)
        .and_then(|()| {
            let g = &dev.cfg.machine.gpus()[gpu];
            match nr {
                NR_VERSION => version(caller, &mut buf),
                NR_GET_CLIENT => get_client(caller, &mut buf),
                NR_AMDGPU_INFO => amdgpu_info(dev, caller, g, &buf),
                NR_GEM_CLOSE => gem::gem_close(m, key, &mut buf),
                NR_PRIME_HANDLE_TO_FD => gem::prime_handle_to_fd(m, caller, key, &mut buf),
                NR_PRIME_FD_TO_HANDLE => gem::prime_fd_to_handle(m, caller, key, gpu, &mut buf),
                NR_GEM_CREATE => gem::gem_create(m, caller, key, gpu, &mut buf),
                NR_GEM_MMAP => gem::gem_mmap(m, key, gpu, &mut buf),
                NR_CTX => cs::ctx(m, caller, key, gpu, &mut buf),
                NR_BO_LIST => cs::bo_list(m, caller, key, gpu, &mut buf),
                NR_CS => cs::cs(m, caller, key, gpu, &mut buf),
                NR_GEM_METADATA => gem::gem_metadata(m, key, &mut buf),
                NR_GEM_WAIT_IDLE => gem::gem_wait_idle(m, key, &mut buf),
                NR_GEM_VA => gem::gem_va(m, key, gpu, &mut buf),
                NR_WAIT_CS => cs::wait_cs(m, key, gpu, &mut buf),
                _ => gem::gem_op(m, caller, key, gpu, &mut buf),
            }
        });
    if r.is_ok() && out_size > 0 && caller.write(arg, &buf[..out_size]).is_err() {
        r = Err(Errno::FAULT);
    }
    if dev.cfg.trace {
        trace::drm(caller, name, r);
    }
    r.map(|()| 0)
}

/// `drm_copy_field`: copies what fits, reports the full length.
fn copy_field(
    caller: &dyn Caller,
    buf: &mut [u8],
    len_at: usize,
    ptr_at: usize,
    value: &str,
) -> Result<(), Errno> {
    let room = u64_at(buf, len_at);
    let len = (value.len() as u64).min(room) as usize;
    set_u64(buf, len_at, value.len() as u64);
    let ptr = u64_at(buf, ptr_at);
    if len > 0 && ptr != 0 {
        caller
            .write(ptr, &value.as_bytes()[..len])
            .map_err(|_| Errno::FAULT)?;
    }
    Ok(())
}

/// DRM_IOCTL_VERSION: `amdgpu` 3.x.
fn version(caller: &dyn Caller, buf: &mut [u8]) -> Result<(), Errno> {
    let (major, minor, patch) = KMS_VERSION;
    buf[0..4].copy_from_slice(&major.to_ne_bytes());
    buf[4..8].copy_from_slice(&minor.to_ne_bytes());
    buf[8..12].copy_from_slice(&patch.to_ne_bytes());
    copy_field(caller, buf, 16, 24, "amdgpu")?;
    copy_field(caller, buf, 32, 40, "20150101")?;
    copy_field(caller, buf, 48, 56, "AMD GPU")
}

/// DRM_IOCTL_GET_CLIENT: client 0 is the caller, authenticated.
fn get_client(caller: &dyn Caller, buf: &mut [u8]) -> Result<(), Errno> {
    if u32_at(buf, 0) != 0 {
        return Err(Errno::INVAL);
    }
    set_u32(buf, 4, 1);
    set_u64(buf, 8, caller.id().tgid as u64);
    set_u64(buf, 16, u64::from(rustix::process::getuid().as_raw()));
    set_u64(buf, 24, 0);
    set_u64(buf, 32, 0);
    Ok(())
}

/// DRM_IOCTL_AMDGPU_INFO: writes at most `return_size` bytes to `return_pointer`.
fn amdgpu_info(dev: &Device, caller: &dyn Caller, gpu: &Gpu, buf: &[u8]) -> Result<(), Errno> {
    let ptr = u64_at(buf, 0);
    let size = u32_at(buf, 8) as usize;
    let query = u32_at(buf, 12);
    if size == 0 || ptr == 0 {
        return Err(Errno::INVAL);
    }
    let out: Vec<u8> = match query {
        AMDGPU_INFO_ACCEL_WORKING => 1u32.to_ne_bytes().to_vec(),
        AMDGPU_INFO_DEV_INFO => dev_info(dev, gpu),
        AMDGPU_INFO_READ_MMR_REG => {
            let offset = u32_at(buf, 16);
            let count = u32_at(buf, 20);
            if count > 128 {
                return Err(Errno::INVAL);
            }
            let mut regs = Vec::with_capacity(count as usize * 4);
            for reg in offset..offset.saturating_add(count) {
                // Only registers on the kernel's allow list can be read.
                if reg != GB_ADDR_CONFIG {
                    return Err(Errno::INVAL);
                }
                regs.extend_from_slice(&gpu.gb_addr_config().to_ne_bytes());
            }
            regs
        }
        AMDGPU_INFO_RAS_ENABLED_FEATURES => ras_mask(gpu)?.to_ne_bytes().to_vec(),
        _ => return Err(Errno::INVAL),
    };
    let n = size.min(out.len());
    caller.write(ptr, &out[..n]).map_err(|_| Errno::FAULT)
}

/// AMDGPU_INFO_RAS_ENABLED_FEATURES (`amdgpu_info_ioctl`): `ras_enabled << 32 | features` of
/// the GPU's RAS context, `EINVAL` when it has none. `amdgpu_ras_init` keeps a context only
/// where RAS is enabled — the ECC-equipped server parts (`amdgpu_ras_check_supported`: SRAM
/// and memory ECC reported by the VBIOS; here MI100, MI210, MI300X, MI300A) — and on a
/// Vega 20 without it (a Radeon VII), whose context carries only the GFX block in `features`
/// ("set gfx block ras context feature for VEGA20 Gaming") with nothing enabled. Other GPUs
/// (RDNA cards without ECC) have none.
///
/// Where it differs: which blocks a server board enables beyond UMC, SDMA and GFX depends on
/// its firmware; the model reports the blocks every such board has (`enum amdgpu_ras_block`:
/// UMC 0, SDMA 1, GFX 2, MMHUB 3, ATHUB 4, PCIE_BIF 5, HDP 6, XGMI_WAFL 7), enabled and on.
fn ras_mask(gpu: &Gpu) -> Result<u64, Errno> {
    const SERVER: &[u32] = &[0x738C, 0x740F, 0x74A0, 0x74A1];
    const GFX: u64 = 1 << 2;
    if SERVER.contains(&gpu.device_id) {
        let blocks = 0xFFu64;
        Ok(blocks << 32 | blocks)
    } else if gpu.device_id == 0x66AF {
        Ok(GFX)
    } else {
        Err(Errno::INVAL)
    }
}

/// `AMDGPU_FAMILY_*` of a GFX major version.
fn family(gpu: &Gpu) -> u32 {
    match gpu.target.major {
        0..=7 => 120, // CI
        8 => 130,     // VI
        9 => 141,     // AI
        10 => 143,    // NV
        11 => 145,    // GC_11_0_0
        _ => 152,     // GC_12_0_0
    }
}

/// `struct drm_amdgpu_info_device`, from the GPU's topology node.
fn dev_info(dev: &Device, gpu: &Gpu) -> Vec<u8> {
    let mut d = vec![0u8; DEV_INFO_SIZE];
    let node = dev.cfg.machine.node_of(gpu);
    let prop = |key: &str| {
        node.and_then(|n| n.properties.get(key))
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(0)
    };
    let per_engine = prop("simd_arrays_per_engine").max(1);
    let engines = (prop("array_count") / per_engine).max(1);
    let cu_per_sh = prop("cu_per_simd_array");
    let mem_clk = node
        .and_then(|n| n.mem_banks.iter().find(|b| b.heap().is_vram()))
        .map_or(0, |b| b.mem_clk_max);
    let width = node
        .and_then(|n| n.mem_banks.iter().find(|b| b.heap().is_vram()))
        .map_or(0, |b| b.width);
    set_u32(&mut d, 0, gpu.device_id);
    set_u32(&mut d, 8, gpu.target.stepping + 1);
    set_u32(&mut d, 12, gpu.pci_revision());
    set_u32(&mut d, 16, family(gpu));
    set_u32(&mut d, 20, engines);
    set_u32(&mut d, 24, per_engine);
    set_u32(&mut d, 28, 100_000); // 100 MHz reference clock, in kHz
    set_u64(
        &mut d,
        32,
        u64::from(prop("max_engine_clk_fcompute")) * 1000,
    );
    set_u64(&mut d, 40, u64::from(mem_clk) * 1000);
    let cus = prop("simd_count") / prop("simd_per_cu").max(1);
    set_u32(&mut d, 48, cus);
    // cu_bitmap[se][sh], 4×4 words.
    let mask = if cu_per_sh >= 32 {
        u32::MAX
    } else {
        (1u32 << cu_per_sh) - 1
    };
    for se in 0..engines.min(4) as usize {
        for sh in 0..per_engine.min(4) as usize {
            set_u32(&mut d, 56 + (se * 4 + sh) * 4, mask);
        }
    }
    set_u32(&mut d, 128, 1);
    set_u64(&mut d, 144, 0x1_0000); // AMDGPU_VA_RESERVED_BOTTOM
    set_u64(&mut d, 152, 1 << 47); // min(vm size, AMDGPU_GMC_HOLE_START)
    set_u32(&mut d, 160, 4096);
    set_u32(&mut d, 164, 1 << 21);
    set_u32(&mut d, 168, 4096);
    set_u32(&mut d, 176, if gpu.target.major >= 11 { 9 } else { 6 }); // GDDR6 or HBM
    set_u32(&mut d, 180, width);
    set_u32(&mut d, 240, prop("wave_front_size"));
    set_u32(&mut d, 244, 256);
    set_u32(&mut d, 248, cu_per_sh);
    set_u32(&mut d, 252, 16);
    set_u64(&mut d, 336, 0xFFFF_8000_0000_0000); // AMDGPU_GMC_HOLE_END
    set_u64(&mut d, 344, 0xFFFF_8000_0000_0000 | ((1 << 48) - (1 << 21)));
    d
}
