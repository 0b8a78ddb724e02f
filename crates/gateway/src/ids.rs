//! Opaque ids that sort by creation time: `<prefix><millis, 11 hex><sequence, 5 hex><random, 4 hex>`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static LAST: AtomicU64 = AtomicU64::new(0);

/// Unix time in milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A new id with the given prefix (`m_`, `c_`, `t_`, `p_`, …). Ids from one process are strictly
/// increasing even when the clock stalls or steps back; the random tail keeps ids from two
/// processes apart.
pub fn new_id(prefix: &str) -> String {
    // The high bits hold milliseconds, the low 20 bits a sequence within the millisecond.
    let now = (now_ms().max(0) as u64) << 20;
    let mut prev = LAST.load(Ordering::Relaxed);
    let next = loop {
        let candidate = now.max(prev + 1);
        match LAST.compare_exchange_weak(prev, candidate, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break candidate,
            Err(actual) => prev = actual,
        }
    };
    let tail: u16 = rand::random();
    format!(
        "{prefix}{:011x}{:05x}{tail:04x}",
        next >> 20,
        next & 0xf_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_sorted() {
        let ids: Vec<String> = (0..10_000).map(|_| new_id("m_")).collect();
        for pair in ids.windows(2) {
            assert!(pair[0][..18] < pair[1][..18], "{} !< {}", pair[0], pair[1]);
        }
    }
}
