//! Starting the system under test: the real gateway in this process (on a runtime of its own) or
//! as the built `iris-gateway` binary, plus the process helpers the scenarios share.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use iris_client::{Client, ConnectOptions};
use iris_gateway::agent::Agents;
use iris_gateway::state::Shared;
use iris_gateway::{Config, Gateway};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The token every benchmark gateway runs with.
pub const TOKEN: &str = "bench-token-0123456789";

/// Worker threads of every server runtime (the gateway's and the raw baseline's), so that both
/// run with the same parallelism as the `iris-gateway` binary on this 2-core machine.
pub const SERVER_WORKERS: usize = 2;

/// Raises this process's soft open-file limit to the hard limit: thousands of client sockets.
pub fn raise_nofile_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed by pointer.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 0;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return limit.rlim_max;
            }
        }
    }
    limit.rlim_cur
}

/// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
pub fn status_kib(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .strip_prefix(':')?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()
        })
        .ok_or_else(|| anyhow!("no {field} in /proc/{pid}/status"))
}

/// The release `iris-gateway` binary beside this one.
pub fn gateway_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let bin = exe
        .parent()
        .map(|d| d.join("iris-gateway"))
        .unwrap_or_default();
    if !bin.is_file() {
        bail!(
            "{} not found: build both binaries first (cargo build --release -p iris-gateway -p iris-bench)",
            bin.display()
        );
    }
    Ok(bin)
}

/// A gateway configuration for benchmarks: loopback port 0, the data dir, the built-in demo agent
/// (the release binary beside this one), and no send rate or connection cap to get in the way of
/// load (every simulated device connects from the loopback address).
pub fn config(data_dir: &Path) -> Config {
    let mut config = Config::for_tests(data_dir, TOKEN);
    // `for_tests` names the running program as the demo agent; here that is iris-bench.
    if let Ok(bin) = gateway_binary() {
        config.agent_command = Some(format!("'{}' demo-agent", bin.display()));
    }
    config.limits.sends_per_minute = 10_000_000;
    config.limits.max_connections_per_address = 1_000_000;
    config.limits.max_connections = 1_000_000;
    config
}

/// The `[limits]` of a gateway run as a process: no connection cap, as in [`config`].
const PROCESS_CONFIG: &str =
    "[limits]\nmax_connections_per_address = 1000000\nmax_connections = 1000000\n";

/// The real gateway running in this process on its own multi-threaded runtime, so that its
/// tasks never share a scheduler with the load generator's.
pub struct InProcess {
    /// `ws://127.0.0.1:<port>/ws`.
    pub url: String,
    /// The gateway's shared state (its counters are read after a run).
    pub shared: Arc<Shared>,
    /// The agent bridge (its start-up is awaited and timed).
    pub agents: Agents,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl InProcess {
    /// Binds and serves `config`; returns once the gateway accepts connections.
    pub fn start(config: Config) -> anyhow::Result<InProcess> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("gateway-runtime".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(SERVER_WORKERS)
                    .thread_name("gateway")
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(anyhow!("gateway runtime: {e}")));
                        return;
                    }
                };
                rt.block_on(async move {
                    let gateway = match Gateway::bind(config).await {
                        Ok(g) => g,
                        Err(e) => {
                            let _ = ready_tx.send(Err(anyhow!("gateway: {e}")));
                            return;
                        }
                    };
                    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
                    let url = format!("ws://{}/ws", gateway.addr);
                    let _ = ready_tx.send(Ok((url, gateway.shared(), gateway.agents(), stop_tx)));
                    if let Err(e) = gateway
                        .serve(async move {
                            let _ = stop_rx.await;
                        })
                        .await
                    {
                        eprintln!("gateway: {e}");
                    }
                });
            })?;
        let (url, shared, agents, stop) = ready_rx.recv().context("gateway thread died")??;
        Ok(InProcess {
            url,
            shared,
            agents,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Connection options for a device.
    pub fn options(&self, device: &str) -> ConnectOptions {
        ConnectOptions::new(self.url.clone(), TOKEN, device)
    }

    /// Shuts the gateway down gracefully and waits for its runtime to end.
    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

/// A typed device connected to `options`, its `status online` already taken.
pub async fn connect(options: ConnectOptions) -> anyhow::Result<Client> {
    let (mut client, _ack) = Client::connect(options).await?;
    let status = client.next_event().await?;
    if status.frame_type() != "status" {
        bail!("expected status after hello.ack, got {}", status.raw);
    }
    Ok(client)
}

/// A server running as a child process of this one: the gateway binary or the raw baseline.
pub struct ServerProcess {
    child: Child,
    /// Its process id, for `/proc/<pid>/status`.
    pub pid: u32,
    /// `ws://…` to connect to.
    pub url: String,
}

/// `iris-gateway serve` on a fresh loopback port with the tool's token, `agent` as its agent
/// command line, its data in `data_dir`, the settings of `config`, and `IRIS_LOG=log`.
pub fn serve_command(
    agent: &str,
    data_dir: &Path,
    config: &Path,
    log: &str,
) -> anyhow::Result<Command> {
    let mut cmd = Command::new(gateway_binary()?);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--token", TOKEN])
        .arg("--agent")
        .arg(agent)
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--config")
        .arg(config)
        .env("IRIS_LOG", log)
        .env("NO_COLOR", "1");
    Ok(cmd)
}

impl ServerProcess {
    /// `iris-gateway serve` on a fresh port with no agent, in `data_dir`.
    pub async fn gateway(data_dir: &Path) -> anyhow::Result<ServerProcess> {
        std::fs::create_dir_all(data_dir)?;
        let config = data_dir.join("bench.toml");
        std::fs::write(&config, PROCESS_CONFIG)?;
        let cmd = serve_command("none", data_dir, &config, "error")?;
        Self::spawn(cmd, "WebSocket: ").await
    }

    /// This binary's hidden `raw-server` subcommand: the raw WebSocket baseline as a process.
    pub async fn raw(small_buffers: bool) -> anyhow::Result<ServerProcess> {
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.arg("raw-server");
        if small_buffers {
            cmd.arg("--small-buffers");
        }
        Self::spawn(cmd, "listening ").await
    }

    async fn spawn(mut cmd: Command, marker: &str) -> anyhow::Result<ServerProcess> {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = cmd.spawn().context("spawn server process")?;
        let pid = child.id().ok_or_else(|| anyhow!("server exited at once"))?;
        let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let url = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await? {
                if let Some(url) = line.trim().strip_prefix(marker) {
                    return Ok(url.trim().to_owned());
                }
            }
            Err(anyhow!("server exited before printing its address"))
        })
        .await
        .context("server start timed out")??;
        // Keep draining stdout so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(ServerProcess { child, pid, url })
    }

    /// Resident memory of the server process, in KiB.
    pub fn rss_kib(&self) -> anyhow::Result<u64> {
        status_kib(self.pid, "VmRSS")
    }

    /// Asks the server to stop (SIGTERM) and waits; kills it after 20 s.
    pub async fn stop(mut self) {
        // SAFETY: signals the child this struct started and still owns (not yet reaped).
        unsafe {
            libc::kill(self.pid as libc::pid_t, libc::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.start_kill();
            let _ = self.child.wait().await;
        }
    }
}
