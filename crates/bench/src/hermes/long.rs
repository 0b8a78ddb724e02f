//! One long chat, for the agent's memory: `opts.long` short turns in one chat through the
//! gateway, and the same turns sent to `hermes acp` directly by this program (an ACP client with
//! no way to take a turn back, so nothing but the conversation itself grows). The agent's
//! resident memory is read after the first turn and after the last; the gateway's agent may end
//! at most [`LONG_RSS_TARGET`] times the directly driven one's.

use super::{Options, Side};
use crate::report::{Report, Target};

/// The agent behind the gateway may hold this many times the memory of the same agent driven
/// directly after the same turns.
const LONG_RSS_TARGET: f64 = 1.1;

/// The text of every turn (the fake model's `long turn` rule answers it with one chunk).
fn text(i: usize) -> String {
    format!("long turn {i}")
}

/// The agent's memory after the first and after the last turn, through the gateway or
/// directly.
pub async fn memory(side: &mut Side, opts: &Options) -> anyhow::Result<(f64, f64)> {
    side.turn(&text(0), 1).await?;
    let first = side.usage().agent_rss_mib;
    for i in 1..opts.long {
        side.turn(&text(i), 1).await?;
    }
    Ok((first, side.usage().agent_rss_mib))
}

/// Records both sides' memory and the ratio of the ends.
pub fn record(report: &mut Report, n: usize, gateway: (f64, f64), direct: (f64, f64)) {
    for (side, (first, last)) in [
        ("gateway + hermes acp", gateway),
        ("hermes acp alone", direct),
    ] {
        let row =
            |what: &str| format!("{side}: one chat of {n} turns, agent's resident memory {what}");
        report.add(&row("after the first"), "MiB", first);
        report.add(&row("after the last"), "MiB", last);
    }
    let ratio = format!("gateway + hermes acp / hermes acp alone: agent's memory after {n} turns");
    report.add(&ratio, "×", gateway.1 / direct.1);
    report.target(&ratio, "×", Target::AtMost(LONG_RSS_TARGET));
}
