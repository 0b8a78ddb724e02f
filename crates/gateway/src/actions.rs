//! Action tokens: answering a picker from a notification's button, without a connection.
//!
//! When a push tells a device of an approval or a question with a few short choices, the push
//! worker mints one token for that device and that picker, bound to its choice set, and the push
//! carries it with the choices. The service worker (or the app) sends it back with the chosen
//! value to `POST /v1/actions` (`crate::action_route`). A token allows exactly one thing: answering
//! that picker, once, with one of those values, as that device, while the picker is open and
//! the device is not revoked, within [`TOKEN_TTL`]. The first answer wins; a used, unknown,
//! expired or closed token is refused and changes nothing.
//!
//! A token is `iat_<id>.<secret>` (16 and 32 random bytes, hex). Only the SHA-256 of the secret is
//! kept, compared in constant time; the id finds the grant. Tokens live in memory, as the
//! pickers they answer do: a restart closes those pickers anyway. At most [`MAX_GRANTS`] are
//! held, the oldest forgotten first.
//!
//! Ground floor: imports nothing of the gateway above it.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// How long a token stays valid at most (a picker usually closes much sooner: approvals expire
/// after `agent.approval_timeout_secs`).
pub const TOKEN_TTL: Duration = Duration::from_secs(15 * 60);
/// Most tokens held at once.
pub const MAX_GRANTS: usize = 1024;
/// The prefix of every action token.
const PREFIX: &str = "iat_";

/// What a token allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The device it was given to: the answer is that device's.
    pub device_id: String,
    /// The picker it answers.
    pub picker_id: String,
    /// The values it may answer with.
    pub values: Vec<String>,
}

/// Why a token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not a token this gateway holds: never issued, already used, expired or forgotten.
    Unknown,
    /// A valid token, but the value is not one of its picker's choices (the token stays valid).
    Choice,
}

struct Held {
    grant: Grant,
    secret_hash: [u8; 32],
    expires: Instant,
}

/// The tokens given out and not yet used.
#[derive(Default)]
pub struct ActionTokens {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    held: HashMap<String, Held>,
    /// Ids in the order they were minted, for forgetting the oldest.
    order: VecDeque<String>,
}

impl ActionTokens {
    /// A new token for `grant`, valid until `now + TOKEN_TTL`.
    pub fn mint(&self, grant: Grant, now: Instant) -> String {
        let id = hex::encode(rand::random::<[u8; 16]>());
        let secret = hex::encode(rand::random::<[u8; 32]>());
        let held = Held {
            grant,
            secret_hash: Sha256::digest(secret.as_bytes()).into(),
            expires: now + TOKEN_TTL,
        };
        let mut inner = self.inner.lock().expect("action tokens");
        inner.held.insert(id.clone(), held);
        inner.order.push_back(id.clone());
        while inner.held.len() > MAX_GRANTS || inner.order.len() > 2 * MAX_GRANTS {
            let Some(old) = inner.order.pop_front() else {
                break;
            };
            inner.held.remove(&old);
        }
        format!("{PREFIX}{id}.{secret}")
    }

    /// Spends `token` to answer with `value`: its grant, once. A value outside the choices is
    /// refused and leaves the token valid; anything else unknown is [`Refusal::Unknown`].
    pub fn redeem(&self, token: &str, value: &str, now: Instant) -> Result<Grant, Refusal> {
        let (id, secret) = token
            .strip_prefix(PREFIX)
            .and_then(|t| t.split_once('.'))
            .ok_or(Refusal::Unknown)?;
        let mut inner = self.inner.lock().expect("action tokens");
        let held = inner.held.get(id).ok_or(Refusal::Unknown)?;
        let presented: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
        if !bool::from(presented.ct_eq(&held.secret_hash)) {
            return Err(Refusal::Unknown);
        }
        if now >= held.expires {
            inner.held.remove(id);
            return Err(Refusal::Unknown);
        }
        if !held.grant.values.iter().any(|v| v == value) {
            return Err(Refusal::Choice);
        }
        let held = inner.held.remove(id).ok_or(Refusal::Unknown)?;
        Ok(held.grant)
    }

    /// Forgets every token of a device (revoked).
    pub fn forget_device(&self, device_id: &str) {
        let mut inner = self.inner.lock().expect("action tokens");
        inner.held.retain(|_, h| h.grant.device_id != device_id);
    }

    /// How many tokens are held.
    pub fn len(&self) -> usize {
        self.inner.lock().expect("action tokens").held.len()
    }

    /// Whether no token is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(picker: &str) -> Grant {
        Grant {
            device_id: "phone".into(),
            picker_id: picker.into(),
            values: vec!["allow_once".into(), "reject_once".into()],
        }
    }

    #[test]
    fn a_token_answers_its_picker_once_with_one_of_its_choices() {
        let tokens = ActionTokens::default();
        let now = Instant::now();
        let token = tokens.mint(grant("p1"), now);
        assert_eq!(
            tokens.redeem(&token, "allow_always", now),
            Err(Refusal::Choice)
        );
        assert_eq!(tokens.redeem(&token, "allow_once", now), Ok(grant("p1")));
        assert_eq!(
            tokens.redeem(&token, "allow_once", now),
            Err(Refusal::Unknown)
        );
        assert!(tokens.is_empty());
    }

    #[test]
    fn a_forged_expired_or_foreign_token_is_unknown() {
        let tokens = ActionTokens::default();
        let now = Instant::now();
        let token = tokens.mint(grant("p1"), now);
        let (id, secret) = token.split_once('.').unwrap();
        let mut flipped = secret.to_owned().into_bytes();
        flipped[0] = if flipped[0] == b'0' { b'1' } else { b'0' };
        let forged = format!("{id}.{}", String::from_utf8(flipped).unwrap());
        for bad in [forged.as_str(), "iat_", "iat_x.y", "", id, "idt_abc.def"] {
            assert_eq!(
                tokens.redeem(bad, "allow_once", now),
                Err(Refusal::Unknown),
                "{bad}"
            );
        }
        // The forged attempts left the real one valid, until it expires.
        let late = now + TOKEN_TTL;
        assert_eq!(
            tokens.redeem(&token, "allow_once", late),
            Err(Refusal::Unknown)
        );
        assert_eq!(
            tokens.redeem(&token, "allow_once", now),
            Err(Refusal::Unknown)
        );
    }

    #[test]
    fn a_revoked_devices_tokens_are_forgotten_and_the_store_is_bounded() {
        let tokens = ActionTokens::default();
        let now = Instant::now();
        let token = tokens.mint(grant("p1"), now);
        tokens.forget_device("phone");
        assert_eq!(
            tokens.redeem(&token, "allow_once", now),
            Err(Refusal::Unknown)
        );
        let first = tokens.mint(grant("first"), now);
        for i in 0..MAX_GRANTS {
            tokens.mint(grant(&format!("p{i}")), now);
        }
        assert_eq!(tokens.len(), MAX_GRANTS);
        assert_eq!(
            tokens.redeem(&first, "allow_once", now),
            Err(Refusal::Unknown)
        );
    }
}
