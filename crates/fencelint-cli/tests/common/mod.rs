//! Helpers shared by the end-to-end tests of the `fencelint` program.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root: tests run the program from there so paths in output are relative.
pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `fencelint ARGS` from the repository root.
pub(crate) fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fencelint"));
    command.args(args).current_dir(repo());
    command
}

/// Runs `fencelint ARGS` from the repository root and waits for it.
pub(crate) fn fencelint(args: &[&str]) -> Output {
    command(args).output().expect("run fencelint")
}

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
