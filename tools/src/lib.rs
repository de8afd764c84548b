//! The library half of `kfdtool`: KFD traces in rocprofv3's formats ([`rocpd`], with
//! rocprofv3's agent objects from [`agent_info`]), their
//! pictures ([`plots`]) and their what-if replay on kfd-emu's model ([`replay`]). The typed records and the summary are kfd-svm's
//! ([`kfd_svm::records`], [`kfd_svm::summary`]); SQLite and plotters live here, so programs
//! that only use kfd-svm do not build them.

// serde_json's json! of rocprofv3's ~60-member agent object (agent_info) nests deeper than
// the default limit.
#![recursion_limit = "256"]

pub mod agent_info;
pub mod plots;
pub mod replay;
pub mod rocpd;
pub mod svm_table;
