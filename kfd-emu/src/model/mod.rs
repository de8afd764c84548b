//! The KFD model (being written).
