//! `cargo run -p iris-tidy`: the house rules on this repository, and what is near their limits.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let (violations, near) = match (iris_tidy::check_repo(&root), iris_tidy::near_limits(&root)) {
        (Ok(v), Ok(n)) => (v, n),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("cannot read the source tree: {e}");
            return ExitCode::FAILURE;
        }
    };
    print!("{}", iris_tidy::report::render_near(&near));
    if violations.is_empty() {
        println!("The house rules hold.");
        return ExitCode::SUCCESS;
    }
    print!("{}", iris_tidy::report::render(&violations));
    ExitCode::FAILURE
}
