//! Push across a crash: the real binary, killed with SIGKILL while a push is pending, pushes what
//! was pending once after its restart (against the fake backends of `common/fake_push.rs`).

mod common;

use std::path::Path;
use std::time::Duration;

use common::fake_push::*;
use common::{binary, TOKEN};
use iris_client::{Client, ConnectOptions};
use serde_json::Value;

/// The real binary, killed with SIGKILL while a push is pending (one device's push failing and
/// being retried, another's frame still in its coalescing window), then started again on the same
/// data dir: each device gets exactly one push with the latest cursor.
#[tokio::test]
async fn a_push_pending_at_a_crash_is_sent_once_after_the_restart() {
    let fake = FakeBackends::start().await;
    fake.with(|b| b.fcm_down = Some(503));
    let dir = tempfile::tempdir().expect("tempdir");
    let account = fake.service_account(dir.path());
    let config = dir.path().join("iris.toml");
    let toml = format!(
        "listen = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n\n[agent]\ncommand = \"demo\"\n\n\
         [push]\ncoalesce_ms = 1500\nretry_initial_ms = 300\nretry_max_secs = 1\n\n\
         [push.fcm]\nservice_account = {account:?}\nproject_id = \"{PROJECT}\"\n\
         token_url = \"{}\"\nbase_url = \"{}\"\n",
        fake.token_url(),
        fake.url()
    );
    std::fs::write(&config, toml).expect("write config");
    let data = dir.path().join("data");

    let mut first = Process::start(&config, &data).await;
    let phone = first.device("phone", "fcm-phone");
    first.pair_and_leave(phone.clone()).await;
    let (mut laptop, _) = Client::connect(first.device("laptop", ""))
        .await
        .expect("laptop");
    laptop.next_event().await.expect("status");
    let c1 = cursor(&ask(&mut laptop, "first").await);
    // The phone's push is being tried (and refused) when the second device pairs.
    fake.until("a refused attempt", |b| {
        b.fcm.iter().any(|r| r.fcm_token() == "fcm-phone")
    })
    .await;
    let tablet = first.device("tablet", "fcm-tablet");
    first.pair_and_leave(tablet.clone()).await;
    let c2 = cursor(&ask(&mut laptop, "second").await);
    assert!(c2 > c1);
    first.kill().await;
    drop(laptop);
    assert!(
        fake.with(|b| b.fcm.iter().all(|r| !r.delivered())),
        "nothing got through before the crash"
    );

    fake.with(|b| b.fcm_down = None);
    let second = Process::start(&config, &data).await;
    let delivered_to = |b: &Backend, token: &str| -> Vec<String> {
        b.fcm
            .iter()
            .filter(|r| r.delivered() && r.fcm_token() == token)
            .map(|r| r.data("cursor"))
            .collect()
    };
    fake.until("both pushes", |b| {
        !delivered_to(b, "fcm-phone").is_empty() && !delivered_to(b, "fcm-tablet").is_empty()
    })
    .await;
    // Both devices are back; nothing else is pushed to them.
    let (_phone, phone_ack) = Client::connect(second.rebase(phone)).await.expect("phone");
    let (_tablet, tablet_ack) = Client::connect(second.rebase(tablet))
        .await
        .expect("tablet");
    tokio::time::sleep(Duration::from_millis(500)).await;
    fake.with(|b| {
        assert_eq!(
            delivered_to(b, "fcm-phone"),
            [c2.to_string()],
            "the phone is woken once, for everything"
        );
        assert_eq!(
            delivered_to(b, "fcm-tablet"),
            [c2.to_string()],
            "the tablet is woken once"
        );
    });
    assert_eq!(
        (phone_ack.last_pushed_cursor, tablet_ack.last_pushed_cursor),
        (c2, c2)
    );
    second.terminate().await;
}

/// `iris-gateway serve` as a child process.
struct Process {
    child: tokio::process::Child,
    url: String,
    health: String,
}

impl Process {
    async fn start(config: &Path, data: &Path) -> Process {
        let config = config.to_str().expect("utf-8 path");
        let data = data.to_str().expect("utf-8 path");
        let mut cmd = binary::serve(&["--config", config, "--data-dir", data]);
        // The configuration says the agent; the refused attempts are expected, only errors would
        // be worth reading.
        cmd.env_remove("IRIS_AGENT").env("IRIS_LOG", "error");
        let binary::Running { child, url, .. } = binary::Running::start(cmd).await;
        let health = url.replace("ws://", "http://").replace("/ws", "/healthz");
        Process { child, url, health }
    }

    fn device(&self, id: &str, fcm: &str) -> ConnectOptions {
        let mut opts = ConnectOptions::new(self.url.clone(), TOKEN, id);
        opts.fcm_token = Some(fcm.to_owned()).filter(|t| !t.is_empty());
        opts
    }

    /// The same device options, pointed at this process.
    fn rebase(&self, mut opts: ConnectOptions) -> ConnectOptions {
        opts.url = self.url.clone();
        opts
    }

    async fn connections(&self) -> u64 {
        let health: Value = reqwest::get(&self.health)
            .await
            .expect("healthz")
            .json()
            .await
            .expect("json");
        health["connections"].as_u64().expect("connections")
    }

    /// Pairs a device and disconnects it; returns once the gateway counts one connection fewer.
    async fn pair_and_leave(&self, opts: ConnectOptions) {
        let before = self.connections().await;
        let (client, _) = Client::connect(opts).await.expect("connect");
        client.close().await.expect("close");
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while self.connections().await > before {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the gateway still counts the device"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn kill(&mut self) {
        self.child.start_kill().expect("SIGKILL");
        tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("dies in time")
            .expect("wait");
    }

    async fn terminate(mut self) {
        let pid = self.child.id().expect("pid") as i32;
        // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let status = tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("exits in time")
            .expect("wait");
        assert!(status.success(), "clean exit after SIGTERM: {status:?}");
    }
}
