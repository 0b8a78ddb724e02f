//! Names cannot hide or disguise anything: invisible format characters (zero-width spaces,
//! bidirectional overrides) are taken out of chat names and of the names of files the agent
//! sends, so two chats cannot both look like "Default" and `Bank\u{202E}txt.exe` is not shown
//! as "Bankexe.txt". Emoji joined with a zero-width joiner stay whole. A second chat of the same
//! name (letter case and invisible characters aside) is refused beside the first; a device's name
//! is stored cleaned and at most 64 characters long.

mod common;

use std::path::Path;

use common::*;
use iris_client::{ClientError, ConnectOptions};
use iris_protocol::{ChannelCreate, ClientFrame, Empty, ErrorCode, Header, ServerFrame};

/// Creates a channel; the name it got.
async fn create(client: &mut iris_client::Client, name: &str) -> String {
    let frame = ClientFrame::ChannelCreate(ChannelCreate {
        name: name.into(),
        kind: None,
        parent_chat_id: None,
        agent: None,
    });
    let reply = client
        .request(Header::default(), frame)
        .await
        .expect("created");
    match reply.body {
        ServerFrame::ChannelCreated(created) => created.name,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn chat_names_lose_their_invisible_characters() {
    let gw = TestGateway::start().await;
    let (mut phone, _) = gw.connect("phone").await;
    assert_eq!(create(&mut phone, "Work\u{200B}").await, "Work");
    assert_eq!(create(&mut phone, "\u{2066}Home\u{2069}").await, "Home");
    assert_eq!(
        create(&mut phone, "👩\u{200D}💻 De\u{200D}v\u{202E}").await,
        "👩\u{200D}💻 Dev",
        "the emoji stays whole; the joiner inside a word and the override go"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_file_from_the_agent_is_not_shown_under_a_reversed_name() {
    let python = Path::new("/usr/bin/python3");
    if !python.exists() {
        return;
    }
    let work = tempfile::tempdir().expect("work dir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hostile_agent.py");
    let agent = format!("{} {}", python.display(), script.display());
    let cwd = work.path().to_path_buf();
    let gw = TestGateway::start_with(|c| {
        c.agent_command = Some(agent);
        c.agent_cwd = Some(cwd);
    })
    .await;
    let (mut phone, _) = gw.connect("phone").await;
    let file = work.path().join("Bank\u{202E}txt.exe");
    std::fs::write(&file, "MZ").expect("file");
    let events = turn(
        &mut phone,
        default_lane(),
        &format!("media {}", file.display()),
    )
    .await;
    let names: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::MediaOffer(o) => Some(o.filename.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(names, vec!["Banktxt.exe".to_owned()]);
    gw.stop().await;
}

/// Asks for a channel (or a thread of `parent`) named `name`; the refusal's code and message.
async fn try_create(
    client: &mut iris_client::Client,
    name: &str,
    parent: Option<&str>,
) -> Result<String, (ErrorCode, String)> {
    let frame = ClientFrame::ChannelCreate(ChannelCreate {
        name: name.into(),
        kind: None,
        parent_chat_id: parent.map(str::to_owned),
        agent: None,
    });
    match client.request(Header::default(), frame).await {
        Ok(reply) => match reply.body {
            ServerFrame::ChannelCreated(created) => Ok(created.chat_id),
            other => panic!("{other:?}"),
        },
        Err(ClientError::Server { code, message }) => Err((code, message)),
        Err(e) => panic!("channel.create failed without an error frame: {e}"),
    }
}

async fn try_rename(
    client: &mut iris_client::Client,
    chat: &str,
    name: &str,
) -> Result<(), (ErrorCode, String)> {
    let frame = ClientFrame::ChannelRename(iris_protocol::ChannelRename { name: name.into() });
    match client.request(Header::lane(chat, None), frame).await {
        Ok(_) => Ok(()),
        Err(ClientError::Server { code, message }) => Err((code, message)),
        Err(e) => panic!("channel.rename failed without an error frame: {e}"),
    }
}

#[tokio::test]
async fn a_second_chat_cannot_take_a_name_beside_it_in_another_case() {
    let gw = TestGateway::start().await;
    let (mut phone, _) = gw.connect("phone").await;
    for name in ["Default", "default", " DEFAULT\u{200B}", "\u{202E}dEfAuLt"] {
        let refused = try_create(&mut phone, name, None).await;
        let Err((code, message)) = refused else {
            panic!("{name:?} was accepted beside the default chat")
        };
        assert_eq!(code, ErrorCode::BadRequest, "{name:?}");
        assert!(
            message.contains("already a chat named \"Default\""),
            "{message}"
        );
    }
    let work = try_create(&mut phone, "Work", None).await.expect("Work");
    assert!(try_rename(&mut phone, &work, "DEFAULT").await.is_err());
    assert!(try_rename(&mut phone, "default", "work").await.is_err());
    // A chat takes another case of its own name; a thread may share a channel's name, and
    // threads of different channels each other's.
    try_rename(&mut phone, &work, "WORK")
        .await
        .expect("its own name");
    try_create(&mut phone, "Work", Some(&work))
        .await
        .expect("thread");
    try_create(&mut phone, "Work", Some("default"))
        .await
        .expect("thread");
    let (code, _) = try_create(&mut phone, "work", Some(&work))
        .await
        .expect_err("a second thread of that name in the channel");
    assert_eq!(code, ErrorCode::BadRequest);
    // Chats made without a name wait for their titles and do not block each other.
    try_create(&mut phone, "", None).await.expect("a new chat");
    try_create(&mut phone, "", None)
        .await
        .expect("another new chat");
    // Nothing was stored, and the connection goes on.
    try_create(&mut phone, "Home", None).await.expect("Home");
    let (_laptop, list) = gw.connect("laptop").await;
    let names: Vec<&str> = list.channels.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names
            .iter()
            .filter(|n| n.eq_ignore_ascii_case("default"))
            .count(),
        1,
        "{names:?}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_device_name_is_stored_cleaned_and_at_most_64_characters() {
    let gw = TestGateway::start().await;
    let mut options = ConnectOptions::new(gw.url.clone(), TOKEN, "phone");
    let long = format!("\u{1b}[2J\u{202E}Ph\u{200B}one {}", "é".repeat(200));
    options.device_name = Some(long);
    let (mut phone, _) = iris_client::Client::connect(options)
        .await
        .expect("a long name does not keep the device out");
    let mut blank = ConnectOptions::new(gw.url.clone(), TOKEN, "tablet");
    blank.device_name = Some("\u{200B}\u{7}".into());
    let (_tablet, _) = iris_client::Client::connect(blank).await.expect("tablet");
    let list = phone
        .request(Header::default(), ClientFrame::DevicesList(Empty {}))
        .await
        .expect("devices.list");
    let ServerFrame::DevicesList(list) = list.body else {
        panic!("{}", list.raw)
    };
    let name = |id: &str| {
        list.devices
            .iter()
            .find(|d| d.device_id == id)
            .map(|d| d.name.clone())
            .unwrap_or_else(|| panic!("no {id} in {list:?}"))
    };
    let phone_name = name("phone");
    assert_eq!(phone_name.chars().count(), 64, "{phone_name:?}");
    assert_eq!(phone_name, format!("[2JPhone {}", "é".repeat(55)));
    assert_eq!(name("tablet"), "tablet", "nothing visible: the id");
    gw.stop().await;
}
