//! Revocation is final: the pairing codes a device made belong to it and die with it, a device
//! may keep only a few open while the owner's `pair` is never blocked, `pair list` and
//! `pair revoke` show and delete open codes, and a code never takes over a paired device's id.

mod common;

use std::time::Duration;

use common::run_cli as cli;
use common::*;
use iris_client::{Client, ClientError, ConnectOptions, RawConnection};
use iris_gateway::credentials;
use iris_protocol::{ClientFrame, Empty, ErrorCode, Header, HelloAck, Ping, ServerFrame};

/// `hello` with `token` as `device`: the ack, or the error code and message.
async fn hello(
    gw: &TestGateway,
    token: &str,
    device: &str,
) -> Result<HelloAck, (ErrorCode, String)> {
    let mut conn = RawConnection::connect(&gw.url).await.expect("connect");
    let result = conn.hello(token, device).await;
    let _ = conn.close().await;
    match result {
        Ok(ack) => Ok(ack),
        Err(ClientError::Server { code, message }) => Err((code, message)),
        Err(e) => panic!("hello failed without an error frame: {e}"),
    }
}

/// A device paired with a code from the owner's `pair`, connected with its own token.
async fn paired(gw: &TestGateway, device: &str) -> Client {
    let code = credentials::create_code(&gw.shared.store, Duration::from_secs(600), None)
        .await
        .expect("code")
        .code;
    let token = hello(gw, &code, device)
        .await
        .expect("pairs")
        .device_token
        .expect("token");
    let (mut client, _) = Client::connect(ConnectOptions::new(gw.url.clone(), &token, device))
        .await
        .expect("connect");
    client.next_event().await.expect("status");
    client
}

/// `pair.create` from a signed-in device: the code, or the error code.
async fn pair_create(client: &mut Client) -> Result<String, ErrorCode> {
    match client
        .request(Header::default(), ClientFrame::PairCreate(Empty {}))
        .await
    {
        Ok(answer) => match answer.body {
            ServerFrame::PairCode(pair) => Ok(pair.code),
            _ => panic!("{}", answer.raw),
        },
        Err(ClientError::Server { code, .. }) => Err(code),
        Err(e) => panic!("{e}"),
    }
}

fn data_dir(gw: &TestGateway) -> String {
    gw.dir.to_str().expect("path").to_owned()
}

async fn run(args: Vec<String>) -> (bool, String, String) {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cli(&args)
    })
    .await
    .expect("cli")
}

#[tokio::test]
async fn the_codes_a_revoked_device_kept_no_longer_sign_anyone_in() {
    let gw = TestGateway::start().await;
    let mut mole = paired(&gw, "mole").await;
    let mut kept = Vec::new();
    for _ in 0..3 {
        kept.push(pair_create(&mut mole).await.expect("pair.create"));
    }
    let revoked = iris_gateway::admin::devices::revoke(&gw.dir, "mole")
        .await
        .expect("revoke");
    assert!(revoked.existed && revoked.disconnected, "{revoked:?}");
    for (i, code) in kept.iter().enumerate() {
        let device = format!("mole-{i}");
        assert_eq!(
            hello(&gw, code, &device).await.map(|_| ()),
            Err((ErrorCode::Auth, "invalid token".into())),
            "kept code {i} must die with its device"
        );
        let row = gw.shared.store.get_device(&device).await.expect("read");
        assert!(row.is_none(), "no device made by a dead code");
    }
    let (ok, out, err) = run(vec![
        "pair".into(),
        "list".into(),
        "--data-dir".into(),
        data_dir(&gw),
    ])
    .await;
    assert!(ok, "{err}");
    assert!(out.contains("No pairing codes are waiting"), "{out}");
    gw.stop().await;
}

#[tokio::test]
async fn a_device_keeps_few_codes_open_and_never_blocks_the_owners_pair() {
    let gw = TestGateway::start().await;
    let mut mole = paired(&gw, "mole").await;
    for i in 0..credentials::MAX_OPEN_CODES {
        assert!(pair_create(&mut mole).await.is_ok(), "code {i}");
    }
    assert_eq!(pair_create(&mut mole).await, Err(ErrorCode::RateLimited));

    // Another device's cap is its own, and the owner's command line has none.
    let (mut laptop, _) = gw.connect("laptop").await;
    assert!(pair_create(&mut laptop).await.is_ok());
    let (ok, out, err) = run(vec!["pair".into(), "--data-dir".into(), data_dir(&gw)]).await;
    assert!(ok, "the owner's pair was blocked: {err}");
    let code = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("Pairing code: "))
        .unwrap_or_else(|| panic!("no code in:\n{out}"))
        .to_owned();
    assert!(hello(&gw, &code, "owner-tablet").await.is_ok());
    gw.stop().await;
}

#[tokio::test]
async fn pair_list_shows_who_made_each_code_and_pair_revoke_deletes_it() {
    let gw = TestGateway::start().await;
    let (mut laptop, _) = gw.connect("laptop").await;
    let laptops = pair_create(&mut laptop).await.expect("pair.create");
    let owners = credentials::create_code(&gw.shared.store, Duration::from_secs(600), None)
        .await
        .expect("code")
        .code;
    let id = credentials::code_id(&credentials::hash(&laptops)).to_owned();

    let (ok, out, err) = run(vec![
        "pair".into(),
        "list".into(),
        "--data-dir".into(),
        data_dir(&gw),
    ])
    .await;
    assert!(ok, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{id} in:\n{out}"));
    assert!(line.contains("laptop"), "{line}");
    assert!(out.contains("owner (pair)"), "{out}");
    assert!(
        !out.contains(&laptops) && !out.contains(&owners),
        "codes are never shown again"
    );

    let (ok, out, err) = run(vec![
        "pair".into(),
        "revoke".into(),
        id.clone(),
        "--data-dir".into(),
        data_dir(&gw),
    ])
    .await;
    assert!(ok, "{err}");
    assert!(out.contains("Deleted 1 pairing code."), "{out}");
    assert_eq!(
        hello(&gw, &laptops, "tablet").await.map(|_| ()),
        Err((ErrorCode::Auth, "invalid token".into()))
    );
    let (ok, _, err) = run(vec![
        "pair".into(),
        "revoke".into(),
        id,
        "--data-dir".into(),
        data_dir(&gw),
    ])
    .await;
    assert!(!ok && err.contains("no such pairing code"), "{err}");

    let (ok, out, err) = run(vec![
        "pair".into(),
        "revoke".into(),
        "--all".into(),
        "--data-dir".into(),
        data_dir(&gw),
    ])
    .await;
    assert!(ok, "{err}");
    assert!(out.contains("Deleted 1 pairing code."), "{out}");
    assert!(hello(&gw, &owners, "tablet").await.is_err());
    gw.stop().await;
}

#[tokio::test]
async fn a_code_cannot_take_over_a_paired_device_id() {
    let gw = TestGateway::start().await;
    let (mut owner, _) = gw.connect("owner-phone").await;
    let _tab = paired(&gw, "tab").await;
    let code = credentials::create_code(&gw.shared.store, Duration::from_secs(600), None)
        .await
        .expect("code")
        .code;
    for taken in ["owner-phone", "tab"] {
        let got = hello(&gw, &code, taken).await.map(|_| ());
        let Err((ErrorCode::Auth, message)) = got else {
            panic!("{taken}: {got:?}")
        };
        assert!(message.contains("already paired"), "{message}");
    }
    // The owner's connection was left alone: it still answers.
    let answer = owner
        .request(Header::default(), ClientFrame::Ping(Ping::default()))
        .await
        .expect("the owner is still connected");
    assert_eq!(answer.frame_type(), "pong");
    // The refused code was not spent: it pairs a new device.
    let ack = hello(&gw, &code, "new-phone").await.expect("pairs");
    assert!(ack.device_token.is_some());
    gw.stop().await;
}

#[tokio::test]
async fn revoking_a_device_revokes_the_devices_paired_through_its_codes() {
    let gw = TestGateway::start().await;
    let mut mole = paired(&gw, "mole").await;
    // Whoever holds the mole pairs a spare for later, and the spare another.
    let code = pair_create(&mut mole).await.expect("pair.create");
    let spare_token = hello(&gw, &code, "spare")
        .await
        .expect("pairs")
        .device_token
        .expect("token");
    let (mut spare, _) =
        Client::connect(ConnectOptions::new(gw.url.clone(), &spare_token, "spare"))
            .await
            .expect("connect");
    spare.next_event().await.expect("status");
    let code = pair_create(&mut spare).await.expect("pair.create");
    let second_token = hello(&gw, &code, "spare-2")
        .await
        .expect("pairs")
        .device_token
        .expect("token");
    // The owner's own laptop, paired from the command line.
    let mut laptop = paired(&gw, "laptop").await;

    let (ok, out, err) = run(vec![
        "devices".into(),
        "revoke".into(),
        "mole".into(),
        "--data-dir".into(),
        data_dir(&gw),
    ])
    .await;
    assert!(ok, "{err}");
    assert!(
        out.contains("Also revoked, paired through a code it made:")
            && out.contains("spare")
            && out.contains("spare-2"),
        "{out}"
    );
    // The spare's socket is closed, and no token of the line signs in again.
    while spare.next_event().await.is_ok() {}
    for (token, device) in [(&spare_token, "spare"), (&second_token, "spare-2")] {
        assert!(
            matches!(hello(&gw, token, device).await, Err((ErrorCode::Auth, _))),
            "{device} is revoked"
        );
    }
    // The owner's other device is untouched.
    laptop
        .request(Header::default(), ClientFrame::Ping(Ping::default()))
        .await
        .expect("the laptop still works");
    gw.stop().await;
}
