//! Machine descriptions (being written).
