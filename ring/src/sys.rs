//! The address-space reservation the mappings of this crate are placed in, and the page size:
//! kfd-ioctl's, the one every crate shares.

pub(crate) use kfd_ioctl::mem::{Reservation, page_size};
