//! Nothing to build: this script exists for its build-dependency, which gives the runner's
//! macros the features the tests' macros turn on (see `Cargo.toml`), so that the test
//! command builds them once.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
