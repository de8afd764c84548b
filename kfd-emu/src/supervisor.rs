//! The seccomp supervisor (being written).
