//! A lane's mailbox and queue: what the lane is asked to do ([`LaneCmd`]), the jobs waiting
//! behind a running one ([`LaneQueue`]) and each message's place in it ([`Slot`]), taken before
//! the message is stored and freed when its turn is done.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use iris_acp::ContentBlock;
use tokio::sync::oneshot;

use super::super::error::AgentError;
use crate::command::Command;
use crate::cron::CronRun;

/// A place in a lane's queue, taken before a message is stored and freed when its turn or
/// command is done (dropped).
#[derive(Debug)]
pub struct Slot {
    /// The lane's count, or none without an agent (nothing ever waits then).
    queued: Option<Arc<AtomicUsize>>,
    /// The lane held no other turn or command when this place was taken.
    first: bool,
}

impl Slot {
    /// Takes a place in the queue counted by `queued`, unless it holds `max` already.
    pub(crate) fn take(queued: &Arc<AtomicUsize>, max: usize) -> Option<Slot> {
        let before = queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()?;
        Some(Slot {
            queued: Some(queued.clone()),
            first: before == 0,
        })
    }

    /// The place of a lane without an agent.
    pub(crate) fn none() -> Slot {
        Slot {
            queued: None,
            first: false,
        }
    }

    /// Whether the lane held no other turn or command when this place was taken: the message
    /// runs next unless a scheduled job got there first.
    pub fn first(&self) -> bool {
        self.first
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(queued) = &self.queued {
            queued.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A user message for the agent.
#[derive(Debug)]
pub(crate) struct PromptJob {
    /// The text.
    pub text: String,
    /// Extra content blocks (attachments).
    pub blocks: Vec<ContentBlock>,
    /// Regenerate or edit: the user message whose checkpoint of the agent session the turn
    /// starts from (see `super::rewind`).
    pub rewind: Option<String>,
    /// Connection that sent it (gets the `read.receipt`), 0 for none.
    pub origin_conn: u64,
    /// The stored user message.
    pub message_id: String,
    /// Its place in the lane's queue (none for steering text run as a turn).
    pub slot: Option<Slot>,
    /// For a retry (`message.retry`): told whether the lane took it. A lane that is running a
    /// turn refuses a retry instead of queueing it.
    pub retry: Option<oneshot::Sender<Result<(), AgentError>>>,
    /// `agent.busy` was stored with the message (the lane was idle then). It stands for this
    /// turn only if the lane ran nothing else in between; otherwise the turn announces its own.
    pub busy_stored: bool,
}

impl PromptJob {
    /// A turn for steering text: its steering message was sent by no connection, so no read
    /// receipt.
    pub(crate) fn steering(text: String) -> PromptJob {
        PromptJob {
            text,
            blocks: Vec::new(),
            rewind: None,
            origin_conn: 0,
            message_id: String::new(),
            slot: None,
            retry: None,
            busy_stored: false,
        }
    }
}

/// A gateway command for the lane.
#[derive(Debug)]
pub(crate) struct CommandJob {
    /// The command with its arguments.
    pub command: Command,
    /// Connection that sent it.
    pub origin_conn: u64,
    /// The stored user message of the command.
    pub message_id: String,
    /// Its place in the lane's queue, held until the command is done.
    #[allow(dead_code)]
    pub slot: Option<Slot>,
}

/// What a lane is asked to do.
#[derive(Debug)]
pub(crate) enum LaneCmd {
    /// Run (or queue) a turn.
    Prompt(PromptJob),
    /// Run a gateway command.
    Command(CommandJob),
    /// Stop the running turn; answers whether one was running.
    Stop(oneshot::Sender<bool>),
    /// Redirect the running turn.
    Steer(String, oneshot::Sender<Result<(), AgentError>>),
    /// Answer a picker.
    Picker {
        /// The picker.
        picker_id: String,
        /// The chosen value.
        value: String,
        /// The device that answered.
        device: Option<String>,
        /// The result.
        reply: oneshot::Sender<Result<(), AgentError>>,
    },
    /// Run (or queue) a scheduled job.
    Cron(CronRun),
    /// Open (or restore) the lane's agent session ahead of its first turn; answers when done.
    Prepare(oneshot::Sender<()>),
    /// The lane's channel changed its agent: follow it (when idle; a busy lane follows before
    /// its next job). Answers when done.
    FollowAgent(oneshot::Sender<()>),
}

/// A job waiting in the lane's queue.
pub(crate) enum Job {
    Prompt(PromptJob),
    /// Steering text run as a turn of its own.
    Steer(Steering),
    Command(CommandJob),
    Cron(CronRun),
}

/// Steering text waiting to run as a turn.
pub(crate) struct Steering {
    pub text: String,
    /// Its steering message is stored already (the agent was given it inside the turn before).
    pub stored: bool,
}

/// The jobs waiting behind the running one, in order.
#[derive(Default)]
pub(crate) struct LaneQueue {
    jobs: VecDeque<Job>,
}

impl LaneQueue {
    /// Takes a prompt while the lane is idle: a retry is told it runs; `agent.busy` stored with
    /// the message stands only if nothing is queued before it (that ends with `agent.idle`).
    pub(crate) fn prompt_when_idle(&mut self, mut p: PromptJob) {
        if let Some(reply) = p.retry.take() {
            let _ = reply.send(Ok(()));
        }
        p.busy_stored &= self.jobs.is_empty();
        self.jobs.push_back(Job::Prompt(p));
    }

    /// Takes a prompt while a job runs: a retry is refused; the running job ends with
    /// `agent.idle`, so the prompt announces its own busy state.
    pub(crate) fn prompt_when_busy(&mut self, mut p: PromptJob) {
        if let Some(reply) = p.retry.take() {
            let _ = reply.send(Err(AgentError::RetryWhileBusy));
            return;
        }
        p.busy_stored = false;
        self.jobs.push_back(Job::Prompt(p));
    }

    /// Queues a job last.
    pub(crate) fn push(&mut self, job: Job) {
        self.jobs.push_back(job);
    }

    /// Queues steering text to run next.
    pub(crate) fn steer_next(&mut self, text: String, stored: bool) {
        self.jobs.push_front(Job::Steer(Steering { text, stored }));
    }

    /// The next job.
    pub(crate) fn pop(&mut self) -> Option<Job> {
        self.jobs.pop_front()
    }

    /// Whether no job waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// How many jobs wait.
    pub(crate) fn len(&self) -> usize {
        self.jobs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(text: &str, busy_stored: bool) -> PromptJob {
        PromptJob {
            busy_stored,
            ..PromptJob::steering(text.into())
        }
    }

    fn texts(q: &mut LaneQueue) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        while let Some(job) = q.pop() {
            out.push(match job {
                Job::Prompt(p) => (p.text, p.busy_stored),
                Job::Steer(s) => (format!("steer:{}", s.text), s.stored),
                Job::Command(_) | Job::Cron(_) => ("other".into(), false),
            });
        }
        out
    }

    #[test]
    fn a_stored_busy_state_stands_only_for_the_first_job() {
        let mut q = LaneQueue::default();
        q.prompt_when_idle(prompt("a", true));
        q.prompt_when_idle(prompt("b", true));
        q.prompt_when_busy(prompt("c", true));
        q.steer_next("now".into(), false);
        assert_eq!(q.len(), 4);
        assert_eq!(
            texts(&mut q),
            vec![
                ("steer:now".into(), false),
                ("a".into(), true),
                ("b".into(), false),
                ("c".into(), false)
            ]
        );
    }

    #[test]
    fn a_retry_runs_when_idle_and_is_refused_while_busy() {
        let mut q = LaneQueue::default();
        let (tx, mut rx) = oneshot::channel();
        q.prompt_when_idle(PromptJob {
            retry: Some(tx),
            ..prompt("a", false)
        });
        assert!(matches!(rx.try_recv(), Ok(Ok(()))));
        let (tx, mut rx) = oneshot::channel();
        q.prompt_when_busy(PromptJob {
            retry: Some(tx),
            ..prompt("b", false)
        });
        assert!(matches!(rx.try_recv(), Ok(Err(AgentError::RetryWhileBusy))));
        assert_eq!(q.len(), 1, "the refused retry is not queued");
    }

    #[test]
    fn a_slot_counts_its_place_until_dropped() {
        let queued = Arc::new(AtomicUsize::new(0));
        let a = Slot::take(&queued, 2).expect("room");
        assert!(a.first());
        let b = Slot::take(&queued, 2).expect("room");
        assert!(!b.first());
        assert!(Slot::take(&queued, 2).is_none(), "full");
        drop(a);
        assert!(Slot::take(&queued, 2).is_some());
        drop(b);
    }
}
