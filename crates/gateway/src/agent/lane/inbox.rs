//! What arrives at a lane besides the agent's events: its mailbox, the signal that ends it, and
//! the agent epoch it follows. The idle loop and a running turn read it alike.

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::queue::LaneCmd;

/// A lane's mailbox, its end and its agent epoch.
pub(crate) struct Inbox {
    pub(super) rx: mpsc::Receiver<LaneCmd>,
    /// Cancelled when the lane is deleted or the gateway stops: end the running turn and exit.
    pub(super) close: CancellationToken,
    /// The lane is ending (closed, or its mailbox ended).
    pub(super) closing: bool,
    pub(super) epoch: watch::Receiver<u64>,
}

impl Inbox {
    pub(crate) fn new(
        rx: mpsc::Receiver<LaneCmd>,
        close: CancellationToken,
        epoch: watch::Receiver<u64>,
    ) -> Inbox {
        Inbox {
            rx,
            close,
            closing: false,
            epoch,
        }
    }

    pub(super) fn ending(&self) -> bool {
        self.closing || self.close.is_cancelled()
    }

    pub(super) fn epoch(&self) -> u64 {
        *self.epoch.borrow()
    }
}
