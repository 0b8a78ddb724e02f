//! Chats as a list shows them: `hello.ack` gives every chat the time of its latest activity and
//! a one-line preview of its newest message, and a chat made with one tap (no name) gets a
//! placeholder and then its title from its first message, on every device, across restarts.
//! A chat the user named or renamed keeps its name.

mod common;

use common::*;
use iris_client::{Client, ClientError};
use iris_protocol::{ChannelCreate, ChannelInfo, ChannelRename, ClientFrame, ErrorCode, Header};
use iris_protocol::{HelloAck, ServerFrame};

/// `channel.create` with this name (empty: one tap); the `channel.created` answer.
async fn create(
    client: &mut Client,
    name: &str,
) -> Result<iris_protocol::ChannelCreated, ClientError> {
    create_in(client, name, None).await
}

async fn create_in(
    client: &mut Client,
    name: &str,
    parent: Option<&str>,
) -> Result<iris_protocol::ChannelCreated, ClientError> {
    let frame = ClientFrame::ChannelCreate(ChannelCreate {
        name: name.into(),
        kind: None,
        parent_chat_id: parent.map(str::to_owned),
        agent: None,
    });
    match client.request(Header::default(), frame).await?.body {
        ServerFrame::ChannelCreated(c) => Ok(c),
        other => panic!("expected channel.created, got {other:?}"),
    }
}

fn entry<'a>(ack: &'a HelloAck, chat_id: &str) -> &'a ChannelInfo {
    ack.channels
        .iter()
        .find(|c| c.chat_id == chat_id)
        .unwrap_or_else(|| panic!("{chat_id} not in the directory"))
}

/// The `channel.renamed` frames among the events this device has received so far. A request
/// answered after them proves every earlier frame has arrived.
async fn renames_so_far(client: &mut Client) -> Vec<(String, String)> {
    lane_history(client, default_lane()).await;
    let mut renames = Vec::new();
    while let Some(e) = client.try_next_event() {
        if let ServerFrame::ChannelRenamed(r) = e.body {
            renames.push((r.chat_id, r.name));
        }
    }
    renames
}

#[tokio::test]
async fn hello_ack_gives_each_chat_its_latest_activity_and_a_preview() {
    let gw = TestGateway::start().await;
    let (mut phone, _) = gw.connect("phone").await;
    let older = create(&mut phone, "Older").await.expect("created");
    let quiet = create(&mut phone, "Quiet").await.expect("created");
    assert!(
        older.last_activity_at.is_some(),
        "a new chat's activity is its creation"
    );
    send_text(
        &mut phone,
        &older.chat_id,
        "**Hello**   there\n\n- second `line`",
    )
    .await;
    let long = "word ".repeat(60);
    let echo = send_text(&mut phone, "default", &long).await;
    let (sent_at, sent_id) = match &echo.body {
        ServerFrame::Message(m) => (m.ts, m.message_id.clone()),
        other => panic!("{other:?}"),
    };

    let (_laptop, ack) = gw.connect("laptop").await;
    let older_entry = entry(&ack, &older.chat_id);
    assert_eq!(
        older_entry.preview.as_deref(),
        Some("Hello there second line")
    );
    let default = entry(&ack, "default");
    assert_eq!(default.last_activity_at, Some(sent_at));
    let preview = default.preview.clone().expect("a preview");
    assert_eq!(preview.chars().count(), 120, "{preview:?}");
    assert!(
        preview.ends_with('…') && !preview.contains("  "),
        "{preview:?}"
    );
    // The message the preview shows, so that an app can tell when it is deleted.
    assert_eq!(
        default.preview_message_id.as_deref(),
        Some(sent_id.as_str())
    );
    let quiet_entry = entry(&ack, &quiet.chat_id);
    assert_eq!(quiet_entry.preview, None, "an empty chat has no preview");
    assert_eq!(quiet_entry.preview_message_id, None);
    assert_eq!(quiet_entry.last_activity_at, quiet.last_activity_at);
    // By activity: the default chat (newest message), the older chat (a message after the
    // quiet chat was created), the quiet chat.
    assert!(default.last_activity_at > older_entry.last_activity_at);
    assert!(older_entry.last_activity_at >= quiet_entry.last_activity_at);

    // The stored `channel.list` never carries message text.
    let list = phone
        .request(
            Header::lane(&older.chat_id, None),
            ClientFrame::ChannelSetDefault(Default::default()),
        )
        .await
        .expect("set_default answered");
    let json = list.json();
    assert_eq!(json["type"], "channel.list");
    assert!(!json.to_string().contains("Hello there"), "{json}");
    gw.stop().await;
}

#[tokio::test]
async fn a_one_tap_chat_is_named_from_its_first_message_on_every_device() {
    let dir = tempfile::tempdir().expect("dir");
    let gw = TestGateway::start_in(dir.path(), |_| {}).await;
    let (mut phone, _) = gw.connect("phone").await;
    let (mut laptop, _) = gw.connect("laptop").await;
    let chat = create(&mut phone, "").await.expect("a chat without a name");
    assert_eq!(chat.name, "New chat");
    let seen = laptop
        .wait_for(|e| e.frame_type() == "channel.created")
        .await
        .expect("the laptop hears of it");
    assert_eq!(seen.json()["payload"]["name"], "New chat");
    // The gateway stops before the first message: the chat still waits for its title after.
    gw.stop().await;
    let gw = TestGateway::start_in(dir.path(), |_| {}).await;
    let (mut phone, ack) = gw.connect("phone").await;
    let (mut laptop, _) = gw.connect("laptop").await;
    assert_eq!(entry(&ack, &chat.chat_id).name, "New chat");

    // A command does not name the chat.
    send_text(&mut phone, &chat.chat_id, "/help").await;
    assert_eq!(renames_so_far(&mut phone).await, []);

    send_text(
        &mut phone,
        &chat.chat_id,
        "## Plan the **trip** to Lisbon next spring please\nwith details",
    )
    .await;
    let title = "Plan the trip to Lisbon next spring…".to_string();
    for device in [&mut phone, &mut laptop] {
        let renamed = device
            .wait_for(|e| e.frame_type() == "channel.renamed")
            .await
            .expect("the title reaches every device");
        assert_eq!(renamed.json()["payload"]["chat_id"], chat.chat_id.as_str());
        assert_eq!(renamed.json()["payload"]["name"], title.as_str());
    }
    // Only the first message names it.
    send_text(&mut phone, &chat.chat_id, "Something else entirely").await;
    assert_eq!(renames_so_far(&mut phone).await, []);

    gw.stop().await;
    let gw = TestGateway::start_in(dir.path(), |_| {}).await;
    let (_tablet, ack) = gw.connect("tablet").await;
    let named = entry(&ack, &chat.chat_id);
    assert_eq!(named.name, title, "the title is stored like a rename");
    assert_eq!(named.preview.as_deref(), Some("Something else entirely"));
    gw.stop().await;
}

#[tokio::test]
async fn a_chat_the_user_named_or_renamed_keeps_its_name() {
    let gw = TestGateway::start().await;
    let (mut phone, _) = gw.connect("phone").await;
    let named = create(&mut phone, "Groceries").await.expect("created");
    let renamed = create(&mut phone, " ").await.expect("created");
    assert_eq!(renamed.name, "New chat");
    phone
        .request(
            Header::lane(&renamed.chat_id, None),
            ClientFrame::ChannelRename(ChannelRename {
                name: "Mine".into(),
            }),
        )
        .await
        .expect("renamed");
    renames_so_far(&mut phone).await;
    send_text(&mut phone, &named.chat_id, "Milk and eggs").await;
    send_text(&mut phone, &renamed.chat_id, "Milk and eggs").await;
    send_text(&mut phone, "default", "Milk and eggs").await;
    assert_eq!(renames_so_far(&mut phone).await, []);
    let (_laptop, ack) = gw.connect("laptop").await;
    assert_eq!(entry(&ack, &named.chat_id).name, "Groceries");
    assert_eq!(entry(&ack, &renamed.chat_id).name, "Mine");
    assert_eq!(entry(&ack, "default").name, "Default");
    gw.stop().await;
}

#[tokio::test]
async fn a_blank_name_asks_for_a_title_and_a_bad_one_is_refused() {
    let gw = TestGateway::start().await;
    let (mut phone, _) = gw.connect("phone").await;
    let parent = create(&mut phone, "Work").await.expect("created");
    let thread = create_in(&mut phone, "", Some(parent.chat_id.as_str()))
        .await
        .expect("a thread without a name");
    assert_eq!(thread.name, "New thread");
    send(
        &mut phone,
        Header::lane(&parent.chat_id, Some(thread.chat_id.clone())),
        "Quarterly report draft",
        false,
    )
    .await;
    assert_eq!(
        renames_so_far(&mut phone).await,
        [(thread.chat_id.clone(), "Quarterly report draft".into())],
        "the thread is named, its named channel is not"
    );
    for bad in ["x".repeat(101), "\u{200B}".into(), "a\u{7}b".into()] {
        let err = create(&mut phone, &bad).await.unwrap_err();
        assert!(
            matches!(&err, ClientError::Server { code: ErrorCode::BadRequest, message } if message.contains("1-100 characters")),
            "{bad:?}: {err:?}"
        );
    }
    let err = phone
        .request(
            Header::lane(&parent.chat_id, None),
            ClientFrame::ChannelRename(ChannelRename { name: "".into() }),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::Server {
                code: ErrorCode::BadRequest,
                ..
            }
        ),
        "a rename still needs a name: {err:?}"
    );
    let (_laptop, ack) = gw.connect("laptop").await;
    assert_eq!(
        ack.channels.len(),
        3,
        "nothing was created by the refused requests"
    );
    gw.stop().await;
}
