//! Honest meters: a turn's `tokens` and its `context_pct`, from what the agent reports.
//!
//! - `tokens` comes from the `usage` of the `session/prompt` result. ACP means it as the turn's
//!   own usage, and most agents send it so; Hermes (every version up to 0.19.0 at least) sends
//!   the session's running totals instead. For an agent known to do that the turn's share is the
//!   difference to the previous report of the same session, counted from zero when the session
//!   is opened on a process (Hermes starts its counters there). A report that goes backwards or
//!   is zero tells nothing about the turn: the field is then left out rather than guessed.
//! - `context_pct` is `used` of the turn's last `usage_update` as a share of `size` (the agent's
//!   estimate of the conversation its next request carries). A `used` beyond `size` is not a
//!   share of the window (a running total); the field is then left out, never clamped to 100.

use iris_acp::{Implementation, Usage};

/// Agents whose prompt results carry the session's running totals, by their `agentInfo.name`.
const CUMULATIVE_AGENTS: &[&str] = &["hermes-agent"];

/// How an agent reports a prompt's token usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageKind {
    /// Each prompt result carries that turn's own usage (ACP's meaning).
    PerTurn,
    /// Each prompt result carries the session's total so far.
    Cumulative,
}

impl UsageKind {
    /// The kind of the agent that introduced itself with `info` at `initialize`.
    pub fn of(info: Option<&Implementation>) -> Self {
        match info {
            Some(i) if CUMULATIVE_AGENTS.contains(&i.name.as_str()) => Self::Cumulative,
            _ => Self::PerTurn,
        }
    }
}

/// The token meter of one ACP session on one agent process.
#[derive(Debug, Clone)]
pub struct UsageMeter {
    kind: UsageKind,
    /// The last running total the session reported (cumulative agents only).
    last_total: u64,
}

impl UsageMeter {
    /// A meter for a session just opened (created, loaded or resumed) on a process.
    pub fn new(kind: UsageKind) -> Self {
        Self {
            kind,
            last_total: 0,
        }
    }

    /// The turn's tokens from its prompt result's `usage`; `None` when they cannot be known.
    pub fn turn_tokens(&mut self, usage: Option<&Usage>) -> Option<u64> {
        let usage = usage?;
        let total = if usage.total_tokens > 0 {
            usage.total_tokens
        } else {
            usage.input_tokens + usage.output_tokens
        };
        if total == 0 {
            return None;
        }
        match self.kind {
            UsageKind::PerTurn => Some(total),
            UsageKind::Cumulative => {
                let previous = std::mem::replace(&mut self.last_total, total);
                // Backwards means the agent's counter restarted somewhere unseen: unknown.
                total.checked_sub(previous).filter(|t| *t > 0)
            }
        }
    }
}

/// The share of the context window (`size`) that `used` tokens fill, rounded to the nearest
/// percent; `None` for an unknown window or a `used` that does not fit in it.
pub fn context_pct(size: u64, used: u64) -> Option<u8> {
    if size == 0 || used > size {
        return None;
    }
    let pct = (used.saturating_mul(100) + size / 2) / size;
    u8::try_from(pct).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input + output,
            ..Usage::default()
        }
    }

    fn hermes() -> Implementation {
        Implementation {
            name: "hermes-agent".into(),
            title: None,
            version: "0.19.0".into(),
        }
    }

    #[test]
    fn hermes_running_totals_become_per_turn_tokens() {
        // Four turns of one Hermes 0.19.0 session, as it answered them (the prompt results'
        // `usage`): one model request, then three turns of two requests each.
        let reports = [
            usage(1234, 56),
            usage(3702, 168),
            usage(6170, 280),
            usage(8638, 392),
        ];
        let mut meter = UsageMeter::new(UsageKind::of(Some(&hermes())));
        let tokens: Vec<_> = reports.iter().map(|u| meter.turn_tokens(Some(u))).collect();
        assert_eq!(tokens, [Some(1290), Some(2580), Some(2580), Some(2580)]);
    }

    #[test]
    fn a_hermes_turn_that_used_nothing_or_went_backwards_has_no_tokens() {
        let mut meter = UsageMeter::new(UsageKind::Cumulative);
        // A turn cancelled before the model answered: the totals do not move, or are all zero.
        assert_eq!(meter.turn_tokens(Some(&usage(0, 0))), None);
        assert_eq!(meter.turn_tokens(Some(&usage(1234, 56))), Some(1290));
        assert_eq!(meter.turn_tokens(Some(&usage(1234, 56))), None);
        assert_eq!(meter.turn_tokens(Some(&usage(0, 0))), None);
        assert_eq!(meter.turn_tokens(None), None);
        // A counter that restarted unseen: this report says nothing about the turn.
        assert_eq!(meter.turn_tokens(Some(&usage(500, 10))), None);
        assert_eq!(meter.turn_tokens(Some(&usage(1734, 66))), Some(1290));
    }

    #[test]
    fn a_session_reopened_on_a_new_process_counts_from_zero() {
        let mut meter = UsageMeter::new(UsageKind::Cumulative);
        assert_eq!(meter.turn_tokens(Some(&usage(6170, 280))), Some(6450));
        // The lane reopens its session on a fresh Hermes (counters at zero): a fresh meter.
        let mut meter = UsageMeter::new(UsageKind::Cumulative);
        assert_eq!(meter.turn_tokens(Some(&usage(1234, 56))), Some(1290));
    }

    #[test]
    fn other_agents_report_each_turn_on_its_own() {
        assert_eq!(UsageKind::of(None), UsageKind::PerTurn);
        let other = Implementation {
            name: "@agentclientprotocol/claude-agent-acp".into(),
            ..hermes()
        };
        let mut meter = UsageMeter::new(UsageKind::of(Some(&other)));
        assert_eq!(meter.turn_tokens(Some(&usage(40, 2))), Some(42));
        assert_eq!(meter.turn_tokens(Some(&usage(10, 2))), Some(12));
        let no_total = Usage {
            input_tokens: 7,
            output_tokens: 3,
            ..Usage::default()
        };
        assert_eq!(meter.turn_tokens(Some(&no_total)), Some(10));
    }

    #[test]
    fn context_share_is_of_the_latest_request_never_a_clamped_total() {
        // Hermes 0.19.0's `usage_update`s over a session: the estimate of the next request.
        assert_eq!(context_pct(65536, 8861), Some(14));
        assert_eq!(context_pct(65536, 10355), Some(16));
        assert_eq!(context_pct(65536, 65536), Some(100));
        // A running total past the window is not a share of it.
        assert_eq!(context_pct(65536, 65537), None);
        assert_eq!(context_pct(65536, 200_000), None);
        assert_eq!(context_pct(0, 10), None);
        assert_eq!(context_pct(1000, 0), Some(0));
    }
}
