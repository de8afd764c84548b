//! KFD sysfs topology (being written).
