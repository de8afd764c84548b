//! Laying out a [`StatAnswer`] the way the x86_64 kernel does: `struct stat` (for `stat`,
//! `lstat`, `newfstatat`) and `struct statx`, and deriving an `access` answer from it.

use rustix::io::Errno;

use crate::backend::{StatAnswer, StatKind};

/// `sizeof(struct stat)` on x86_64.
pub(crate) const STAT_SIZE: usize = 144;
/// `sizeof(struct statx)`.
pub(crate) const STATX_SIZE: usize = 256;

const _: () = assert!(size_of::<libc::stat>() == STAT_SIZE);
const _: () = assert!(size_of::<libc::statx>() == STATX_SIZE);

/// `STATX_BASIC_STATS`: every field the answer carries (all but `btime` and the newer ones).
const STATX_BASIC_STATS: u32 = 0x7ff;

fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    buf[at..at + bytes.len()].copy_from_slice(bytes);
}

/// `st_mode`: the type bits and the permission bits.
fn mode(answer: &StatAnswer) -> u32 {
    let kind = match answer.kind {
        StatKind::CharDevice { .. } => libc::S_IFCHR,
        StatKind::Regular => libc::S_IFREG,
        StatKind::Directory => libc::S_IFDIR,
    };
    kind | (answer.perm & 0o7777)
}

fn rdev(answer: &StatAnswer) -> (u32, u32) {
    match answer.kind {
        StatKind::CharDevice { major, minor } => (major, minor),
        _ => (0, 0),
    }
}

/// The `struct stat` bytes (x86_64 layout).
pub(crate) fn stat_bytes(answer: &StatAnswer) -> [u8; STAT_SIZE] {
    let mut buf = [0u8; STAT_SIZE];
    let (rmaj, rmin) = rdev(answer);
    put(
        &mut buf,
        0,
        &libc::makedev(answer.dev.0, answer.dev.1).to_ne_bytes(),
    );
    put(&mut buf, 8, &answer.ino.to_ne_bytes());
    put(&mut buf, 16, &u64::from(answer.nlink).to_ne_bytes());
    put(&mut buf, 24, &mode(answer).to_ne_bytes());
    put(&mut buf, 28, &answer.uid.to_ne_bytes());
    put(&mut buf, 32, &answer.gid.to_ne_bytes());
    put(&mut buf, 40, &libc::makedev(rmaj, rmin).to_ne_bytes());
    put(&mut buf, 48, &answer.size.to_ne_bytes());
    put(&mut buf, 56, &i64::from(answer.blksize).to_ne_bytes());
    put(&mut buf, 64, &answer.blocks.to_ne_bytes());
    for (at, t) in [(72, answer.atime), (88, answer.mtime), (104, answer.ctime)] {
        put(&mut buf, at, &t.sec.to_ne_bytes());
        put(&mut buf, at + 8, &i64::from(t.nsec).to_ne_bytes());
    }
    buf
}

/// The `struct statx` bytes. Every basic field is filled whatever `mask` asked for (the
/// kernel may return more than requested) and `stx_mask` says so; `btime` and the newer
/// fields stay unset and out of `stx_mask`.
pub(crate) fn statx_bytes(answer: &StatAnswer) -> [u8; STATX_SIZE] {
    let mut buf = [0u8; STATX_SIZE];
    let (rmaj, rmin) = rdev(answer);
    put(&mut buf, 0, &STATX_BASIC_STATS.to_ne_bytes());
    put(&mut buf, 4, &answer.blksize.to_ne_bytes());
    put(&mut buf, 16, &answer.nlink.to_ne_bytes());
    put(&mut buf, 20, &answer.uid.to_ne_bytes());
    put(&mut buf, 24, &answer.gid.to_ne_bytes());
    put(&mut buf, 28, &(mode(answer) as u16).to_ne_bytes());
    put(&mut buf, 32, &answer.ino.to_ne_bytes());
    put(&mut buf, 40, &answer.size.to_ne_bytes());
    put(&mut buf, 48, &answer.blocks.to_ne_bytes());
    // stx_atime @64, stx_btime @80 (unset), stx_ctime @96, stx_mtime @112.
    for (at, t) in [(64, answer.atime), (96, answer.ctime), (112, answer.mtime)] {
        put(&mut buf, at, &t.sec.to_ne_bytes());
        put(&mut buf, at + 8, &t.nsec.to_ne_bytes());
    }
    put(&mut buf, 128, &rmaj.to_ne_bytes());
    put(&mut buf, 132, &rmin.to_ne_bytes());
    put(&mut buf, 136, &answer.dev.0.to_ne_bytes());
    put(&mut buf, 140, &answer.dev.1.to_ne_bytes());
    buf
}

/// The answer to `access(path, how)` on the described file. The emulated files belong to root
/// and are judged by their "other" bits, for every caller: `W_OK` on a 0444 sysfs file is
/// `EACCES` (as sysfs refuses the write anyway), `X_OK` needs an execute bit.
pub(crate) fn access(answer: &StatAnswer, how: i32) -> Result<(), Errno> {
    if how & !(libc::R_OK | libc::W_OK | libc::X_OK) != 0 {
        return Err(Errno::INVAL);
    }
    let other = answer.perm & 0o7;
    let wanted = [(libc::R_OK, 0o4), (libc::W_OK, 0o2), (libc::X_OK, 0o1)];
    if wanted
        .iter()
        .any(|&(flag, bit)| how & flag != 0 && other & bit == 0)
    {
        return Err(Errno::ACCESS);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::StatTime;

    fn answer() -> StatAnswer {
        StatAnswer {
            kind: StatKind::CharDevice {
                major: 226,
                minor: 128,
            },
            perm: 0o666,
            dev: (0, 5),
            ino: 77,
            nlink: 1,
            uid: 0,
            gid: 0,
            size: 0,
            blksize: 4096,
            blocks: 0,
            atime: StatTime { sec: 1, nsec: 2 },
            mtime: StatTime { sec: 3, nsec: 4 },
            ctime: StatTime { sec: 5, nsec: 6 },
        }
    }

    fn u32_at(buf: &[u8], at: usize) -> u32 {
        u32::from_ne_bytes(buf[at..at + 4].try_into().unwrap())
    }

    fn u64_at(buf: &[u8], at: usize) -> u64 {
        u64::from_ne_bytes(buf[at..at + 8].try_into().unwrap())
    }

    #[test]
    fn stat_layout_matches_libc() {
        use std::mem::offset_of;
        let b = stat_bytes(&answer());
        assert_eq!(
            u32_at(&b, offset_of!(libc::stat, st_mode)),
            libc::S_IFCHR | 0o666
        );
        let rdev = u64_at(&b, offset_of!(libc::stat, st_rdev));
        assert_eq!((libc::major(rdev), libc::minor(rdev)), (226, 128));
        assert_eq!(
            u64_at(&b, offset_of!(libc::stat, st_dev)),
            libc::makedev(0, 5)
        );
        assert_eq!(u64_at(&b, offset_of!(libc::stat, st_ino)), 77);
        assert_eq!(u64_at(&b, offset_of!(libc::stat, st_nlink)), 1);
        assert_eq!(u64_at(&b, offset_of!(libc::stat, st_blksize)), 4096);
        assert_eq!(u64_at(&b, offset_of!(libc::stat, st_atime)), 1);
        assert_eq!(u64_at(&b, offset_of!(libc::stat, st_atime_nsec)), 2);
        assert_eq!(u64_at(&b, offset_of!(libc::stat, st_mtime)), 3);
        assert_eq!(u64_at(&b, offset_of!(libc::stat, st_mtime_nsec)), 4);
        assert_eq!(u64_at(&b, offset_of!(libc::stat, st_ctime)), 5);
        assert_eq!(u64_at(&b, offset_of!(libc::stat, st_ctime_nsec)), 6);
    }

    #[test]
    fn statx_layout_matches_libc() {
        use std::mem::offset_of;
        let b = statx_bytes(&answer());
        let at = |field: usize| u32_at(&b, field);
        assert_eq!(
            at(offset_of!(libc::statx, stx_mask)),
            libc::STATX_BASIC_STATS
        );
        assert_eq!(
            at(offset_of!(libc::statx, stx_mode)) & 0xffff,
            libc::S_IFCHR | 0o666
        );
        assert_eq!(at(offset_of!(libc::statx, stx_rdev_major)), 226);
        assert_eq!(at(offset_of!(libc::statx, stx_rdev_minor)), 128);
        assert_eq!(at(offset_of!(libc::statx, stx_dev_minor)), 5);
        assert_eq!(at(offset_of!(libc::statx, stx_nlink)), 1);
        assert_eq!(at(offset_of!(libc::statx, stx_blksize)), 4096);
        assert_eq!(u64_at(&b, offset_of!(libc::statx, stx_ino)), 77);
        let mtime = offset_of!(libc::statx, stx_mtime);
        assert_eq!((u64_at(&b, mtime), at(mtime + 8)), (3, 4));
        let ctime = offset_of!(libc::statx, stx_ctime);
        assert_eq!((u64_at(&b, ctime), at(ctime + 8)), (5, 6));
        let atime = offset_of!(libc::statx, stx_atime);
        assert_eq!((u64_at(&b, atime), at(atime + 8)), (1, 2));
    }

    #[test]
    fn access_follows_the_other_bits() {
        let mut a = answer();
        assert_eq!(access(&a, libc::R_OK | libc::W_OK), Ok(()));
        assert_eq!(access(&a, libc::F_OK), Ok(()));
        assert_eq!(access(&a, libc::X_OK), Err(Errno::ACCESS));
        a.perm = 0o444;
        assert_eq!(access(&a, libc::W_OK), Err(Errno::ACCESS));
        assert_eq!(access(&a, 0o10), Err(Errno::INVAL));
    }
}
