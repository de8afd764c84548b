//! Where SVM pages live ([`Location`], kfd-ioctl's, shared with its SMI records) and what a
//! GPU may do with them ([`Access`]).

pub use kfd_ioctl::Location;
use kfd_ioctl::abi;

/// What one GPU may do with a range: the three access attribute types of SET_ATTR, and what a
/// GET_ATTR access query answers.
///
/// The kernel keeps two bitmaps per range, `access` and `access_in_place`; each variant sets
/// one and clears the other, or clears both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// The GPU may map the pages and the kernel may migrate them to it
    /// (`KFD_IOCTL_SVM_ATTR_ACCESS`).
    #[doc(alias = "KFD_IOCTL_SVM_ATTR_ACCESS")]
    Access,
    /// The GPU may map the pages where they are; no migration on its behalf
    /// (`KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE`).
    #[doc(alias = "KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE")]
    AccessInPlace,
    /// The GPU may not access the range (`KFD_IOCTL_SVM_ATTR_NO_ACCESS`).
    #[doc(alias = "KFD_IOCTL_SVM_ATTR_NO_ACCESS")]
    NoAccess,
}

impl Access {
    /// The attribute type that carries this access (`KFD_IOCTL_SVM_ATTR_ACCESS*`).
    pub const fn attr_type(self) -> u32 {
        match self {
            Access::Access => abi::KFD_IOCTL_SVM_ATTR_ACCESS,
            Access::AccessInPlace => abi::KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE,
            Access::NoAccess => abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS,
        }
    }

    /// The access an attribute type stands for, if it is one of the three access types.
    pub const fn from_attr_type(attr_type: u32) -> Option<Access> {
        match attr_type {
            abi::KFD_IOCTL_SVM_ATTR_ACCESS => Some(Access::Access),
            abi::KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE => Some(Access::AccessInPlace),
            abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS => Some(Access::NoAccess),
            _ => None,
        }
    }
}

impl std::fmt::Display for Access {
    /// `access`, `access in place` or `no access`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Access::Access => "access",
            Access::AccessInPlace => "access in place",
            Access::NoAccess => "no access",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_types_are_the_abi_values() {
        for access in [Access::Access, Access::AccessInPlace, Access::NoAccess] {
            assert_eq!(Access::from_attr_type(access.attr_type()), Some(access));
        }
        assert_eq!(Access::Access.attr_type(), 2);
        assert_eq!(Access::AccessInPlace.attr_type(), 3);
        assert_eq!(Access::NoAccess.attr_type(), 4);
        assert_eq!(
            Access::from_attr_type(abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC),
            None
        );
        assert_eq!(Access::from_attr_type(8), None);
    }
}
