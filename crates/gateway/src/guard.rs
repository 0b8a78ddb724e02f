//! The door guard: the token devices present, the throttle of failed `hello`s per address, and
//! each device's send budget.
//!
//! Ground floor: imports nothing of the gateway above it.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;

use crate::config::{Limits, Secret};

/// Checks credentials and budgets for every connection.
pub struct Guard {
    token: Secret,
    limits: Limits,
    /// Failed `hello`s per address.
    auth_failures: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
    /// Send budget per device.
    send_buckets: Mutex<HashMap<String, TokenBucket>>,
}

impl Guard {
    /// A guard for this token and these limits.
    pub fn new(token: Secret, limits: Limits) -> Guard {
        Guard {
            token,
            limits,
            auth_failures: Mutex::default(),
            send_buckets: Mutex::default(),
        }
    }

    /// The token devices authenticate with.
    pub fn token(&self) -> &Secret {
        &self.token
    }

    /// Whether `presented` is the token, compared in constant time.
    pub fn token_matches(&self, presented: &str) -> bool {
        presented
            .as_bytes()
            .ct_eq(self.token.expose().as_bytes())
            .into()
    }

    /// Whether this address has failed `hello` too often in the last minute.
    pub fn auth_blocked(&self, addr: IpAddr) -> bool {
        let mut map = self.auth_failures.lock().expect("auth lock");
        let Some(times) = map.get_mut(&addr) else {
            return false;
        };
        let window = Instant::now() - Duration::from_secs(60);
        while times.front().is_some_and(|t| *t < window) {
            times.pop_front();
        }
        times.len() >= self.limits.auth_failures_per_minute as usize
    }

    /// Records a failed `hello` from this address.
    pub fn record_auth_failure(&self, addr: IpAddr) {
        let mut map = self.auth_failures.lock().expect("auth lock");
        if map.len() > 10_000 {
            // Bound the table: old entries of other addresses go first.
            let window = Instant::now() - Duration::from_secs(60);
            map.retain(|_, times| times.back().is_some_and(|t| *t >= window));
        }
        map.entry(addr).or_default().push_back(Instant::now());
    }

    /// Takes one send from the device's budget; false when it is exhausted.
    pub fn take_send(&self, device_id: &str) -> bool {
        let per_minute = self.limits.sends_per_minute;
        let mut map = self.send_buckets.lock().expect("bucket lock");
        map.entry(device_id.to_owned())
            .or_insert_with(|| TokenBucket::new(per_minute))
            .take()
    }
}

/// A token bucket: `capacity` sends at once, refilled at `per_minute`.
#[derive(Debug)]
pub struct TokenBucket {
    tokens: f64,
    capacity: f64,
    per_sec: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket allowing `per_minute` sends a minute, in bursts of up to a quarter of that.
    pub fn new(per_minute: u32) -> Self {
        let capacity = f64::from(per_minute.max(4)) / 4.0;
        TokenBucket {
            tokens: capacity,
            capacity,
            per_sec: f64::from(per_minute) / 60.0,
            last: Instant::now(),
        }
    }

    fn take(&mut self) -> bool {
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.last).as_secs_f64() * self.per_sec)
            .min(self.capacity);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}
