//! `search`, with its cost bounds: a per-device rate, a cap on different words (in the store),
//! a time budget per query, and a query that stops when the device goes away (the connection
//! drops this future, and the store stops the running query).

use iris_protocol::{
    ErrorCode, Header, ResponseFrame, Role, Search, SearchHit, SearchResults, SearchScope,
};
use iris_store::StoreError;

use super::context::{resolve_lane, Context};
use crate::wire::{Reply, Result, WireError};

/// Longest accepted search query, in bytes.
const MAX_QUERY: usize = 1024;

/// Answers `search {query, scope?, limit?}` with `search.results`.
pub async fn search(ctx: &Context, device: &str, header: &Header, req: Search) -> Result<Reply> {
    let limits = &ctx.shared.config.limits;
    if req.query.len() > MAX_QUERY {
        return Err(WireError::bad_request(format!(
            "query longer than {MAX_QUERY} bytes"
        )));
    }
    let limit = match req.limit {
        None => 50,
        Some(n) if n < 1 => return Err(WireError::bad_request("limit must be at least 1")),
        Some(n) => n.min(200) as usize,
    };
    let scope = match req.scope {
        SearchScope::All => None,
        SearchScope::Chat => {
            if header.chat_id.is_none() {
                return Err(WireError::bad_request("scope chat needs a chat_id"));
            }
            let lane = resolve_lane(ctx, header).await?;
            Some((lane.chat_id, lane.thread_id))
        }
    };
    if let Err(wait) = ctx.searches.take(device, limits.searches_per_minute) {
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let msg = format!(
            "more than {} searches in a minute; try again in {} s",
            limits.searches_per_minute,
            secs.max(1)
        );
        return Err(WireError::new(ErrorCode::RateLimited, msg));
    }
    let store = &ctx.shared.store;
    let hits = match store
        .search_within(&req.query, scope, limit, limits.search_budget)
        .await
    {
        Err(StoreError::Interrupted) => {
            tracing::info!(device_id = %device, "search stopped at its time budget");
            return Err(WireError::bad_request(
                "this search takes too long; try fewer or longer words",
            ));
        }
        other => other?,
    };
    let hits = hits
        .into_iter()
        .map(|h| SearchHit {
            message_id: h.message_id,
            chat_id: h.chat_id,
            thread_id: h.thread_id,
            role: Role::parse(&h.role).unwrap_or(Role::System),
            snippet: h.snippet,
            ts: h.ts,
        })
        .collect();
    Ok(Reply::Direct(
        ResponseFrame::SearchResults(SearchResults {
            query: req.query,
            scope: req.scope,
            hits,
        }),
        Header::default(),
    ))
}
