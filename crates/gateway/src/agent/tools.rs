//! Tool names and glyphs: the name shown for an ACP tool call, and its cosmetic emoji.
//!
//! ACP carries no tool name, only a title such as `terminal: echo hi`, `read: /etc/hosts`,
//! `patch (replace): src/main.rs` or `todo (2 items)`. The name is the part before `:` with any
//! parenthesised note removed. The emoji table holds Hermes' per-tool glyphs (its registry's
//! values; the glyph never travels over ACP); unknown tools get none, so the app falls back to
//! its own.

/// Tool name → emoji.
const EMOJIS: &[(&str, &str)] = &[
    ("browser_back", "◀️"),
    ("browser_cdp", "🧪"),
    ("browser_click", "👆"),
    ("browser_console", "🖥️"),
    ("browser_dialog", "💬"),
    ("browser_get_images", "🖼️"),
    ("browser_navigate", "🌐"),
    ("browser_press", "⌨️"),
    ("browser_scroll", "📜"),
    ("browser_snapshot", "📸"),
    ("browser_type", "⌨️"),
    ("browser_vision", "👁️"),
    ("clarify", "❓"),
    ("close_terminal", "🖥️"),
    ("cronjob", "⏰"),
    ("delegate_task", "🔀"),
    ("execute_code", "🐍"),
    ("feishu_doc_read", "📄"),
    ("feishu_drive_add_comment", "✉️"),
    ("feishu_drive_list_comment_replies", "💬"),
    ("feishu_drive_list_comments", "💬"),
    ("feishu_drive_reply_comment", "✉️"),
    ("ha_call_service", "🏠"),
    ("ha_get_state", "🏠"),
    ("ha_list_entities", "🏠"),
    ("ha_list_services", "🏠"),
    ("image_generate", "🎨"),
    ("kanban_attach", "📎"),
    ("kanban_attach_url", "📎"),
    ("kanban_attachments", "📎"),
    ("kanban_block", "⏸"),
    ("kanban_comment", "💬"),
    ("kanban_complete", "✔"),
    ("kanban_create", "➕"),
    ("kanban_heartbeat", "💓"),
    ("kanban_link", "🔗"),
    ("kanban_list", "📋"),
    ("kanban_show", "📋"),
    ("kanban_unblock", "▶"),
    ("memory", "🧠"),
    ("patch", "🔧"),
    ("process", "⚙️"),
    ("read_file", "📖"),
    ("read_terminal", "🖥️"),
    ("search_files", "🔎"),
    ("session_search", "🔍"),
    ("skill_manage", "📝"),
    ("skill_view", "📚"),
    ("skills_list", "📚"),
    ("spotify_albums", "💿"),
    ("spotify_devices", "🔈"),
    ("spotify_library", "❤️"),
    ("spotify_playback", "🎵"),
    ("spotify_playlists", "📚"),
    ("spotify_queue", "📻"),
    ("spotify_search", "🔎"),
    ("terminal", "💻"),
    ("text_to_speech", "🔊"),
    ("todo", "📋"),
    ("video_analyze", "🎬"),
    ("video_generate", "🎬"),
    ("vision_analyze", "👁️"),
    ("web_extract", "📄"),
    ("web_search", "🔍"),
    ("write_file", "✍️"),
    ("x_search", "🐦"),
    ("xai_video_edit", "video"),
    ("xai_video_extend", "video"),
    ("yb_query_group_info", "👥"),
    ("yb_query_group_members", "📋"),
    ("yb_search_sticker", "🔍"),
    ("yb_send_dm", "✉️"),
    ("yb_send_sticker", "🎨"),
];

/// Short names in titles that stand for a registry tool.
const ALIASES: &[(&str, &str)] = &[
    ("read", "read_file"),
    ("write", "write_file"),
    ("search", "search_files"),
];

/// The tool name and the rest of a title: `terminal: echo hi` → (`terminal`, `echo hi`).
pub fn split_title(title: &str) -> (String, Option<String>) {
    let (head, rest) = match title.split_once(':') {
        Some((head, rest)) => (head, Some(rest.trim().to_owned()).filter(|r| !r.is_empty())),
        None => (title, None),
    };
    let name = match head.find(" (") {
        Some(i) => &head[..i],
        None => head,
    };
    (name.trim().to_owned(), rest)
}

/// The emoji of a tool, if it is known.
pub fn emoji(name: &str) -> Option<&'static str> {
    let canonical = ALIASES
        .iter()
        .find(|(short, _)| *short == name)
        .map(|(_, full)| *full)
        .unwrap_or(name);
    EMOJIS
        .binary_search_by(|(n, _)| n.cmp(&canonical))
        .ok()
        .map(|i| EMOJIS[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_titles() {
        assert_eq!(
            split_title("terminal: echo hi"),
            ("terminal".into(), Some("echo hi".into()))
        );
        assert_eq!(
            split_title("patch (replace): src/a.rs"),
            ("patch".into(), Some("src/a.rs".into()))
        );
        assert_eq!(split_title("todo (2 items)"), ("todo".into(), None));
        assert_eq!(split_title("web_search"), ("web_search".into(), None));
    }

    #[test]
    fn known_tools_have_glyphs_and_unknown_ones_none() {
        assert_eq!(emoji("terminal"), Some("💻"));
        assert_eq!(emoji("read"), Some("📖"));
        assert_eq!(emoji("write_file"), Some("✍️"));
        assert_eq!(emoji("no_such_tool"), None);
        assert!(
            EMOJIS.windows(2).all(|w| w[0].0 < w[1].0),
            "sorted for binary search"
        );
    }
}
