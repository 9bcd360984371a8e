//! The `converger` binary as a shell runs it: its help, and the exit codes of a command line
//! it cannot run (2) and of a call that fails (1).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn converger(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_converger"));
    cmd.args(args)
        .env_remove("CONVERGER_API_URL")
        .env_remove("CONVERGER_API_KEY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn the_binary_explains_itself_and_exits_with_what_went_wrong() {
    let (code, help, _) = converger(&["--help"], &[]);
    assert_eq!(code, 0);
    assert!(help.contains("converger listen") || help.contains("listen <channel id>"));
    // No API to talk to: a command line that cannot run.
    let (code, _, err) = converger(&["channels", "list"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("CONVERGER_API_URL"), "{err}");
    // An API that does not answer (a port nobody listens on): a failed call.
    let (code, _, err) = converger(
        &["channels", "list"],
        &[
            ("CONVERGER_API_URL", "http://127.0.0.1:9"),
            ("CONVERGER_API_KEY", "k"),
        ],
    );
    assert_eq!(code, 1);
    assert!(err.contains("did not complete"), "{err}");
}
