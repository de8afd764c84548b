//! amdgpu's IP discovery as sysfs shows it (`<PCI device>/ip_discovery/die/0/…`), per GPU.
//!
//! What the kernel publishes (`amdgpu_discovery_sysfs_init` and `amdgpu_discovery_sysfs_ips`,
//! `amdgpu_discovery.c`): below the PCI device, `ip_discovery/die/<die>/` holds `num_ips` and
//! one directory per hardware id, named by its number (`11` for GC, `42` for SDMA0, `108` for
//! NBIF: `soc15_hw_ip.h`), with a link named after it (`GC -> 11`, from `hw_id_names`); below
//! it one directory per instance (`0`, `1`, …) with `hw_id`, `num_instance`, `major`, `minor`,
//! `revision` (`%d`), `harvest` (`0x%01X`), `num_base_addresses` and `base_addr` (one
//! `0x%08X` line per address). tinygrad's KFD backend lists `die/0`, keeps the numeric
//! entries of GC, SDMA0 and NBIF and reads each one's `0/{major,minor,revision}`.
//!
//! Which GPUs have it: those the kernel brings up from the discovery table the GPU carries,
//! whose KFD node is named `ip discovery` (`amdgpu_asic_name[CHIP_IP_DISCOVERY]`): GC 9.4.3
//! and later, every GC 10 and newer part. Vega 20, Arcturus (MI100) and Aldebaran (MI210) are
//! brought up from versions compiled into `amdgpu_discovery_set_ip_blocks`; for them
//! `amdgpu_discovery_init` only tries the optional files `vega20_ip_discovery.bin`,
//! `arcturus_ip_discovery.bin` and `aldebaran_ip_discovery.bin`, which linux-firmware does not
//! ship, so `amdgpu_discovery_sysfs_init` finds no binary (`-EINVAL`) and there is no
//! `ip_discovery` directory.
//!
//! Where each version comes from (the values are the GPU's own table; the kernel names the
//! firmware and the code it picks for each IP by that version, which is how these are known):
//! * GC: the KFD node's `gfx_target_version`, mapped back as `kgd2kfd_probe` maps GC versions
//!   to it (`kfd_device.c`): gfx942 (90402) is GC 9.4.3 (MI300X, MI300A; 9.4.4 is MI308),
//!   gfx950 is GC 9.5.0, and from GC 10 on the target's digits are the GC version
//!   (gfx1100 = GC 11.0.0, gfx1201 = GC 12.0.1).
//! * SDMA0 and NBIF (NBIO), by GC version: GC 9.4.3 has SDMA 4.4.2 (`sdma_v4_4_2.c`, firmware
//!   `sdma_4_4_2.bin`) and NBIO 7.9.0 (`nbio_v7_9.c`); GC 11.0.0 (Navi 31) has SDMA 6.0.0
//!   (`sdma_v6_0.c`, `sdma_6_0_0.bin`) and NBIO 4.3.0 (`nbio_v4_3.c`); GC 12.0.1 (Navi 48) has
//!   SDMA 7.0.1 (`sdma_v7_0.c`, `sdma_7_0_1.bin`) and NBIF 6.3.1 (`nbif_v6_3_1.c`). For a GC
//!   version not in this table only GC is listed.
//!
//! Where it differs: only die 0 and instance 0 of each IP are listed (an MI300X's table has
//! an instance per XCC and per SDMA engine), only GC, SDMA0 and NBIF, `harvest` is 0 and no
//! register base address is listed (`num_base_addresses` 0): the emulator has no registers.

use kfd_ioctl::topology::GfxTargetVersion;

use super::Gpu;

/// An IP version, `(major, minor, revision)`.
pub type Version = (u8, u8, u8);

/// One IP block of the discovery table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpBlock {
    /// Its hardware id (`soc15_hw_ip.h`).
    pub hw_id: u16,
    /// Its name in `hw_id_names`.
    pub name: &'static str,
    /// `major.minor.revision`.
    pub version: Version,
}

/// `GC_HWID`.
pub const GC_HWID: u16 = 11;
/// `SDMA0_HWID`.
pub const SDMA0_HWID: u16 = 42;
/// `NBIF_HWID` (what `NBIO_HWIP` and `NBIF_HWIP` both map to).
pub const NBIF_HWID: u16 = 108;

/// The KFD node name of a GPU brought up from its discovery table.
pub const IP_DISCOVERY_NAME: &str = "ip discovery";

/// The GC version of a GFX target (see the module docs).
pub fn gc_version(target: GfxTargetVersion) -> Version {
    let v = (
        u8::try_from(target.major).unwrap_or(u8::MAX),
        u8::try_from(target.minor).unwrap_or(u8::MAX),
        u8::try_from(target.stepping).unwrap_or(u8::MAX),
    );
    match v {
        // kgd2kfd_probe: GC 9.4.3 (and 9.4.4) report 90400 (an APU of revision 0), 90401
        // (revision 0) or 90402; GC 9.4.0-9.4.2 report 90006, 90008 and 90010.
        (9, 4, _) => (9, 4, 3),
        _ => v,
    }
}

/// SDMA0 and NBIF versions by GC version (see the module docs).
const BY_GC: &[(Version, Version, Version)] = &[
    ((9, 4, 3), (4, 4, 2), (7, 9, 0)),
    ((11, 0, 0), (6, 0, 0), (4, 3, 0)),
    ((12, 0, 1), (7, 0, 1), (6, 3, 1)),
];

impl Gpu {
    /// The IP blocks `ip_discovery/die/0` lists, in hardware-id order; `None` for a GPU
    /// without that directory (one whose node is not named `ip discovery`).
    pub fn ip_blocks(&self) -> Option<Vec<IpBlock>> {
        if self.name != IP_DISCOVERY_NAME {
            return None;
        }
        let gc = gc_version(self.target);
        let mut blocks = vec![IpBlock {
            hw_id: GC_HWID,
            name: "GC",
            version: gc,
        }];
        if let Some(&(_, sdma, nbif)) = BY_GC.iter().find(|(g, _, _)| *g == gc) {
            blocks.push(IpBlock {
                hw_id: SDMA0_HWID,
                name: "SDMA0",
                version: sdma,
            });
            blocks.push(IpBlock {
                hw_id: NBIF_HWID,
                name: "NBIF",
                version: nbif,
            });
        }
        Some(blocks)
    }
}

#[cfg(test)]
mod tests {
    use super::Version;
    use crate::machine::Machine;

    fn blocks(preset: &str) -> Option<Vec<(u16, Version)>> {
        let m = Machine::preset(preset).unwrap();
        m.gpus()[0]
            .ip_blocks()
            .map(|b| b.iter().map(|b| (b.hw_id, b.version)).collect())
    }

    #[test]
    fn discovery_gpus_list_gc_sdma_and_nbif_and_the_others_nothing() {
        let mi300 = Some(vec![(11, (9, 4, 3)), (42, (4, 4, 2)), (108, (7, 9, 0))]);
        assert_eq!(blocks("mi300x"), mi300);
        assert_eq!(blocks("mi300a"), mi300);
        assert_eq!(
            blocks("rx7900xtx"),
            Some(vec![(11, (11, 0, 0)), (42, (6, 0, 0)), (108, (4, 3, 0))])
        );
        assert_eq!(
            blocks("rx9070xt-small-bar"),
            Some(vec![(11, (12, 0, 1)), (42, (7, 0, 1)), (108, (6, 3, 1))])
        );
        for preset in ["mi210x8", "mi100", "radeon-vii"] {
            assert_eq!(blocks(preset), None, "{preset}");
        }
    }
}
