//! Search results: `search.results` and its hits.

use serde::{Deserialize, Serialize};

use crate::client::SearchScope;
use crate::server::Role;

/// A search hit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    /// The message.
    pub message_id: String,
    /// Its chat.
    pub chat_id: String,
    /// Its thread.
    #[serde(default)]
    pub thread_id: Option<String>,
    /// Its author.
    pub role: Role,
    /// Text around the match; matches are wrapped in `[` and `]`.
    pub snippet: String,
    /// Its time.
    pub ts: i64,
}

/// `search.results`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchResults {
    /// The query.
    pub query: String,
    /// The scope.
    pub scope: SearchScope,
    /// Hits, best first.
    pub hits: Vec<SearchHit>,
}
