//! The file browser's requests: `files.list`, `files.read` and `files.pull`, read-only, each
//! naming an agent or else the agent of the envelope's lane.

use iris_protocol::{FilesList, FilesPull, FilesRead, Header, ResponseFrame, ServerFrame};

use super::context::{resolve_lane, Context};
use crate::media::ConnMedia;
use crate::wire::{Reply, Result, WireError};

/// The agent a request names: its `agent`, else its lane's channel's agent.
async fn agent_of(ctx: &Context, header: &Header, agent: Option<String>) -> Result<String> {
    if let Some(agent) = agent {
        return Ok(agent);
    }
    let lane = resolve_lane(ctx, header).await?;
    let channels = ctx.shared.store.channel_directory().await?;
    let chosen = channels
        .iter()
        .find(|c| c.chat_id == lane.chat_id)
        .and_then(|c| c.agent.clone());
    Ok(chosen.unwrap_or_else(|| ctx.files.default_agent().to_owned()))
}

fn needs_id(header: &Header, what: &str) -> Result<()> {
    match header.id {
        Some(_) => Ok(()),
        None => Err(WireError::bad_request(format!("{what} needs an id"))),
    }
}

/// `files.list`.
pub async fn list(ctx: &Context, header: &Header, req: FilesList) -> Result<Reply> {
    needs_id(header, "files.list")?;
    let agent = agent_of(ctx, header, req.agent).await?;
    let listing = ctx.files.list(&agent, &req.path).await?;
    Ok(Reply::Direct(
        ResponseFrame::FilesList(listing),
        Header::default(),
    ))
}

/// `files.read`.
pub async fn read(ctx: &Context, header: &Header, req: FilesRead) -> Result<Reply> {
    needs_id(header, "files.read")?;
    let agent = agent_of(ctx, header, req.agent).await?;
    let content = ctx.files.read(&agent, &req.path, req.offset).await?;
    Ok(Reply::Direct(
        ResponseFrame::FilesRead(content),
        Header::default(),
    ))
}

/// `files.pull`: queued behind the connection's other pulls; its header, bytes and
/// `media.pull.end` come from the pull task.
pub async fn pull(
    ctx: &Context,
    media: &mut ConnMedia,
    header: &Header,
    req: FilesPull,
) -> Result<Reply> {
    needs_id(header, "files.pull")?;
    let agent = agent_of(ctx, header, req.agent).await?;
    let opened = ctx.files.open_for_pull(&agent, &req.path).await?;
    let size = opened.header.size;
    media.pull_opened(
        &ctx.media,
        header.id.clone(),
        ServerFrame::FilesPull(opened.header),
        opened.file,
        size,
    )?;
    Ok(Reply::Nothing)
}
