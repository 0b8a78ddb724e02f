//! What every connection needs: the configuration, the store, the hub, the counters and the
//! action tokens of pushed pickers.
//!
//! Everything else (the agent bridge, media, the scheduler, the door guard) is handed by
//! [`crate::server`] to whoever needs it.
//!
//! Ground floor: imports nothing of the gateway above it.

use std::sync::Arc;

use iris_store::Store;

use crate::actions::ActionTokens;
use crate::config::Config;
use crate::hub::Hub;
use crate::metrics::Metrics;

/// The state every connection shares, behind an `Arc`.
pub struct Shared {
    /// The resolved configuration.
    pub config: Config,
    /// The durable store.
    pub store: Store,
    /// Live connections.
    pub hub: Arc<Hub>,
    /// Operational counters.
    pub metrics: Arc<Metrics>,
    /// The action tokens pushes carry, for answering a picker from a notification.
    pub actions: ActionTokens,
}

impl Shared {
    /// Assembles the shared state; the counters are the hub's.
    pub fn new(config: Config, store: Store, hub: Arc<Hub>) -> Arc<Shared> {
        Arc::new(Shared {
            metrics: hub.metrics.clone(),
            config,
            store,
            hub,
            actions: ActionTokens::default(),
        })
    }
}
