//! The library half of `kfdtool`: KFD traces in rocprofv3's formats ([`rocpd`]), their
//! pictures ([`plots`]) and their what-if replay on kfd-emu's model ([`replay`]). The typed records and the summary are kfd-svm's
//! ([`kfd_svm::records`], [`kfd_svm::summary`]); SQLite and plotters live here, so programs
//! that only use kfd-svm do not build them.

pub mod plots;
pub mod replay;
pub mod rocpd;
