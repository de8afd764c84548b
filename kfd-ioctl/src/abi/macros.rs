//! The macros that define the raw ABI.
//!
//! Every struct and constant of `kfd_ioctl.h` is written once, through these macros, and each
//! invocation emits three things from the same text: the Rust item, compile-time asserts of its
//! size and offsets, and its entry in the [`layout`](super::layout) registry that the C probe
//! test compares against the real header. Nothing can be added to the ABI without being
//! registered, and the registry cannot describe a layout the Rust item does not have.

/// Picks an explicit `since` minor when one is written, else the default.
macro_rules! since_or {
    ($default:literal) => {
        $default
    };
    ($default:literal $given:literal) => {
        $given
    };
}

/// Maps a field keyword of [`abi_structs!`] to its [`FieldKind`](super::layout::types::FieldKind).
macro_rules! field_kind {
    (field) => {
        $crate::abi::layout::types::FieldKind::Named
    };
    (pad) => {
        $crate::abi::layout::types::FieldKind::Padding
    };
    (union) => {
        $crate::abi::layout::types::FieldKind::Union
    };
}

/// Defines `#[repr(C)]` ABI structs, asserts their layout and registers them.
///
/// ```text
/// abi_structs! {
///     registry NAME_OF_THE_LIST;
///     /// docs
///     struct c_name [since 1, size 96 since 17, was 88 since 1] {
///         /// docs
///         @0 field ring_base_address: u64;
///         @88 field sdma_engine_id: u32, since 17;   // a C member
///         @52 pad pad: u32;                          // bytes C leaves as implicit padding
///         @8 union payload: [u64; 3];                // storage of an anonymous C union
///     }
///     union payload {                                // the members of that union
///         /// docs
///         enable: kfd_ioctl_dbg_trap_enable_args, set set_enable;
///     }
///     flex attrs: kfd_ioctl_svm_attribute;           // a C flexible array member
/// }
/// ```
///
/// `since` is the KFD minor at which the struct, its current size, or a field appeared in the
/// uapi header; `was` lists earlier sizes with the minor from which each held.
macro_rules! abi_structs {
    (
        registry $registry:ident;
        $(
            $(#[$smeta:meta])*
            struct $name:ident [
                since $since:literal, size $size:literal $(since $size_since:literal)?
                $(, was $old_size:literal since $old_since:literal)*
            ] {
                $(
                    $(#[$fmeta:meta])*
                    @$off:literal $kind:ident $field:ident : $ty:ty $(, since $fsince:literal)?;
                )*
            }
            $(
                union $payload:ident {
                    $(
                        $(#[$umeta:meta])*
                        $member:ident : $mty:ty, set $setter:ident $(, since $usince:literal)?;
                    )*
                }
            )?
            $(flex $flex:ident : $flex_ty:ty;)?
        )*
    ) => {
        $(
            $(#[$smeta])*
            #[repr(C)]
            #[allow(non_camel_case_types, non_snake_case)]
            #[derive(
                Debug,
                Default,
                Clone,
                Copy,
                PartialEq,
                Eq,
                ::zerocopy::FromBytes,
                ::zerocopy::IntoBytes,
                ::zerocopy::Immutable,
                ::zerocopy::KnownLayout,
            )]
            pub struct $name {
                $(
                    $(#[$fmeta])*
                    #[doc = concat!(
                        "\n\nByte offset ", stringify!($off), "; in the uapi header since KFD 1.",
                        since_or!($since $($fsince)?), "."
                    )]
                    pub $field: $ty,
                )*
            }

            const _: () = {
                assert!(::core::mem::size_of::<$name>() == $size);
                $(assert!(::core::mem::offset_of!($name, $field) == $off);)*
                $(
                    let payload_size = $crate::abi::layout::types::size_of_field(|s: &$name| &s.$payload);
                    let payload_align = $crate::abi::layout::types::align_of_field(|s: &$name| &s.$payload);
                    let mut largest = 0;
                    $(
                        assert!(::core::mem::size_of::<$mty>() <= payload_size);
                        assert!(::core::mem::align_of::<$mty>() <= payload_align);
                        if ::core::mem::size_of::<$mty>() > largest {
                            largest = ::core::mem::size_of::<$mty>();
                        }
                    )*
                    assert!(largest == payload_size);
                )?
                $(
                    assert!(::core::mem::align_of::<$flex_ty>() <= ::core::mem::align_of::<$name>());
                    assert!($size % ::core::mem::align_of::<$flex_ty>() == 0);
                )?
            };

            impl $crate::abi::layout::types::AbiType for $name {
                const FIELDS: &'static [$crate::abi::layout::types::FieldLayout] = &[
                    $(
                        $crate::abi::layout::types::FieldLayout {
                            name: $crate::abi::layout::types::c_name(stringify!($field)),
                            offset: $off,
                            size: ::core::mem::size_of::<$ty>(),
                            since_minor: since_or!($since $($fsince)?),
                            kind: field_kind!($kind),
                            fields: <$ty as $crate::abi::layout::types::AbiType>::FIELDS,
                        },
                    )*
                    $($(
                        $crate::abi::layout::types::FieldLayout {
                            name: stringify!($member),
                            offset: ::core::mem::offset_of!($name, $payload),
                            size: ::core::mem::size_of::<$mty>(),
                            since_minor: since_or!($since $($usince)?),
                            kind: $crate::abi::layout::types::FieldKind::Named,
                            fields: <$mty as $crate::abi::layout::types::AbiType>::FIELDS,
                        },
                    )*)?
                    $(
                        $crate::abi::layout::types::FieldLayout {
                            name: stringify!($flex),
                            offset: $size,
                            size: 0,
                            since_minor: $since,
                            kind: $crate::abi::layout::types::FieldKind::Flexible,
                            fields: &[],
                        },
                    )?
                ];
            }

            impl $crate::abi::layout::types::AbiStruct for $name {
                const LAYOUT: $crate::abi::layout::types::StructLayout = $crate::abi::layout::types::StructLayout {
                    name: stringify!($name),
                    since_minor: $since,
                    size: $size,
                    size_since_minor: since_or!($since $($size_since)?),
                    older_sizes: &[$(($old_since, $old_size)),*],
                    fields: <$name as $crate::abi::layout::types::AbiType>::FIELDS,
                };
            }

            $(
                impl $name {
                    $(
                        $(#[$umeta])*
                        #[doc = concat!(
                            "\n\nReads the `", stringify!($member), "` member of the anonymous C ",
                            "union (a copy of the leading bytes of `", stringify!($payload), "`)."
                        )]
                        pub fn $member(&self) -> $mty {
                            $crate::abi::layout::types::union_read(::zerocopy::IntoBytes::as_bytes(
                                &self.$payload,
                            ))
                        }

                        #[doc = concat!(
                            "Writes the `", stringify!($member), "` member of the anonymous C union; ",
                            "the union's remaining bytes become zero."
                        )]
                        pub fn $setter(&mut self, value: $mty) {
                            $crate::abi::layout::types::union_write(
                                ::zerocopy::IntoBytes::as_mut_bytes(&mut self.$payload),
                                &value,
                            )
                        }
                    )*
                }
            )?
        )*

        /// The layouts of the structs defined in this module, in definition order.
        pub(crate) const $registry: &[$crate::abi::layout::types::StructLayout] =
            &[$(<$name as $crate::abi::layout::types::AbiStruct>::LAYOUT),*];
    };
}

/// Defines constants of the uapi header and registers them.
///
/// ```text
/// abi_consts! {
///     registry NAME_OF_THE_LIST;
///     /// docs
///     KFD_IOC_QUEUE_TYPE_COMPUTE: u32 = 0x0, since 1;
/// }
/// ```
macro_rules! abi_consts {
    (
        registry $registry:ident;
        $(
            $(#[$meta:meta])*
            $name:ident : $ty:ty = $value:expr, since $since:literal;
        )*
    ) => {
        $(
            $(#[$meta])*
            #[doc = concat!("\n\nIn the uapi header since KFD 1.", $since, ".")]
            pub const $name: $ty = $value;
        )*

        /// The constants defined in this module, in definition order.
        pub(crate) const $registry: &[$crate::abi::layout::types::ConstLayout] = &[$(
            $crate::abi::layout::types::ConstLayout {
                name: stringify!($name),
                value: $name as i128,
                bits: <$ty>::BITS,
                signed: <$ty>::MIN != 0,
                since_minor: $since,
            }
        ),*];
    };
}
