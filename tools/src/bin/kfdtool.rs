//! `kfdtool`: inspect and exercise the KFD driver.
fn main() {}
