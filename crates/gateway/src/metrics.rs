//! Operational counters, served at `GET /metrics` in the Prometheus text format.
//!
//! Only counts and durations: no ids, names, tokens or message text.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds (seconds) of the turn latency histogram's buckets.
const TURN_BUCKETS: [f64; 11] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

#[derive(Debug, Default)]
struct Histogram {
    counts: [u64; TURN_BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// The gateway's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    /// `sync` requests answered.
    pub sync_replays: AtomicU64,
    /// `sync` requests that started below the retention floor.
    pub sync_gaps: AtomicU64,
    /// Frames replayed by `sync`.
    pub frames_replayed: AtomicU64,
    /// Ephemeral frames replaced by a newer one before they were written.
    pub frames_coalesced: AtomicU64,
    /// Connections dropped for falling too far behind.
    pub slow_disconnects: AtomicU64,
    /// Pushes delivered to a push service.
    pub push_sent: AtomicU64,
    /// Pushes that failed for good.
    pub push_failed: AtomicU64,
    /// Connections closed at once for being over a connection cap.
    pub connections_refused: AtomicU64,
    /// Connections closed for not finishing their request headers in time.
    pub header_timeouts: AtomicU64,
    turns: Mutex<Histogram>,
}

/// Gauges read at scrape time.
#[derive(Debug, Clone)]
pub struct Gauges {
    /// Live connections.
    pub connections: usize,
    /// Highest outbox cursor.
    pub outbox_head: u64,
    /// Each agent, reported with the label `agent`.
    pub agents: Vec<AgentGauge>,
}

/// What `/metrics` says of one agent.
#[derive(Debug, Clone)]
pub struct AgentGauge {
    /// Its name (the label `agent`).
    pub name: String,
    /// Its processes started after the first.
    pub restarts: u64,
    /// How long its last start took (spawn to `initialize` answered), once it started.
    pub start: Option<Duration>,
    /// Whether a process of it runs now.
    pub running: bool,
}

impl Metrics {
    /// Adds one to a counter.
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a finished turn's wall-clock duration.
    pub fn observe_turn(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let mut h = self.turns.lock().expect("histogram lock");
        for (i, bound) in TURN_BUCKETS.iter().enumerate() {
            if secs <= *bound {
                h.counts[i] += 1;
            }
        }
        h.count += 1;
        h.sum += secs;
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self, g: Gauges) -> String {
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        };
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed).to_string();
        metric(
            "iris_connected_devices",
            "gauge",
            "Devices with a live connection.",
            g.connections.to_string(),
        );
        metric(
            "iris_outbox_head",
            "gauge",
            "Highest cursor in the outbox.",
            g.outbox_head.to_string(),
        );
        metric(
            "iris_sync_replays_total",
            "counter",
            "Sync requests answered.",
            load(&self.sync_replays),
        );
        metric(
            "iris_sync_gaps_total",
            "counter",
            "Syncs that started below the retention floor.",
            load(&self.sync_gaps),
        );
        metric(
            "iris_frames_replayed_total",
            "counter",
            "Frames replayed by sync.",
            load(&self.frames_replayed),
        );
        metric(
            "iris_frames_coalesced_total",
            "counter",
            "Ephemeral frames replaced before they were written.",
            load(&self.frames_coalesced),
        );
        metric(
            "iris_slow_device_disconnects_total",
            "counter",
            "Connections dropped for falling too far behind.",
            load(&self.slow_disconnects),
        );
        metric(
            "iris_connections_refused_total",
            "counter",
            "Connections closed at once for being over a connection cap.",
            load(&self.connections_refused),
        );
        metric(
            "iris_header_timeouts_total",
            "counter",
            "Connections closed for not finishing their request headers in time.",
            load(&self.header_timeouts),
        );
        render_agents(&mut out, &g.agents);
        let mut metric = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        };
        metric(
            "iris_push_sent_total",
            "counter",
            "Pushes delivered to a push service.",
            load(&self.push_sent),
        );
        metric(
            "iris_push_failed_total",
            "counter",
            "Pushes that failed for good.",
            load(&self.push_failed),
        );
        let h = self.turns.lock().expect("histogram lock");
        let name = "iris_turn_latency_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Wall-clock duration of agent turns.\n# TYPE {name} histogram"
        );
        for (i, bound) in TURN_BUCKETS.iter().enumerate() {
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {}", h.counts[i]);
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{le=\"+Inf\"}} {}\n{name}_sum {}\n{name}_count {}",
            h.count, h.sum, h.count
        );
        out
    }
}

/// The per-agent metrics, one line per agent labelled `agent`.
fn render_agents(out: &mut String, agents: &[AgentGauge]) {
    let mut family =
        |name: &str, kind: &str, help: &str, value: &dyn Fn(&AgentGauge) -> Option<String>| {
            let lines: Vec<String> = agents
                .iter()
                .filter_map(|a| value(a).map(|v| format!("{name}{{agent=\"{}\"}} {v}", a.name)))
                .collect();
            if lines.is_empty() {
                return;
            }
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for l in lines {
                let _ = writeln!(out, "{l}");
            }
        };
    family(
        "iris_agent_restarts_total",
        "counter",
        "Agent processes started after the first, per agent.",
        &|a| Some(a.restarts.to_string()),
    );
    family(
        "iris_agent_up",
        "gauge",
        "Whether a process of the agent runs (1) or not (0).",
        &|a| Some(u8::from(a.running).to_string()),
    );
    family(
        "iris_agent_start_seconds",
        "gauge",
        "How long the agent's last start took, from spawn to its initialize answer.",
        &|a| a.start.map(|s| format!("{:.3}", s.as_secs_f64())),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_histogram_is_cumulative() {
        let m = Metrics::default();
        m.observe_turn(Duration::from_millis(300));
        m.observe_turn(Duration::from_secs(7));
        let text = m.render(Gauges {
            connections: 2,
            outbox_head: 9,
            agents: vec![AgentGauge {
                name: "demo".into(),
                restarts: 1,
                start: Some(Duration::from_millis(1500)),
                running: true,
            }],
        });
        assert!(text.contains("iris_agent_start_seconds{agent=\"demo\"} 1.500"));
        assert!(text.contains("iris_agent_restarts_total{agent=\"demo\"} 1"));
        assert!(text.contains("iris_agent_up{agent=\"demo\"} 1"));
        assert!(text.contains("iris_turn_latency_seconds_bucket{le=\"0.25\"} 0"));
        assert!(text.contains("iris_turn_latency_seconds_bucket{le=\"0.5\"} 1"));
        assert!(text.contains("iris_turn_latency_seconds_bucket{le=\"10\"} 2"));
        assert!(text.contains("iris_turn_latency_seconds_count 2"));
        assert!(text.contains("iris_connected_devices 2"));
    }
}
