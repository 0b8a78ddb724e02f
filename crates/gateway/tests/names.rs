//! Names cannot hide or disguise anything: invisible format characters (zero-width spaces,
//! bidirectional overrides) are taken out of chat names and of the names of files the agent
//! sends, so two chats cannot both look like "Default" and `Bank\u{202E}txt.exe` is not shown
//! as "Bankexe.txt". Emoji joined with a zero-width joiner stay whole.

mod common;

use std::path::Path;

use common::*;
use iris_protocol::{ChannelCreate, ClientFrame, Header, ServerFrame};

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
    assert_eq!(create(&mut phone, "Default\u{200B}").await, "Default");
    assert_eq!(
        create(&mut phone, "\u{2066}Default\u{2069}").await,
        "Default"
    );
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
