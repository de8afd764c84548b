//! How a step fails: the one line `xtask` prints before exiting, and running a command.

use std::fmt;
use std::process::Command;

/// Why a step failed, for the one line `xtask` prints before exiting.
#[derive(Debug)]
pub struct Failure(String);

impl Failure {
    /// A failure saying `message`.
    pub fn new(message: impl Into<String>) -> Failure {
        Failure(message.into())
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Runs `command` to its end (its output passes through); `what` names it in the error.
pub fn run(command: &mut Command, what: &str) -> Result<(), Failure> {
    let status = command
        .status()
        .map_err(|e| Failure::new(format!("{what}: cannot run it: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(Failure::new(format!("{what} failed ({status})")))
    }
}
