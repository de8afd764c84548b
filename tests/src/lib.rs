//! `kfd-tests`: cross-crate integration tests.
//!
//! The tests under `tests/` run against the real `/dev/kfd` when the machine has one and skip,
//! with a printed reason, what the machine lacks. `KFD_TEST_HW=1` makes a missing `/dev/kfd` a
//! failure instead of a skip.
