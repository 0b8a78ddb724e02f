//! A secret setting (the token): usable where it is needed, never printed by `Debug`.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

/// A secret string. `Debug` shows `Secret(<redacted>)`, so a logged or printed configuration
/// never carries the token; [`Secret::expose`] is the one way to read it.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// The secret itself, for the places that must compare or show it on purpose.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Secret {
        Secret(s)
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Secret {
        Secret(s.to_owned())
    }
}

impl FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Secret, Self::Err> {
        Ok(Secret(s.to_owned()))
    }
}
