//! Read aloud in the server's voice: `speech.create` asks an OpenAI-compatible speech endpoint
//! (a fake one here, on 127.0.0.1) for a recording, stores it as media of no message and answers
//! `speech`, which `media.pull` plays; the same text is not synthesized twice; an endpoint that
//! fails, is late, answers something that is not audio or too much of it is `unavailable`; the
//! requests are refused without an endpoint, without text, and beyond the request budget; the
//! recordings count in their device's upload quota, and a full one refuses new recordings.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use common::media::{error_code, pull, sha, stored_files};
use common::*;
use iris_client::{Client, ClientError, Event};
use iris_protocol::{ClientFrame, ErrorCode, Header, ServerFrame, Speech, SpeechCreate};

const KEY: &str = "sk-test-speech";

/// What the fake endpoint answers.
#[derive(Clone, Debug)]
enum Mode {
    /// These bytes as `audio/wav`.
    Audio(Vec<u8>),
    /// An HTTP error status.
    Status(u16),
    /// Never an answer.
    Silent,
    /// An HTML page, called audio.
    Html,
}

/// One request the fake got.
#[derive(Clone, Debug)]
struct Got {
    headers: HeaderMap,
    body: serde_json::Value,
}

#[derive(Clone)]
struct Fake {
    addr: SocketAddr,
    mode: Arc<Mutex<Mode>>,
    got: Arc<Mutex<Vec<Got>>>,
}

impl Fake {
    async fn start(mode: Mode) -> Fake {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let fake = Fake {
            addr: listener.local_addr().expect("addr"),
            mode: Arc::new(Mutex::new(mode)),
            got: Arc::default(),
        };
        let app = Router::new()
            .route("/v1/audio/speech", axum::routing::post(answer))
            .with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        fake
    }

    fn url(&self) -> String {
        format!("http://{}/v1/audio/speech", self.addr)
    }

    fn requests(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }
}

async fn answer(State(fake): State<Fake>, headers: HeaderMap, body: Bytes) -> Response {
    fake.got.lock().unwrap().push(Got {
        headers,
        body: serde_json::from_slice(&body).unwrap_or_default(),
    });
    let mode = fake.mode.lock().unwrap().clone();
    match mode {
        Mode::Audio(bytes) => ([(header::CONTENT_TYPE, "audio/wav")], bytes).into_response(),
        Mode::Status(code) => (StatusCode::from_u16(code).unwrap(), "no").into_response(),
        Mode::Silent => std::future::pending().await,
        Mode::Html => (
            [(header::CONTENT_TYPE, "audio/mpeg")],
            "<!doctype html><html><body><script>alert(1)</script></body></html>",
        )
            .into_response(),
    }
}

/// A small real WAV file: a RIFF/WAVE header for 16 kHz mono 16-bit PCM, then a ramp.
fn wav(samples: usize) -> Vec<u8> {
    let data_len = (samples * 2) as u32;
    let mut out = Vec::new();
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&16_000u32.to_le_bytes());
    out.extend_from_slice(&32_000u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    out.extend((0..samples * 2).map(|i| (i % 251) as u8));
    out
}

async fn speech_gateway(fake: &Fake) -> TestGateway {
    let url = fake.url();
    TestGateway::start_with(move |c| {
        c.voice.speech_url = Some(url);
        c.voice.key = Some(KEY.into());
        c.voice.speech_voice = "af_bella".into();
        c.voice.timeout = Duration::from_secs(1);
    })
    .await
}

async fn speak(c: &mut Client, text: &str) -> Result<Event, ClientError> {
    let req = ClientFrame::SpeechCreate(SpeechCreate { text: text.into() });
    c.request(Header::default(), req).await
}

fn speech_of(event: Event) -> Speech {
    match event.body {
        ServerFrame::Speech(s) => s,
        other => panic!("expected speech, got {other:?}"),
    }
}

/// The error answering a request: its code and message.
fn refusal(result: Result<Event, ClientError>) -> (ErrorCode, String) {
    match result {
        Err(ClientError::Server { code, message, .. }) => (code, message),
        other => panic!("expected an error answer, got {other:?}"),
    }
}

#[tokio::test]
async fn a_text_is_read_aloud_once_and_pulled_as_the_endpoint_made_it() {
    let audio = wav(4_000);
    let fake = Fake::start(Mode::Audio(audio.clone())).await;
    let gw = speech_gateway(&fake).await;
    let (mut phone, ack) = gw.connect("phone").await;
    assert!(
        ack.server_caps.speech,
        "speech_url set: the server voice is on"
    );

    let speech = speech_of(
        speak(&mut phone, "  The answer is 42.  ")
            .await
            .expect("spoken"),
    );
    assert_eq!(speech.kind, "audio");
    assert_eq!(speech.mime, "audio/x-wav");
    assert_eq!(speech.size, audio.len() as u64);
    assert_eq!(speech.sha256, sha(&audio));
    assert_eq!(speech.filename, "speech.wav");

    // What the endpoint got: the OpenAI body, the trimmed text, the key.
    let got = fake.requests();
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].body,
        serde_json::json!({"model": "tts-1", "input": "The answer is 42.", "voice": "af_bella",
            "response_format": "mp3"})
    );
    let auth = got[0]
        .headers
        .get("authorization")
        .unwrap()
        .to_str()
        .unwrap();
    assert_eq!(auth, format!("Bearer {KEY}"));

    let (header, bytes, _) = pull(&mut phone, &speech.media_id).await.expect("pulled");
    assert_eq!(header.kind, "audio");
    assert_eq!(bytes, audio, "the recording is the endpoint's bytes");
    assert_eq!(stored_files(&gw), vec![speech.sha256.clone()]);

    // The same text again, from another device: the same recording, no second synthesis.
    let (mut laptop, _) = gw.connect("laptop").await;
    let again = speech_of(
        speak(&mut laptop, "The answer is 42.")
            .await
            .expect("spoken"),
    );
    assert_eq!(again, speech);
    assert_eq!(
        fake.requests().len(),
        1,
        "remembered, not synthesized again"
    );
    // Another text is.
    speech_of(speak(&mut laptop, "Something else.").await.expect("spoken"));
    assert_eq!(fake.requests().len(), 2);
    gw.stop().await;
}

#[tokio::test]
async fn a_failing_endpoint_is_unavailable_and_nothing_is_kept() {
    let fake = Fake::start(Mode::Status(500)).await;
    let gw = speech_gateway(&fake).await;
    let (mut phone, _) = gw.connect("phone").await;
    let cases = [
        (Mode::Status(500), "failed (HTTP 500)"),
        (Mode::Status(401), "refused the text (HTTP 401)"),
        (Mode::Silent, "did not answer within 1 s"),
        (Mode::Html, "did not answer with audio"),
        (Mode::Audio(wav(8 * 1024 * 1024 + 1)), "larger than 16 MiB"),
    ];
    for (i, (mode, reason)) in cases.into_iter().enumerate() {
        *fake.mode.lock().unwrap() = mode;
        let (code, message) = refusal(speak(&mut phone, &format!("Text {i}.")).await);
        assert_eq!(code, ErrorCode::Unavailable, "{reason}: {message}");
        assert!(message.contains(reason), "{reason}: {message}");
        assert!(!message.contains("127.0.0.1"), "{message}");
    }
    assert!(stored_files(&gw).is_empty(), "no failure keeps a file");
    // The failure is not remembered: once the endpoint works, the text is read.
    *fake.mode.lock().unwrap() = Mode::Audio(wav(100));
    speech_of(speak(&mut phone, "Text 0.").await.expect("spoken"));
    // And a refused endpoint is said so.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/audio/speech", closed.local_addr().unwrap());
    drop(closed);
    let gw2 = TestGateway::start_with(move |c| c.voice.speech_url = Some(url)).await;
    let (mut tablet, _) = gw2.connect("tablet").await;
    let (code, message) = refusal(speak(&mut tablet, "Hello.").await);
    assert_eq!(code, ErrorCode::Unavailable);
    assert!(message.contains("could not be reached"), "{message}");
    gw2.stop().await;
    gw.stop().await;
}

#[tokio::test]
async fn requests_are_refused_without_a_voice_or_a_text_and_beyond_the_budget() {
    let off = TestGateway::start().await;
    let (mut phone, ack) = off.connect("phone").await;
    assert!(!ack.server_caps.speech);
    assert_eq!(
        error_code(speak(&mut phone, "Hello.").await),
        ErrorCode::Unsupported
    );
    off.stop().await;

    let fake = Fake::start(Mode::Audio(wav(100))).await;
    let url = fake.url();
    let gw = TestGateway::start_with(move |c| {
        c.voice.speech_url = Some(url);
        // Bursts of 3, a token back every 5 s.
        c.limits.requests_per_minute = 12;
    })
    .await;
    let (mut phone, _) = gw.connect("phone").await;
    assert_eq!(
        error_code(speak(&mut phone, " \n ").await),
        ErrorCode::BadRequest
    );
    let long = "a".repeat(4097);
    assert_eq!(
        error_code(speak(&mut phone, &long).await),
        ErrorCode::BadRequest
    );
    speech_of(
        speak(&mut phone, &"a".repeat(4096))
            .await
            .expect("at the limit"),
    );
    assert_eq!(
        error_code(speak(&mut phone, "Hello.").await),
        ErrorCode::RateLimited
    );
    assert_eq!(
        fake.requests().len(),
        1,
        "only valid requests reach the endpoint"
    );
    gw.stop().await;
}

/// A large recording, as a long text would be (about 2 MiB).
const BIG: usize = 1024 * 1024;

#[tokio::test]
async fn recordings_count_in_the_device_quota_and_a_full_quota_refuses_new_ones_not_old_ones() {
    let audio = wav(BIG);
    let fake = Fake::start(Mode::Audio(audio.clone())).await;
    let url = fake.url();
    // Room for two of these and the largest recording (16 MiB) a new one may be: a third is
    // made, and then there is no room for a fourth.
    let quota = 16 * 1024 * 1024 + 3 * audio.len() as u64 - 1;
    let gw = TestGateway::start_with(move |c| {
        c.voice.speech_url = Some(url);
        c.media.max_pending_bytes_per_device = quota;
        c.media.max_pending_bytes = 10 * quota;
    })
    .await;
    let (mut phone, _) = gw.connect("phone").await;
    for i in 0..3 {
        speech_of(
            speak(&mut phone, &format!("Answer {i}."))
                .await
                .expect("spoken"),
        );
    }
    let (code, message) = refusal(speak(&mut phone, "One answer too many.").await);
    assert_eq!(code, ErrorCode::MediaTooLarge, "{message}");
    assert_eq!(
        fake.requests().len(),
        3,
        "the refused text was not synthesized"
    );
    // What was made is still read.
    speech_of(speak(&mut phone, "Answer 1.").await.expect("made before"));
    // Another device has a quota of its own.
    let (mut laptop, _) = gw.connect("laptop").await;
    speech_of(
        speak(&mut laptop, "A laptop's answer.")
            .await
            .expect("spoken"),
    );
    assert_eq!(fake.requests().len(), 4);
    // The recordings take the phone's room for uploads too: a file that fits a quota without
    // them no longer does.
    let start = ClientFrame::MediaUploadStart(iris_protocol::MediaUploadStart {
        media_ref: "photo".into(),
        kind: "image".into(),
        mime: "image/png".into(),
        size: 16 * 1024 * 1024 + 2048,
        filename: "photo.png".into(),
        ..Default::default()
    });
    let (code, _) = refusal(phone.request(Header::default(), start).await);
    assert_eq!(code, ErrorCode::MediaTooLarge);
    gw.stop().await;
}
