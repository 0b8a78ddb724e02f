//! The configured backends.

use iris_store::{DeviceRow, WebPushRow};

use super::outcome::Outcome;
use super::policy::PushContent;
use super::{fcm, ntfy, webpush};
use crate::config::push::PushConfig;

/// The configured backends and settings; cheap to share.
pub(crate) struct Backends {
    pub(crate) config: PushConfig,
    pub(crate) fcm: Option<fcm::Fcm>,
    pub(crate) ntfy: Option<ntfy::Ntfy>,
    pub(crate) webpush: Option<webpush::WebPush>,
}

/// Where a device's push goes.
#[derive(Clone)]
pub(crate) enum Route {
    Fcm(String),
    Ntfy(String),
    WebPush(WebPushRow),
}

impl Route {
    pub(crate) fn backend(&self) -> &'static str {
        match self {
            Route::Fcm(_) => "fcm",
            Route::Ntfy(_) => "ntfy",
            Route::WebPush(_) => "webpush",
        }
    }
}

impl Backends {
    /// The routes of a device's registrations with configured backends, in the order FCM,
    /// ntfy, Web Push.
    fn routes(&self, d: &DeviceRow) -> [Option<Route>; 3] {
        let fcm = d
            .fcm_token
            .as_deref()
            .filter(|t| !t.is_empty() && self.fcm.is_some());
        let ntfy = d
            .ntfy_topic
            .as_deref()
            .filter(|t| !t.is_empty() && self.ntfy.is_some());
        let webpush = d.webpush.as_ref().filter(|_| self.webpush.is_some());
        [
            fcm.map(|t| Route::Fcm(t.to_owned())),
            ntfy.map(|t| Route::Ntfy(t.to_owned())),
            webpush.map(|w| Route::WebPush(w.clone())),
        ]
    }

    /// The backends a device is registered with and this gateway has configured.
    pub(crate) fn registered(&self, d: &DeviceRow) -> Vec<String> {
        self.routes(d)
            .iter()
            .flatten()
            .map(|r| r.backend().to_owned())
            .collect()
    }

    /// The backend a device is reached through: the one its `hello` caps name when it has that
    /// registration, else FCM, else ntfy, else Web Push; `None` when no configured backend knows
    /// it.
    pub(crate) fn route(&self, d: &DeviceRow) -> Option<Route> {
        let wanted = iris_protocol::ClientCaps::from_stored(&d.caps).push;
        let mut routes = self.routes(d);
        let preferred = routes.iter().position(|r| {
            r.as_ref()
                .is_some_and(|r| wanted.as_deref() == Some(r.backend()))
        });
        match preferred {
            Some(i) => routes[i].take(),
            None => routes.into_iter().flatten().next(),
        }
    }

    /// Sends one push through `route`.
    pub(crate) async fn send(&self, route: &Route, content: &PushContent) -> Outcome {
        match (route, &self.fcm, &self.ntfy, &self.webpush) {
            (Route::Fcm(token), Some(fcm), _, _) => fcm.send(token, content).await,
            (Route::Ntfy(topic), _, Some(ntfy), _) => ntfy.send(topic, content).await,
            (Route::WebPush(sub), _, _, Some(webpush)) => webpush.send(sub, content).await,
            _ => Outcome::Rejected("backend not configured".into()),
        }
    }
}
