//! The configured backends.

use super::{fcm, ntfy, webpush};
use crate::config::push::PushConfig;

/// The configured backends and settings; cheap to share.
pub(crate) struct Backends {
    pub(crate) config: PushConfig,
    pub(crate) fcm: Option<fcm::Fcm>,
    pub(crate) ntfy: Option<ntfy::Ntfy>,
    pub(crate) webpush: Option<webpush::WebPush>,
}
