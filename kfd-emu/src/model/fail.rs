//! Fault injection: `--fail IOCTL:ERRNO[:COUNT]`, and errno names.

use std::fmt;
use std::str::FromStr;

use rustix::io::Errno;

/// Makes an ioctl fail with an errno before its handler runs, `count` times or always.
///
/// Parsed from `IOCTL:ERRNO[:COUNT]`: the ioctl as named in
/// [`IoctlInfo::name`](kfd_ioctl::abi::IoctlInfo) (`ALLOC_MEMORY_OF_GPU`, with or without the
/// `AMDKFD_IOC_` prefix, any case), the errno by name (`ENOMEM`) or number (`12`).
///
/// ```
/// use kfd_emu::model::FailRule;
///
/// let rule: FailRule = "ALLOC_MEMORY_OF_GPU:ENOMEM:2".parse()?;
/// assert_eq!(rule.ioctl, "ALLOC_MEMORY_OF_GPU");
/// assert_eq!(rule.errno, rustix::io::Errno::NOMEM);
/// assert_eq!(rule.count, Some(2));
/// assert_eq!(rule.to_string(), "ALLOC_MEMORY_OF_GPU:ENOMEM:2");
/// # Ok::<(), kfd_emu::model::FailRuleError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailRule {
    /// The ioctl, as in the ioctl table (`ALLOC_MEMORY_OF_GPU`).
    pub ioctl: String,
    /// The errno the caller sees.
    pub errno: Errno,
    /// How many calls fail; `None`: every call.
    pub count: Option<u32>,
}

/// A `--fail` rule that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FailRuleError {
    /// Not `IOCTL:ERRNO[:COUNT]`.
    #[error("expected IOCTL:ERRNO[:COUNT], got {0:?}")]
    Syntax(String),
    /// The ioctl is not in the KFD ioctl table.
    #[error("no KFD ioctl is called {0:?}")]
    Ioctl(String),
    /// The errno is neither a known name nor a number in 1..4096.
    #[error("not an errno: {0:?}")]
    Errno(String),
    /// The count is not a positive integer.
    #[error("not a count: {0:?}")]
    Count(String),
}

impl FromStr for FailRule {
    type Err = FailRuleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = s.split(':').collect();
        let (ioctl, errno, count) = match parts.as_slice() {
            [ioctl, errno] => (*ioctl, *errno, None),
            [ioctl, errno, count] => (*ioctl, *errno, Some(*count)),
            _ => return Err(FailRuleError::Syntax(s.to_owned())),
        };
        let upper = ioctl.trim().to_ascii_uppercase();
        let name = upper.strip_prefix("AMDKFD_IOC_").unwrap_or(&upper);
        let info = kfd_ioctl::abi::IOCTLS
            .iter()
            .find(|info| info.name == name)
            .ok_or_else(|| FailRuleError::Ioctl(ioctl.to_owned()))?;
        let errno =
            parse_errno(errno.trim()).ok_or_else(|| FailRuleError::Errno(errno.to_owned()))?;
        let count = match count {
            None => None,
            Some(text) => match text.trim().parse::<u32>() {
                Ok(n) if n > 0 => Some(n),
                _ => return Err(FailRuleError::Count(text.to_owned())),
            },
        };
        Ok(FailRule {
            ioctl: info.name.to_owned(),
            errno,
            count,
        })
    }
}

impl fmt::Display for FailRule {
    /// The `--fail` form, with the errno by name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.ioctl, errno_name(self.errno))?;
        if let Some(count) = self.count {
            write!(f, ":{count}")?;
        }
        Ok(())
    }
}

/// A rule with what is left of its count.
#[derive(Debug)]
pub(super) struct Armed {
    rule: FailRule,
    left: Option<u32>,
}

impl Armed {
    pub(super) fn new(rule: FailRule) -> Armed {
        Armed {
            left: rule.count,
            rule,
        }
    }

    /// The errno to fail ioctl `name` with, using up one of the count.
    pub(super) fn fire(rules: &mut [Armed], name: &str) -> Option<Errno> {
        let armed = rules
            .iter_mut()
            .find(|a| a.rule.ioctl == name && a.left != Some(0))?;
        if let Some(left) = &mut armed.left {
            *left -= 1;
        }
        Some(armed.rule.errno)
    }
}

fn parse_errno(text: &str) -> Option<Errno> {
    if let Ok(n) = text.parse::<i32>() {
        return (1..4096).contains(&n).then(|| Errno::from_raw_os_error(n));
    }
    kfd_ioctl::errno_by_name(text)
}

/// `ENOMEM` for `Errno::NOMEM`; `E<number>` for errnos without a name.
pub(super) fn errno_name(errno: Errno) -> String {
    kfd_ioctl::errno_name(errno).map_or_else(|| format!("E{}", errno.raw_os_error()), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_names_numbers_and_counts() {
        let rule: FailRule = "amdkfd_ioc_map_memory_to_gpu:14".parse().expect("parse");
        assert_eq!(rule.ioctl, "MAP_MEMORY_TO_GPU");
        assert_eq!(rule.errno, Errno::FAULT);
        assert_eq!(rule.count, None);
        assert!(matches!(
            "NOPE:ENOMEM".parse::<FailRule>(),
            Err(FailRuleError::Ioctl(_))
        ));
        assert!(matches!(
            "GET_VERSION:EWHAT".parse::<FailRule>(),
            Err(FailRuleError::Errno(_))
        ));
        assert!(matches!(
            "GET_VERSION:ENOMEM:0".parse::<FailRule>(),
            Err(FailRuleError::Count(_))
        ));
        assert!(matches!(
            "GET_VERSION".parse::<FailRule>(),
            Err(FailRuleError::Syntax(_))
        ));
    }

    #[test]
    fn a_counted_rule_runs_out() {
        let mut rules = vec![Armed::new("GET_VERSION:EIO:2".parse().expect("parse"))];
        assert_eq!(Armed::fire(&mut rules, "GET_VERSION"), Some(Errno::IO));
        assert_eq!(Armed::fire(&mut rules, "ACQUIRE_VM"), None);
        assert_eq!(Armed::fire(&mut rules, "GET_VERSION"), Some(Errno::IO));
        assert_eq!(Armed::fire(&mut rules, "GET_VERSION"), None);
    }
}
