//! The file browser against the gateway's own files reached by another name: hard links to the
//! store, the Web Push key, the admin key and the token file made inside the agent's directory,
//! the configuration file kept there, and the credential files other tools keep (Claude Code's
//! `.credentials.json`, Codex's `auth.json`, `.netrc`, `credentials`), all refused and left out
//! of listings, while an ordinary file beside them is served.

mod common;

use common::*;
use iris_client::{Client, ClientError};
use iris_protocol::{ClientFrame, ErrorCode, FilesList, FilesPull, FilesRead, Header, ServerFrame};

async fn call(c: &mut Client, frame: ClientFrame) -> Result<ServerFrame, (ErrorCode, String)> {
    match c.request(Header::default(), frame).await {
        Ok(event) => Ok(event.body),
        Err(ClientError::Server { code, message, .. }) => Err((code, message)),
        Err(e) => panic!("request failed: {e}"),
    }
}

async fn read(c: &mut Client, path: &str) -> Result<String, (ErrorCode, String)> {
    let frame = ClientFrame::FilesRead(FilesRead {
        agent: None,
        path: path.into(),
        offset: 0,
    });
    match call(c, frame).await? {
        ServerFrame::FilesRead(r) => Ok(r.text.unwrap_or_default()),
        other => panic!("expected files.read, got {other:?}"),
    }
}

async fn pull(c: &mut Client, path: &str) -> Result<(), (ErrorCode, String)> {
    let frame = ClientFrame::FilesPull(FilesPull {
        agent: None,
        path: path.into(),
    });
    call(c, frame).await.map(|_| ())
}

async fn names(c: &mut Client) -> Vec<String> {
    let frame = ClientFrame::FilesList(FilesList {
        agent: None,
        path: String::new(),
    });
    match call(c, frame).await {
        Ok(ServerFrame::FilesList(l)) => l.entries.into_iter().map(|e| e.name).collect(),
        other => panic!("expected files.list, got {other:?}"),
    }
}

#[tokio::test]
async fn hard_links_to_the_gateways_files_and_its_config_are_never_served() {
    let root = tempfile::tempdir().expect("tmp");
    let (data, work) = (root.path().join("data"), root.path().join("work"));
    std::fs::create_dir_all(&work).expect("work");
    let config_file = work.join("gateway.toml");
    std::fs::write(&config_file, "token = \"in-the-config-0123456789\"\n").expect("config");
    let (w, cf) = (work.clone(), config_file.clone());
    let gw = TestGateway::start_in(&data, move |c| {
        c.agent_command = Some("demo".into());
        c.agent_cwd = Some(w);
        c.secrets.config_file = Some(cf);
    })
    .await;
    let (mut phone, _) = gw.connect("phone").await;
    // What the gateway keeps in its data dir by now, linked into the agent's directory under
    // harmless names, as an agent that is not confined could do.
    std::fs::write(data.join("token"), "stored-token-0123456789").expect("token");
    let mut loot = Vec::new();
    for own in ["iris.db", "admin.key", "token", "vapid.pem"] {
        if data.join(own).is_file() {
            let name = format!("notes-{}.txt", own.replace('.', "-"));
            std::fs::hard_link(data.join(own), work.join(&name)).expect("hard link");
            loot.push(name);
        }
    }
    assert!(
        loot.len() >= 3,
        "too few of the gateway's files to link: {loot:?}"
    );
    std::fs::write(work.join("fine.txt"), "an ordinary file").expect("file");
    for name in loot.iter().map(String::as_str).chain(["gateway.toml"]) {
        let (code, message) = read(&mut phone, name).await.expect_err(name);
        assert_eq!(code, ErrorCode::Auth, "{name}: {message}");
        assert!(message.contains("gateway's own files"), "{message}");
        let (code, _) = pull(&mut phone, name).await.expect_err(name);
        assert_eq!(code, ErrorCode::Auth, "{name}");
    }
    let listed = names(&mut phone).await;
    assert!(listed.contains(&"fine.txt".to_owned()), "{listed:?}");
    for name in loot.iter().map(String::as_str).chain(["gateway.toml"]) {
        assert!(
            !listed.iter().any(|l| l == name),
            "{name} listed: {listed:?}"
        );
    }
    assert_eq!(
        read(&mut phone, "fine.txt").await.expect("fine"),
        "an ordinary file"
    );
    gw.stop().await;
}

#[tokio::test]
async fn credential_files_of_other_tools_are_hidden() {
    let root = tempfile::tempdir().expect("tmp");
    let (data, work) = (root.path().join("data"), root.path().join("work"));
    for dir in [work.join(".claude"), work.join(".codex")] {
        std::fs::create_dir_all(dir).expect("dirs");
    }
    let secrets = [
        ".claude/.credentials.json",
        ".codex/auth.json",
        ".netrc",
        "credentials",
        "service-account.json",
        "id_ed25519",
        "vapid.pem",
        "admin.key",
    ];
    for file in secrets {
        std::fs::write(work.join(file), "sk-very-secret").expect("secret");
    }
    std::fs::write(work.join("auth.rs"), "fn check() {}").expect("file");
    let w = work.clone();
    let gw = TestGateway::start_in(&data, move |c| {
        c.agent_command = Some("demo".into());
        c.agent_cwd = Some(w);
    })
    .await;
    let (mut phone, _) = gw.connect("phone").await;
    for file in secrets {
        let (code, message) = read(&mut phone, file).await.expect_err(file);
        assert_eq!(code, ErrorCode::Auth, "{file}: {message}");
        assert!(message.contains("hidden"), "{file}: {message}");
    }
    let listed = names(&mut phone).await;
    for file in secrets.iter().filter(|f| !f.contains('/')) {
        assert!(
            !listed.iter().any(|l| l == file),
            "{file} listed: {listed:?}"
        );
    }
    assert_eq!(
        read(&mut phone, "auth.rs").await.expect("auth.rs"),
        "fn check() {}"
    );
    gw.stop().await;
}
