//! Raw KFD ABI (being written).
