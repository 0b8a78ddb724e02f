//! Device management: listing and revoking paired devices and open pairing codes, from the
//! command line.
//!
//! What revoking does is `crate::revoke`'s (a device's own `device.revoke` goes the same way).
//!
//! The command line works whether or not the gateway runs. A running gateway listens on a Unix
//! socket in its data dir (`admin.sock`, mode 0600, so only the user running the gateway can use
//! it; it is never reachable over the network or through a reverse proxy), and every request
//! carries the key the gateway wrote to `admin.key` in the data dir at its start: a confined
//! agent, which runs as the same user but cannot read the data dir, is refused. The CLI asks it first:
//! the gateway then revokes in its own store and disconnects the device at once. When nobody
//! answers on the socket, the CLI opens the store itself. The protocol on the socket is one JSON
//! line each way.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use iris_store::{DeviceAddress, DeviceRow, Store, StoreConfig, StoreError};

use crate::config::Config;
use crate::credentials;
pub use crate::revoke::{is_revoked, revoke_in, revoke_live, Revoked};
use crate::state::Shared;
use tokio_util::sync::CancellationToken;

/// The admin socket's file name in the data dir.
pub const ADMIN_SOCKET: &str = "admin.sock";

/// The file in the data dir holding the key every admin request carries (written fresh, mode
/// 0600, at each start). Being able to connect to the socket is not enough: a process of the
/// same user that cannot read the data dir (a confined agent) cannot use it.
pub const ADMIN_KEY: &str = "admin.key";

/// Longest request or answer line on the admin socket.
const MAX_LINE: u64 = 1024 * 1024;

/// A device as `devices list` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceSummary {
    /// The device's id.
    pub device_id: String,
    /// Its display name.
    pub name: String,
    /// When it last connected or disconnected, unix milliseconds.
    pub last_seen: i64,
    /// The address it last connected from.
    #[serde(default)]
    pub last_addr: Option<String>,
    /// Push backends it is registered with (`fcm`, `ntfy`, `webpush`).
    pub push: Vec<String>,
    /// How the last push through each backend ended (also one whose registration it cost).
    #[serde(default)]
    pub last_pushes: Vec<iris_protocol::PushOutcome>,
    /// Whether it is connected now (only known when the gateway runs).
    pub online: Option<bool>,
}

impl DeviceSummary {
    fn from_row(row: &DeviceRow, addr: Option<&DeviceAddress>, online: Option<bool>) -> Self {
        DeviceSummary {
            device_id: row.device_id.clone(),
            name: row.name.clone(),
            last_seen: row.last_seen,
            last_addr: addr.map(|a| a.addr.clone()),
            push: row.push_backends(),
            last_pushes: Vec::new(),
            online,
        }
    }
}

/// Errors of the device commands.
#[derive(Debug, thiserror::Error)]
pub enum DevicesError {
    /// The store failed.
    #[error("database: {0}")]
    Store(#[from] StoreError),
    /// The running gateway answered something unexpected.
    #[error("the running gateway answered: {0}")]
    Admin(String),
    /// The data dir holds no database: the gateway never ran there.
    #[error("no gateway data in {0} (start the gateway once, or pass --data-dir)")]
    NoData(PathBuf),
    /// Talking to the running gateway failed midway.
    #[error("admin socket: {0}")]
    Io(#[from] std::io::Error),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum AdminRequest {
    List,
    Revoke { device_id: String },
    PairList,
    PairRevoke { code: CodeSelector },
    Address,
}

/// Where a running gateway can be reached, as `pair` asks it (`listen` may ask for port 0, or
/// the command line of `pair` may not repeat the gateway's `--listen`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayAddress {
    /// The address it listens on, as bound.
    pub listen: std::net::SocketAddr,
    /// Its `public_url`, when set.
    #[serde(default)]
    pub public_url: Option<String>,
    /// The TLS it serves itself: `self_signed`, `files` or `acme`; `None` for plain HTTP.
    #[serde(default)]
    pub tls: Option<String>,
    /// The SHA-256 pin of its self-signed certificate.
    #[serde(default)]
    pub tls_pin: Option<String>,
}

impl GatewayAddress {
    /// Takes the running gateway's word for where and how it listens into `config`, the
    /// configuration of a command run beside it (`pair`, `doctor`): its address (unless the
    /// command was given `--listen`), its `public_url` and its TLS. Returns a note when the
    /// gateway serves TLS this configuration does not know (certificate files or ACME given
    /// only on its command line).
    pub fn adopt(self, config: &mut Config, listen_given: bool) -> Option<String> {
        if !listen_given {
            config.listen = self.listen;
        }
        if config.public_url.is_none() {
            config.public_url = self.public_url;
        }
        if config.tls_pin.is_none() {
            config.tls_pin = self.tls_pin;
        }
        match (self.tls.as_deref(), config.tls.is_some()) {
            (Some("self_signed"), false) => {
                config.tls = Some(crate::config::tls::TlsConfig::self_signed());
                None
            }
            (Some(kind), false) => Some(format!(
                "the running gateway serves TLS ({kind}) that this command's configuration does \
                 not name; put it in the configuration file both read"
            )),
            _ => None,
        }
    }
}

/// Which open pairing codes `pair revoke` deletes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CodeSelector {
    /// The code whose id (see [`credentials::code_id`]) this is.
    Id(String),
    /// Every open code.
    All,
}

/// A pairing code waiting to be used, as `pair list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeSummary {
    /// Its id: the start of its hash (the code itself is never stored).
    pub id: String,
    /// The device that made it (`None`: the owner's command line).
    pub created_by: Option<String>,
    /// When it was made, unix milliseconds.
    pub created_at: i64,
    /// When it expires, unix milliseconds.
    pub expires_at: i64,
}

/// A request with the key that proves its sender can read the data dir.
#[derive(Debug, Serialize, Deserialize)]
struct Keyed {
    #[serde(default)]
    key: String,
    #[serde(flatten)]
    request: AdminRequest,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct AdminResponse {
    ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    devices: Option<Vec<DeviceSummary>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    revoked: Option<Revoked>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    codes: Option<Vec<CodeSummary>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    removed: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    address: Option<GatewayAddress>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl AdminResponse {
    fn answer<T>(result: Result<T, StoreError>, set: impl FnOnce(&mut Self, T)) -> Self {
        let mut response = AdminResponse::default();
        match result {
            Ok(value) => {
                response.ok = true;
                set(&mut response, value);
            }
            Err(e) => response.error = Some(e.to_string()),
        }
        response
    }
}

/// Serves the admin socket until the gateway shuts down. A socket file left by a gateway that
/// died is replaced; failing to bind only disables the fast path of the CLI.
pub fn spawn_admin(shared: Arc<Shared>, shutdown: CancellationToken) {
    let path = shared.config.data_dir.join(ADMIN_SOCKET);
    let key_path = shared.config.data_dir.join(ADMIN_KEY);
    let bound = write_admin_key(&key_path).and_then(|key| Ok((key, bind_admin(&path)?)));
    let (key, listener) = match bound {
        Ok((key, l)) => (Arc::new(key), l),
        Err(e) => {
            tracing::warn!(error = %e, path = %path.display(), "admin socket unavailable; `devices revoke` will not disconnect live devices");
            return;
        }
    };
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((s, _)) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "admin socket accept failed");
                        continue;
                    }
                },
                _ = shutdown.cancelled() => break,
            };
            let (shared, key) = (shared.clone(), key.clone());
            tokio::spawn(async move {
                if let Err(e) = admin_session(&shared, &key, stream).await {
                    tracing::debug!(error = %e, "admin session failed");
                }
            });
        }
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(&key_path);
    });
}

/// A new random admin key, written to `path` (mode 0600, never through a link).
fn write_admin_key(path: &Path) -> std::io::Result<String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let key = hex::encode(rand::random::<[u8; 32]>());
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    file.write_all(key.as_bytes())?;
    Ok(key)
}

fn bind_admin(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

async fn admin_session(shared: &Shared, key: &str, stream: UnixStream) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    // One short request per connection; a bounded read keeps a stray client from holding memory.
    let n = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        BufReader::new(read.take(MAX_LINE)).read_line(&mut line),
    )
    .await
    .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no request"))??;
    let parsed = serde_json::from_str::<Keyed>(line.trim()).map(|keyed| {
        use subtle::ConstantTimeEq;
        let known: bool = keyed.key.as_bytes().ct_eq(key.as_bytes()).into();
        (known, keyed.request)
    });
    let response = match (n, parsed) {
        (0, _) => return Ok(()),
        (_, Err(e)) => AdminResponse {
            error: Some(format!("bad request: {e}")),
            ..AdminResponse::default()
        },
        (_, Ok((false, _))) => {
            tracing::warn!("admin request without the key refused");
            AdminResponse {
                error: Some(format!(
                    "not allowed: no key from {ADMIN_KEY} in the data dir"
                )),
                ..AdminResponse::default()
            }
        }
        (_, Ok((true, request))) => answer_admin(shared, request).await,
    };
    let mut out = serde_json::to_string(&response).unwrap_or_else(|_| "{\"ok\":false}".into());
    out.push('\n');
    write.write_all(out.as_bytes()).await?;
    write.shutdown().await
}

async fn answer_admin(shared: &Shared, request: AdminRequest) -> AdminResponse {
    match request {
        AdminRequest::List => {
            let devices = summaries(&shared.store, Some(shared)).await;
            AdminResponse::answer(devices, |r, d| r.devices = Some(d))
        }
        AdminRequest::Revoke { device_id } => {
            let revoked = revoke_live(shared, &device_id).await;
            AdminResponse::answer(revoked, |r, v| r.revoked = Some(v))
        }
        AdminRequest::PairList => {
            let codes = code_summaries(&shared.store).await;
            AdminResponse::answer(codes, |r, c| r.codes = Some(c))
        }
        AdminRequest::PairRevoke { code } => {
            let removed = revoke_codes_in(&shared.store, &code).await;
            AdminResponse::answer(removed, |r, n| r.removed = Some(n))
        }
        AdminRequest::Address => AdminResponse {
            ok: true,
            address: Some(GatewayAddress {
                listen: shared.config.listen,
                public_url: shared.config.public_url.clone(),
                tls: shared
                    .config
                    .tls
                    .as_ref()
                    .map(|t| t.source.kind().to_owned()),
                tls_pin: shared.config.tls_pin.clone(),
            }),
            ..AdminResponse::default()
        },
    }
}

/// Where the gateway running on `data_dir` listens; `None` when none answers there (or one too
/// old to say).
pub async fn running_address(data_dir: &Path) -> Option<GatewayAddress> {
    match ask_gateway(data_dir, &AdminRequest::Address).await {
        Ok(answer) => answer.and_then(|r| r.address),
        Err(e) => {
            tracing::debug!(error = %e, "no address from a running gateway");
            None
        }
    }
}

/// Asks a running gateway; `Ok(None)` when none answers on the data dir's admin socket.
async fn ask_gateway(
    data_dir: &Path,
    request: &AdminRequest,
) -> Result<Option<AdminResponse>, DevicesError> {
    let path = data_dir.join(ADMIN_SOCKET);
    let stream = match UnixStream::connect(&path).await {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e.into()),
    };
    // The key proves this process may read the data dir (see `ADMIN_KEY`).
    let key = std::fs::read_to_string(data_dir.join(ADMIN_KEY))?;
    let (read, mut write) = stream.into_split();
    let keyed = Keyed {
        key: key.trim().to_owned(),
        request: request.clone(),
    };
    let mut line = serde_json::to_string(&keyed).map_err(|e| DevicesError::Admin(e.to_string()))?;
    line.push('\n');
    write.write_all(line.as_bytes()).await?;
    let mut answer = String::new();
    BufReader::new(read.take(MAX_LINE))
        .read_line(&mut answer)
        .await?;
    let response: AdminResponse = serde_json::from_str(answer.trim())
        .map_err(|e| DevicesError::Admin(format!("{e}: {answer:?}")))?;
    if !response.ok {
        return Err(DevicesError::Admin(response.error.unwrap_or_default()));
    }
    Ok(Some(response))
}

fn open_store(data_dir: &Path) -> Result<Store, DevicesError> {
    let path: PathBuf = data_dir.join(crate::config::DB_FILE);
    if !path.exists() {
        return Err(DevicesError::NoData(data_dir.to_path_buf()));
    }
    Ok(Store::open(
        StoreConfig {
            path,
            group_commit: false,
            readers: 1,
        },
        Arc::new(|_| {}),
    )?)
}

/// Every registered device, from the running gateway (with `online`) or from the store.
pub async fn list(data_dir: &Path) -> Result<Vec<DeviceSummary>, DevicesError> {
    if let Some(r) = ask_gateway(data_dir, &AdminRequest::List).await? {
        return Ok(r.devices.unwrap_or_default());
    }
    let store = match open_store(data_dir) {
        Ok(s) => s,
        Err(DevicesError::NoData(_)) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let devices = summaries(&store, None).await;
    store.close();
    Ok(devices?)
}

/// Every device with its last address; `online` only when the running gateway answers.
async fn summaries(store: &Store, live: Option<&Shared>) -> Result<Vec<DeviceSummary>, StoreError> {
    // The push log first: an outcome is recorded after its effect (an expired registration
    // removed), so devices read after it show that effect.
    let log = store.push_log().await?;
    let rows = store.list_devices().await?;
    let addrs = store.device_addresses().await?;
    Ok(rows
        .iter()
        .map(|r| {
            let online = live.map(|s| s.hub.is_online(&r.device_id));
            let mut summary = DeviceSummary::from_row(r, addrs.get(&r.device_id), online);
            summary.last_pushes = log
                .iter()
                .filter(|e| e.device_id == r.device_id)
                .map(|e| iris_protocol::PushOutcome {
                    backend: e.backend.clone(),
                    result: e.result.clone(),
                    detail: e.detail.clone(),
                    at: e.at,
                    test: e.test,
                })
                .collect();
            summary
        })
        .collect())
}

/// The pairing codes waiting to be used.
async fn code_summaries(store: &Store) -> Result<Vec<CodeSummary>, StoreError> {
    let codes = store.open_codes(crate::ids::now_ms()).await?;
    Ok(codes
        .into_iter()
        .map(|c| CodeSummary {
            id: credentials::code_id(&c.code_hash).to_owned(),
            created_by: c.created_by,
            created_at: c.created_at,
            expires_at: c.expires_at,
        })
        .collect())
}

async fn revoke_codes_in(store: &Store, which: &CodeSelector) -> Result<usize, StoreError> {
    let prefix = match which {
        CodeSelector::All => String::new(),
        // An id is the start of a hash: lowercase hex, at least 8 digits.
        CodeSelector::Id(id) => {
            let id = id.trim().to_ascii_lowercase();
            if id.len() < 8 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Ok(0);
            }
            id
        }
    };
    store
        .write(move |tx| tx.delete_pairing_codes_by_prefix(&prefix))
        .await
}

/// The pairing codes waiting to be used, from the running gateway or from the store.
pub async fn list_codes(data_dir: &Path) -> Result<Vec<CodeSummary>, DevicesError> {
    if let Some(r) = ask_gateway(data_dir, &AdminRequest::PairList).await? {
        return Ok(r.codes.unwrap_or_default());
    }
    let store = match open_store(data_dir) {
        Ok(s) => s,
        Err(DevicesError::NoData(_)) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let codes = code_summaries(&store).await;
    store.close();
    Ok(codes?)
}

/// Deletes open pairing codes (one by its id, or all); returns how many went.
pub async fn revoke_codes(data_dir: &Path, which: CodeSelector) -> Result<usize, DevicesError> {
    let request = AdminRequest::PairRevoke {
        code: which.clone(),
    };
    if let Some(r) = ask_gateway(data_dir, &request).await? {
        return Ok(r.removed.unwrap_or(0));
    }
    let store = open_store(data_dir)?;
    let removed = revoke_codes_in(&store, &which).await;
    store.close();
    Ok(removed?)
}

/// Revokes a device through the running gateway, or in the store when none runs.
pub async fn revoke(data_dir: &Path, device_id: &str) -> Result<Revoked, DevicesError> {
    let request = AdminRequest::Revoke {
        device_id: device_id.to_owned(),
    };
    if let Some(r) = ask_gateway(data_dir, &request).await? {
        return r
            .revoked
            .ok_or_else(|| DevicesError::Admin("no revocation in the answer".into()));
    }
    let store = open_store(data_dir)?;
    let id = device_id.to_owned();
    let now = crate::ids::now_ms();
    let revoked = store.write(move |tx| revoke_in(tx, &id, now)).await;
    store.close();
    let (existed, also) = revoked?;
    Ok(Revoked {
        existed,
        also,
        disconnected: false,
        by_gateway: false,
    })
}
