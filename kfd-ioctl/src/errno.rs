//! Errno names: the one table from a number to its C name (`ENOMEM`) and back, used by error
//! messages here and by the emulator's fault injection (`--fail MAP_MEMORY_TO_GPU:EFAULT`).
//!
//! Besides the errnos of `errno.h`, the table knows the kernel-internal ones (`ERESTARTSYS`,
//! `ENOTSUPP`, … from `include/linux/errno.h`): they never reach a program through a
//! syscall, but they are what the kernel's KFD code returns internally, and the emulator
//! speaks of them by name.

use rustix::io::Errno;

/// Defines [`NAMES`] from the `libc` constants of the same names, so a value cannot be mistyped.
macro_rules! errno_table {
    ($($name:ident,)*) => {
        /// Every named errno: `errno.h`'s from `libc`, then the kernel-internal ones.
        const NAMES: &[(i32, &str)] = &[
            $((libc::$name, stringify!($name)),)*
            (512, "ERESTARTSYS"),
            (513, "ERESTARTNOINTR"),
            (514, "ERESTARTNOHAND"),
            (515, "ENOIOCTLCMD"),
            (516, "ERESTART_RESTARTBLOCK"),
            (517, "EPROBE_DEFER"),
            (518, "EOPENSTALE"),
            (519, "ENOPARAM"),
            (521, "EBADHANDLE"),
            (522, "ENOTSYNC"),
            (523, "EBADCOOKIE"),
            (524, "ENOTSUPP"),
            (525, "ETOOSMALL"),
            (526, "ESERVERFAULT"),
            (527, "EBADTYPE"),
            (528, "EJUKEBOX"),
            (529, "EIOCBQUEUED"),
            (530, "ERECALLCONFLICT"),
        ];
    };
}

errno_table! {
EPERM,
ENOENT,
ESRCH,
EINTR,
EIO,
ENXIO,
E2BIG,
ENOEXEC,
EBADF,
ECHILD,
EAGAIN,
ENOMEM,
EACCES,
EFAULT,
ENOTBLK,
EBUSY,
EEXIST,
EXDEV,
ENODEV,
ENOTDIR,
EISDIR,
EINVAL,
ENFILE,
EMFILE,
ENOTTY,
ETXTBSY,
EFBIG,
ENOSPC,
ESPIPE,
EROFS,
EMLINK,
EPIPE,
EDOM,
ERANGE,
EDEADLK,
ENAMETOOLONG,
ENOLCK,
ENOSYS,
ENOTEMPTY,
ELOOP,
ENOMSG,
EIDRM,
ECHRNG,
EL2NSYNC,
EL3HLT,
EL3RST,
ELNRNG,
EUNATCH,
ENOCSI,
EL2HLT,
EBADE,
EBADR,
EXFULL,
ENOANO,
EBADRQC,
EBADSLT,
EBFONT,
ENOSTR,
ENODATA,
ETIME,
ENOSR,
ENONET,
ENOPKG,
EREMOTE,
ENOLINK,
EADV,
ESRMNT,
ECOMM,
EPROTO,
EMULTIHOP,
EDOTDOT,
EBADMSG,
EOVERFLOW,
ENOTUNIQ,
EBADFD,
EREMCHG,
ELIBACC,
ELIBBAD,
ELIBSCN,
ELIBMAX,
ELIBEXEC,
EILSEQ,
ERESTART,
ESTRPIPE,
EUSERS,
ENOTSOCK,
EDESTADDRREQ,
EMSGSIZE,
EPROTOTYPE,
ENOPROTOOPT,
EPROTONOSUPPORT,
ESOCKTNOSUPPORT,
EOPNOTSUPP,
EPFNOSUPPORT,
EAFNOSUPPORT,
EADDRINUSE,
EADDRNOTAVAIL,
ENETDOWN,
ENETUNREACH,
ENETRESET,
ECONNABORTED,
ECONNRESET,
ENOBUFS,
EISCONN,
ENOTCONN,
ESHUTDOWN,
ETOOMANYREFS,
ETIMEDOUT,
ECONNREFUSED,
EHOSTDOWN,
EHOSTUNREACH,
EALREADY,
EINPROGRESS,
ESTALE,
EUCLEAN,
ENOTNAM,
ENAVAIL,
EISNAM,
EREMOTEIO,
EDQUOT,
ENOMEDIUM,
EMEDIUMTYPE,
ECANCELED,
ENOKEY,
EKEYEXPIRED,
EKEYREVOKED,
EKEYREJECTED,
EOWNERDEAD,
ENOTRECOVERABLE,
ERFKILL,
EHWPOISON,}

/// Other spellings of errnos the table names differently (same value).
const ALIASES: &[(i32, &str)] = &[
    (libc::EWOULDBLOCK, "EWOULDBLOCK"),
    (libc::EDEADLOCK, "EDEADLOCK"),
    (libc::ENOTSUP, "ENOTSUP"),
];

/// The C name of `errno` (`"ENOMEM"` for [`Errno::NOMEM`]), or `None` for a number without
/// one.
///
/// ```
/// use kfd_ioctl::{Errno, errno_name};
/// assert_eq!(errno_name(Errno::NOTTY), Some("ENOTTY"));
/// assert_eq!(errno_name(Errno::from_raw_os_error(512)), Some("ERESTARTSYS"));
/// assert_eq!(errno_name(Errno::from_raw_os_error(4000)), None);
/// ```
pub fn errno_name(errno: Errno) -> Option<&'static str> {
    let raw = errno.raw_os_error();
    NAMES
        .iter()
        .find(|&&(value, _)| value == raw)
        .map(|&(_, name)| name)
}

/// The errno called `name` (any case; aliases such as `EWOULDBLOCK` too), or `None`.
///
/// ```
/// use kfd_ioctl::{Errno, errno_by_name};
/// assert_eq!(errno_by_name("efault"), Some(Errno::FAULT));
/// assert_eq!(errno_by_name("EWOULDBLOCK"), Some(Errno::AGAIN));
/// assert_eq!(errno_by_name("EWHAT"), None);
/// ```
pub fn errno_by_name(name: &str) -> Option<Errno> {
    NAMES
        .iter()
        .chain(ALIASES)
        .find(|(_, known)| known.eq_ignore_ascii_case(name))
        .map(|&(value, _)| Errno::from_raw_os_error(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_maps_back_to_its_value() {
        for &(value, name) in NAMES {
            let errno = Errno::from_raw_os_error(value);
            assert_eq!(errno_by_name(name), Some(errno), "{name}");
            assert_eq!(errno_name(errno), Some(name), "{value}");
        }
    }

    #[test]
    fn values_and_names_are_unique() {
        for (i, &(value, name)) in NAMES.iter().enumerate() {
            for &(other_value, other_name) in &NAMES[i + 1..] {
                assert_ne!(value, other_value, "{name} and {other_name}");
                assert_ne!(name, other_name);
            }
        }
    }

    #[test]
    fn the_values_are_linux_ones() {
        assert_eq!(errno_by_name("EINVAL"), Some(Errno::INVAL));
        assert_eq!(errno_by_name("ENOTTY").map(Errno::raw_os_error), Some(25));
        assert_eq!(
            errno_by_name("ENOTSUPP").map(Errno::raw_os_error),
            Some(524)
        );
        assert_eq!(errno_by_name("ENOTSUP"), Some(Errno::OPNOTSUPP));
        assert_eq!(errno_name(Errno::DEADLK), Some("EDEADLK"));
    }

    #[test]
    fn unknown_numbers_and_names_have_none() {
        assert_eq!(errno_name(Errno::from_raw_os_error(520)), None);
        assert_eq!(errno_by_name(""), None);
        assert_eq!(errno_by_name("ENOMEMX"), None);
        assert_eq!(errno_by_name("NOMEM"), None);
    }
}
