//! The recording demo agent: every prompt it runs is appended to a log, one JSON string per
//! line, so that a test counts the agent's real runs.

use std::path::Path;

/// A demo agent that records every prompt it runs in `log` (under tmp/logs beside the data dir:
/// the confined agent may create files only there).
pub fn recording_agent(log: &Path) -> String {
    format!(
        "env DEMO_PROMPT_LOG='{}' '{}' demo-agent",
        log.display(),
        super::binary::BIN
    )
}

/// The prompts the agent ran, in order.
pub fn prompts_run(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a recorded prompt"))
        .collect()
}
