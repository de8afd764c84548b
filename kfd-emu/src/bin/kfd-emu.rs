//! `kfd-emu`: run a program against the emulated KFD driver.
fn main() {}
