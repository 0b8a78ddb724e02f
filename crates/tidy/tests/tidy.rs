//! The house rules, checked on the real repository. See crates/tidy/src/lib.rs for the rules.

use std::path::PathBuf;

#[test]
fn house_rules() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let violations = iris_tidy::check_repo(&root).expect("read the source tree");
    assert!(
        violations.is_empty(),
        "\n{}",
        iris_tidy::report::render(&violations)
    );
}
