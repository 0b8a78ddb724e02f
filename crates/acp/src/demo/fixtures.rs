//! What the demo agent's parts share: its default model, its busy error code, and the fixed
//! texts and files its behaviours send.

/// The model a new session starts with.
pub const DEFAULT_MODEL: &str = "demo:echo";
/// JSON-RPC error code of a prompt sent while the session's turn is still running.
pub const BUSY: i64 = -32000;
/// The whole answer to a prompt containing `silent`.
pub const SILENT_ANSWER: &str = "[SILENT] nothing to report";
/// The file a `mkfile` turn writes into the session's working directory.
pub const DEMO_FILE_NAME: &str = "iris-demo-file.txt";
/// The image a `mkimage` turn sends: a 1×1 PNG, base64.
pub const DEMO_PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// The contents of [`DEMO_FILE_NAME`].
pub fn demo_file_text() -> String {
    (1..=200)
        .map(|i| format!("Iris demo file, line {i}\n"))
        .collect()
}
