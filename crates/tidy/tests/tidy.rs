//! The house rules, checked on the real repository. See crates/tidy/src/lib.rs for the rules.

use std::path::PathBuf;

#[test]
fn house_rules() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let violations = iris_tidy::check_repo(&root).expect("read the source tree");
    // Near a limit is no failure; it is said (`cargo test -p iris-tidy -- --nocapture`, or
    // `cargo run -p iris-tidy`) so that a split never waits for the limit.
    let near = iris_tidy::near_limits(&root).expect("read the source tree");
    for line in &near {
        println!("near a limit: {line}");
    }
    assert!(
        violations.is_empty(),
        "\n{}{}",
        iris_tidy::report::render(&violations),
        iris_tidy::report::render_near(&near)
    );
}
