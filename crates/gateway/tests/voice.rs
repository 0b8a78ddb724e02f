//! Voice notes: a recording uploaded with `voice:true`, transcribed by an OpenAI-compatible
//! endpoint (a fake one here, on 127.0.0.1) as the first step of its turn, the transcript kept
//! on the message (history, search) and announced by `message.transcript`, and given to the
//! demo agent as the prompt's text; failures leave the note with a `failed` transcript and no
//! prompt, and `message.retry` transcribes it again. An agent that takes audio gets the
//! recording itself. Transcriptions are bounded across the gateway, and a recording attached
//! to many messages is transcribed once.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use common::media::{next_error, sha, stored_files, temp_files, UP_CHUNK};
use common::prompt_log::{prompts_run, recording_agent};
use common::*;
use iris_client::{Client, Event};
use iris_protocol::{
    ChannelCreate, ClientFrame, ErrorCode, Header, MediaUploadEnd, MediaUploadStart, MessageRetry,
    MessageSend, MessageState, Role, Search, ServerFrame, TranscriptState,
};
use tokio::sync::Notify;

const KEY: &str = "sk-test-voice";
const SPOKEN: &str = "hello from the garden";

/// What the fake endpoint answers.
#[derive(Clone, Debug)]
enum Mode {
    /// `{"text": …}`.
    Text(String),
    /// An HTTP error status with a JSON error body.
    Status(u16),
    /// The answer comes after this long.
    Sleep(Duration),
    /// A body that is not JSON.
    Garbage,
}

/// One request the fake got.
#[derive(Clone, Debug)]
struct Got {
    headers: HeaderMap,
    body: Vec<u8>,
}

#[derive(Clone)]
struct Fake {
    addr: SocketAddr,
    mode: Arc<Mutex<Mode>>,
    got: Arc<Mutex<Vec<Got>>>,
    arrived: Arc<Notify>,
    /// Requests being answered now, and the most there were at once.
    busy: Arc<Mutex<(usize, usize)>>,
}

impl Fake {
    async fn start() -> Fake {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let fake = Fake {
            addr: listener.local_addr().expect("addr"),
            mode: Arc::new(Mutex::new(Mode::Text(SPOKEN.into()))),
            got: Arc::default(),
            arrived: Arc::new(Notify::new()),
            busy: Arc::default(),
        };
        let app = Router::new()
            .route("/v1/audio/transcriptions", axum::routing::post(answer))
            .with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        fake
    }

    fn url(&self) -> String {
        format!("http://{}/v1/audio/transcriptions", self.addr)
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    fn requests(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }
}

async fn answer(State(fake): State<Fake>, headers: HeaderMap, body: Bytes) -> Response {
    fake.got.lock().unwrap().push(Got {
        headers,
        body: body.to_vec(),
    });
    fake.arrived.notify_waiters();
    let mode = fake.mode.lock().unwrap().clone();
    {
        let mut busy = fake.busy.lock().unwrap();
        busy.0 += 1;
        busy.1 = busy.1.max(busy.0);
    }
    let response = respond(mode).await;
    fake.busy.lock().unwrap().0 -= 1;
    response
}

async fn respond(mode: Mode) -> Response {
    match mode {
        Mode::Text(text) => axum::Json(serde_json::json!({ "text": text })).into_response(),
        Mode::Status(code) => (
            StatusCode::from_u16(code).unwrap(),
            axum::Json(serde_json::json!({"error": {"message": "no"}})),
        )
            .into_response(),
        Mode::Sleep(d) => {
            tokio::time::sleep(d).await;
            axum::Json(serde_json::json!({ "text": SPOKEN })).into_response()
        }
        Mode::Garbage => "<html>bad gateway</html>".into_response(),
    }
}

/// A small real WAV file: a RIFF/WAVE header for 16 kHz mono 16-bit PCM, then silence.
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
    out.resize(out.len() + samples * 2, 0);
    out
}

fn voice_start(media_ref: &str, size: u64) -> ClientFrame {
    ClientFrame::MediaUploadStart(MediaUploadStart {
        media_ref: media_ref.into(),
        kind: "audio".into(),
        mime: "audio/wav".into(),
        size,
        filename: "note.wav".into(),
        voice: true,
    })
}

fn start_header(media_ref: &str) -> Header {
    Header {
        id: Some(iris_protocol::RequestId::Str(format!("start-{media_ref}"))),
        ..Header::default()
    }
}

/// Uploads a voice note; returns the answer to its end.
async fn upload_voice(c: &mut Client, media_ref: &str, data: &[u8]) -> Result<Event, String> {
    c.send(
        start_header(media_ref),
        voice_start(media_ref, data.len() as u64),
    )
    .await
    .expect("start sent");
    for chunk in data.chunks(UP_CHUNK) {
        c.send_binary(chunk.to_vec()).await.expect("bytes sent");
    }
    let end = ClientFrame::MediaUploadEnd(MediaUploadEnd {
        media_ref: media_ref.into(),
        sha256: sha(data),
    });
    c.request(Header::default(), end)
        .await
        .map_err(|e| e.to_string())
}

/// Uploads and sends a voice note to the default lane; returns the echo.
async fn send_voice(c: &mut Client, media_ref: &str, data: &[u8]) -> iris_protocol::Message {
    send_voice_to(c, default_lane(), media_ref, data).await
}

/// Uploads and sends a voice note to `lane`; returns the echo.
async fn send_voice_to(
    c: &mut Client,
    lane: Header,
    media_ref: &str,
    data: &[u8],
) -> iris_protocol::Message {
    let ack = upload_voice(c, media_ref, data).await.expect("uploaded");
    assert_eq!(ack.frame_type(), "media.upload.ack", "{}", ack.raw);
    let echo = c
        .request(
            lane,
            ClientFrame::MessageSend(MessageSend {
                text: String::new(),
                media_refs: vec![media_ref.into()],
                ..Default::default()
            }),
        )
        .await
        .expect("sent");
    match echo.body {
        ServerFrame::Message(m) => m,
        other => panic!("expected the echo, got {other:?}"),
    }
}

/// Frames up to the `message.transcript` of this message.
async fn until_transcript(
    c: &mut Client,
    id: &str,
) -> (Vec<Event>, iris_protocol::MessageTranscript) {
    let frames = until(
        c,
        |e| matches!(&e.body, ServerFrame::MessageTranscript(t) if t.message_id == id),
    )
    .await;
    let ServerFrame::MessageTranscript(t) = &frames.last().unwrap().body else {
        unreachable!()
    };
    let t = t.clone();
    (frames, t)
}

fn voice_gateway(fake: &Fake, log: &Path) -> impl FnOnce(&mut iris_gateway::Config) {
    let (url, agent) = (fake.url(), recording_agent(log));
    move |c| {
        c.agent_command = Some(agent);
        c.voice.transcribe_url = Some(url);
        c.voice.key = Some(KEY.into());
        c.voice.timeout = Duration::from_secs(1);
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

async fn search(c: &mut Client, query: &str) -> Vec<iris_protocol::SearchHit> {
    let reply = c
        .request(
            Header::default(),
            ClientFrame::Search(Search {
                query: query.into(),
                ..Default::default()
            }),
        )
        .await
        .expect("search answered");
    match reply.body {
        ServerFrame::SearchResults(r) => r.hits,
        other => panic!("expected search results, got {other:?}"),
    }
}

#[tokio::test]
async fn a_voice_note_is_transcribed_answered_and_kept_with_its_transcript() {
    let fake = Fake::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("prompts.log");
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let gw = TestGateway::start_in(&data, voice_gateway(&fake, &log)).await;
    let (mut phone, ack) = gw.connect("phone").await;
    assert!(
        ack.server_caps.voice,
        "transcription configured: voice notes are on"
    );
    let (mut laptop, _) = gw.connect("laptop").await;

    let note = wav(8_000);
    let echo = send_voice(&mut phone, "v1", &note).await;
    assert_eq!(echo.text, "");
    assert_eq!(echo.media.len(), 1);
    assert!(
        echo.media[0].voice && echo.media[0].kind == "audio",
        "{:?}",
        echo.media
    );
    assert_eq!(echo.media[0].mime, "audio/x-wav");
    let pending = echo.transcript.clone().expect("a pending transcript");
    assert_eq!(pending.state, TranscriptState::Pending);
    // It waits for its transcript before its turn begins.
    assert_eq!(echo.state, Some(MessageState::Queued));

    for device in [&mut phone, &mut laptop] {
        let (_, t) = until_transcript(device, &echo.message_id).await;
        assert_eq!(t.transcript.state, TranscriptState::Done);
        assert_eq!(t.transcript.text.as_deref(), Some(SPOKEN));
        let answer = final_text(&until_idle(device).await);
        assert!(answer.contains(&format!("Echo: {SPOKEN}")), "{answer}");
        // The transcript is the prompt; an agent that cannot hear gets no link to the recording.
        assert!(!answer.contains("Received file"), "{answer}");
    }
    assert_eq!(prompts_run(&log), vec![SPOKEN.to_owned()]);

    // What the endpoint got: the file with its bytes, the model, JSON asked for, the key.
    let got = fake.requests();
    assert_eq!(got.len(), 1);
    let req = &got[0];
    assert_eq!(
        req.headers.get("authorization").unwrap().to_str().unwrap(),
        format!("Bearer {KEY}")
    );
    let ct = req.headers.get("content-type").unwrap().to_str().unwrap();
    assert!(ct.starts_with("multipart/form-data"), "{ct}");
    assert!(contains(&req.body, b"name=\"model\"\r\n\r\nwhisper-1"));
    assert!(contains(&req.body, b"name=\"response_format\"\r\n\r\njson"));
    assert!(contains(&req.body, b"name=\"file\"; filename=\"note.wav\""));
    assert!(contains(&req.body, b"Content-Type: audio/x-wav"));
    assert!(
        contains(&req.body, &note),
        "the recording's bytes were sent"
    );

    // History, search and the stored message keep the transcript.
    let history = lane_history(&mut laptop, default_lane()).await;
    let kept = history
        .iter()
        .find(|m| m.message_id == echo.message_id)
        .expect("the note in history");
    assert_eq!(kept.role, Role::User);
    let t = kept.transcript.as_ref().expect("transcript in history");
    assert_eq!(
        (t.state, t.text.as_deref()),
        (TranscriptState::Done, Some(SPOKEN))
    );
    assert_eq!(kept.state, Some(MessageState::Answered));
    let hits = search(&mut laptop, "garden").await;
    let hit = hits
        .iter()
        .find(|h| h.message_id == echo.message_id)
        .unwrap_or_else(|| panic!("the note is found by its transcript: {hits:?}"));
    assert!(hit.snippet.contains("[garden]"), "{}", hit.snippet);
    gw.stop().await;
}

/// Sends a note while the fake answers with `mode`: the transcript fails with a reason, the lane
/// says so, the agent gets no prompt; then the fake is fixed and a retry runs the turn.
async fn fails_then_retries(
    phone: &mut Client,
    fake: &Fake,
    log: &Path,
    mode: Mode,
    reason: &str,
    n: usize,
) {
    fake.set(mode.clone());
    let before = prompts_run(log).len();
    let echo = send_voice(phone, &format!("f{n}"), &wav(4_000 + n)).await;
    let (_, t) = until_transcript(phone, &echo.message_id).await;
    assert_eq!(t.transcript.state, TranscriptState::Failed, "{mode:?}");
    let error = t.transcript.error.clone().unwrap_or_default();
    assert!(error.contains(reason), "{mode:?}: {error}");
    let notice = until(
        phone,
        |e| matches!(&e.body, ServerFrame::Message(m) if m.role == Role::System),
    )
    .await;
    let notice = system_texts(&notice).pop().unwrap();
    assert!(
        notice.contains("could not be transcribed") && notice.contains(reason),
        "{notice}"
    );
    let history = lane_history(phone, default_lane()).await;
    let kept = history
        .iter()
        .find(|m| m.message_id == echo.message_id)
        .expect("the note stays in the chat");
    assert_eq!(kept.state, Some(MessageState::Failed));
    assert_eq!(
        kept.transcript.as_ref().map(|t| t.state),
        Some(TranscriptState::Failed)
    );
    assert_eq!(prompts_run(log).len(), before, "no prompt for {mode:?}");

    fake.set(Mode::Text(format!("{SPOKEN} {n}")));
    let retry = ClientFrame::MessageRetry(MessageRetry {
        message_id: echo.message_id.clone(),
        ..Default::default()
    });
    phone.request(default_lane(), retry).await.expect("retried");
    let (_, t) = until_transcript(phone, &echo.message_id).await;
    assert_eq!(
        t.transcript.state,
        TranscriptState::Pending,
        "a retry shows the note being transcribed again"
    );
    let (_, t) = until_transcript(phone, &echo.message_id).await;
    assert_eq!(t.transcript.state, TranscriptState::Done);
    let answer = final_text(&until_idle(phone).await);
    assert!(answer.contains(&format!("Echo: {SPOKEN} {n}")), "{answer}");
    assert_eq!(prompts_run(log).len(), before + 1);
}

#[tokio::test]
async fn failed_transcriptions_keep_the_note_prompt_nothing_and_retry() {
    let fake = Fake::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("prompts.log");
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let gw = TestGateway::start_in(&data, voice_gateway(&fake, &log)).await;
    let (mut phone, _) = gw.connect("phone").await;
    let cases = [
        (
            Mode::Sleep(Duration::from_secs(3)),
            "did not answer within 1 s",
        ),
        (Mode::Status(400), "refused the note (HTTP 400)"),
        (Mode::Status(503), "failed (HTTP 503)"),
        (Mode::Text("  \n ".into()), "no speech was recognised"),
        (Mode::Garbage, "did not answer with a transcript"),
    ];
    for (n, (mode, reason)) in cases.into_iter().enumerate() {
        fails_then_retries(&mut phone, &fake, &log, mode, reason, n).await;
    }
    // A service that is not there at all.
    drop(gw);
    let gone = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let data2 = tmp.path().join("data2");
    std::fs::create_dir_all(&data2).unwrap();
    let agent = recording_agent(&log);
    let gw = TestGateway::start_in(&data2, move |c| {
        c.agent_command = Some(agent);
        c.voice.transcribe_url = Some(format!("http://{gone}/v1/audio/transcriptions"));
    })
    .await;
    let (mut phone, _) = gw.connect("phone").await;
    let echo = send_voice(&mut phone, "gone", &wav(1000)).await;
    let (_, t) = until_transcript(&mut phone, &echo.message_id).await;
    assert_eq!(t.transcript.state, TranscriptState::Failed);
    assert!(
        t.transcript
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("could not be reached"),
        "{t:?}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn oversized_non_audio_and_unwanted_notes_are_refused() {
    let fake = Fake::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("prompts.log");
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let gw = TestGateway::start_in(&data, voice_gateway(&fake, &log)).await;
    let (mut phone, _) = gw.connect("phone").await;

    // 50 MB: refused at the start, before any byte, nothing kept.
    phone
        .send(start_header("big"), voice_start("big", 50_000_000))
        .await
        .unwrap();
    let (id, code, message) = next_error(&mut phone).await;
    assert_eq!(code, ErrorCode::MediaTooLarge, "{message}");
    assert_eq!(id, start_header("big").id);
    assert!(stored_files(&gw).is_empty() && temp_files(&gw).is_empty());

    // Bytes that are no recording: refused at the end, nothing kept.
    let png = common::media::typed(common::media::PNG_MAGIC, common::media::bytes(2000, 3));
    let refused = upload_voice(&mut phone, "png", &png).await;
    let err = refused.expect_err("a picture is no voice note");
    assert!(err.contains("must be an audio recording"), "{err}");
    assert!(stored_files(&gw).is_empty() && temp_files(&gw).is_empty());
    assert!(fake.requests().is_empty());
    gw.stop().await;

    // Voice off: no transcription, and the demo agent takes no audio.
    let gw = TestGateway::start_demo().await;
    let (mut phone, ack) = gw.connect("phone").await;
    assert!(!ack.server_caps.voice);
    phone
        .send(start_header("off"), voice_start("off", 1000))
        .await
        .unwrap();
    let (id, code, message) = next_error(&mut phone).await;
    assert_eq!(code, ErrorCode::Unsupported);
    assert_eq!(id, start_header("off").id);
    assert!(message.contains("voice notes are off"), "{message}");
    // The connection goes on: an ordinary upload works.
    common::media::upload_ok(&mut phone, "plain", "audio/wav", "a.wav", &wav(100)).await;
    gw.stop().await;
}

#[tokio::test]
async fn an_agent_that_takes_audio_gets_the_recording() {
    let agent = format!("env DEMO_AUDIO=1 {}", demo_agent());
    // Without transcription: the recording alone, and no transcript.
    let gw = TestGateway::start_with(move |c| c.agent_command = Some(agent)).await;
    let (mut phone, _) = gw.connect("phone").await;
    // The agent has started (and said what it takes) once it answered.
    turn(&mut phone, default_lane(), "hi").await;
    let (mut phone, ack) = {
        drop(phone);
        gw.connect("phone").await
    };
    assert!(
        ack.server_caps.voice,
        "an agent takes audio: voice notes are on"
    );
    let note = wav(6_000);
    let echo = send_voice(&mut phone, "direct", &note).await;
    assert!(echo.transcript.is_none(), "{:?}", echo.transcript);
    let answer = final_text(&until_idle(&mut phone).await);
    assert!(
        answer.contains(&format!(
            "Received audio audio/x-wav ({} bytes)",
            note.len()
        )),
        "{answer}"
    );
    gw.stop().await;

    // With transcription too: the transcript as text and the recording.
    let fake = Fake::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let url = fake.url();
    let agent = format!("env DEMO_AUDIO=1 {}", demo_agent());
    let gw = TestGateway::start_in(tmp.path(), move |c| {
        c.agent_command = Some(agent);
        c.voice.transcribe_url = Some(url);
    })
    .await;
    let (mut phone, _) = gw.connect("phone").await;
    let echo = send_voice(&mut phone, "both", &note).await;
    let (_, t) = until_transcript(&mut phone, &echo.message_id).await;
    assert_eq!(t.transcript.state, TranscriptState::Done);
    let answer = final_text(&until_idle(&mut phone).await);
    assert!(answer.contains("Received audio audio/x-wav"), "{answer}");
    assert!(answer.contains(&format!("Echo: {SPOKEN}")), "{answer}");
    assert!(fake.requests()[0].headers.get("authorization").is_none());
    gw.stop().await;
}

#[tokio::test]
async fn a_note_whose_transcription_a_stop_cut_off_is_transcribed_after_the_restart() {
    let fake = Fake::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("prompts.log");
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    fake.set(Mode::Sleep(Duration::from_secs(30)));
    let gw = TestGateway::start_in(&data, |c| {
        voice_gateway(&fake, &log)(c);
        c.voice.timeout = Duration::from_secs(60);
    })
    .await;
    let (mut phone, _) = gw.connect("phone").await;
    let arrived = fake.arrived.notified();
    let echo = send_voice(&mut phone, "cut", &wav(2000)).await;
    if fake.requests().is_empty() {
        tokio::time::timeout(Duration::from_secs(20), arrived)
            .await
            .expect("the transcription started");
    }
    gw.stop().await;
    assert!(prompts_run(&log).is_empty());

    fake.set(Mode::Text(SPOKEN.into()));
    let gw = TestGateway::start_in(&data, voice_gateway(&fake, &log)).await;
    // A device new to the gateway: the replay holds everything, live frames follow it.
    let (mut tablet, _) = gw.connect("tablet").await;
    let replay = tablet.sync(0).await.expect("sync").frames;
    let answered = |e: &Event| {
        matches!(&e.body, ServerFrame::MessageState(s)
            if s.message_id == echo.message_id && s.state == MessageState::Answered)
    };
    if !replay.iter().any(answered) {
        until(&mut tablet, answered).await;
    }
    let history = lane_history(&mut tablet, default_lane()).await;
    let kept = history
        .iter()
        .find(|m| m.message_id == echo.message_id)
        .expect("the note");
    let t = kept.transcript.clone().expect("a transcript");
    assert_eq!(
        (t.state, t.text.as_deref()),
        (TranscriptState::Done, Some(SPOKEN))
    );
    let answer = history
        .iter()
        .find(|m| m.role == Role::Assistant && m.reply_to.as_deref() == Some(&echo.message_id))
        .expect("an answer");
    assert!(
        answer.text.contains(&format!("Echo: {SPOKEN}")),
        "{}",
        answer.text
    );
    assert_eq!(prompts_run(&log), vec![SPOKEN.to_owned()]);
    assert_eq!(fake.requests().len(), 2);
    drop(phone);
    gw.stop().await;
}

/// `doctor` with `[voice] transcribe_url`: its voice line.
async fn doctor_voice_line(url: String) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("iris.toml");
    std::fs::write(&config, format!("[voice]\ntranscribe_url = {url:?}\n")).expect("config");
    let data = dir.path().join("data");
    let (_, out, err) = tokio::task::spawn_blocking(move || {
        run_cli(&[
            "doctor",
            "--config",
            &config.to_string_lossy(),
            "--data-dir",
            &data.to_string_lossy(),
            "--agent",
            "none",
        ])
    })
    .await
    .expect("doctor ran");
    assert!(!err.contains("panicked"), "{err}");
    out.lines()
        .find(|l| l.contains("voice notes"))
        .unwrap_or_else(|| panic!("no voice line in:\n{out}"))
        .to_owned()
}

#[tokio::test]
async fn doctor_checks_that_the_transcription_service_answers() {
    let fake = Fake::start().await;
    // Silence is heard as nothing: the service works.
    fake.set(Mode::Text(String::new()));
    let line = doctor_voice_line(fake.url()).await;
    assert!(line.starts_with("ok "), "{line}");
    assert!(line.contains("answered a test recording"), "{line}");
    let got = fake.requests();
    assert_eq!(got.len(), 1);
    assert!(contains(&got[0].body, b"RIFF"), "a WAV was sent");

    fake.set(Mode::Status(401));
    let line = doctor_voice_line(fake.url()).await;
    assert!(line.starts_with("FAIL"), "{line}");
    assert!(line.contains("refused the note (HTTP 401)"), "{line}");
    assert!(line.contains("check [voice] transcribe_url"), "{line}");
}

#[tokio::test]
async fn a_chat_begun_by_a_voice_note_is_named_from_what_was_said() {
    let fake = Fake::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let gw = TestGateway::start_with(voice_gateway(&fake, &tmp.path().join("prompts.log"))).await;
    let (mut phone, _) = gw.connect("phone").await;
    // A chat made with one tap waits for its first prompt to name it.
    let create = ClientFrame::ChannelCreate(ChannelCreate {
        name: String::new(),
        kind: None,
        parent_chat_id: None,
        agent: None,
    });
    let ServerFrame::ChannelCreated(chat) = phone
        .request(Header::default(), create)
        .await
        .expect("created")
        .body
    else {
        panic!("expected channel.created")
    };
    let lane = Header {
        chat_id: Some(chat.chat_id.clone()),
        ..Header::default()
    };
    let echo = send_voice_to(&mut phone, lane, "v1", &wav(8_000)).await;
    let frames = until(
        &mut phone,
        |e| matches!(&e.body, ServerFrame::ChannelRenamed(r) if r.chat_id == chat.chat_id),
    )
    .await;
    let ServerFrame::ChannelRenamed(renamed) = &frames.last().unwrap().body else {
        unreachable!()
    };
    assert_eq!(renamed.name, "hello from the garden");
    let (_, t) = until_transcript(&mut phone, &echo.message_id).await;
    assert_eq!(t.transcript.state, TranscriptState::Done);
}

#[tokio::test]
async fn notes_sent_at_once_wait_their_turn_and_one_note_in_many_messages_is_heard_once() {
    let fake = Fake::start().await;
    fake.set(Mode::Sleep(Duration::from_millis(150)));
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("prompts.log");
    let gw = TestGateway::start_with(voice_gateway(&fake, &log)).await;
    let (mut phone, _) = gw.connect("phone").await;
    // Six different notes in six chats at once.
    let mut sent = Vec::new();
    for i in 0..6 {
        let chat = create_channel(&mut phone, &format!("note {i}"), None).await;
        let note = wav(8_000 + i * 100);
        let m = send_voice_to(
            &mut phone,
            Header::lane(&chat, None),
            &format!("n{i}"),
            &note,
        )
        .await;
        sent.push(m.message_id);
    }
    // One note, already heard, attached to six more messages.
    let chat = create_channel(&mut phone, "again", None).await;
    for _ in 0..6 {
        let echo = phone
            .request(
                Header::lane(&chat, None),
                ClientFrame::MessageSend(MessageSend {
                    media_refs: vec!["n0".into()],
                    ..Default::default()
                }),
            )
            .await
            .expect("sent");
        sent.push(message_id(&echo));
    }
    let mut waiting: std::collections::HashSet<String> = sent.into_iter().collect();
    while !waiting.is_empty() {
        let e = phone.next_event_timeout(FRAME_WAIT).await.expect("a frame");
        if let ServerFrame::MessageTranscript(t) = e.body {
            assert_ne!(t.transcript.state, TranscriptState::Failed, "{t:?}");
            if t.transcript.state == TranscriptState::Done {
                waiting.remove(&t.message_id);
            }
        }
    }
    assert_eq!(fake.requests().len(), 6, "each recording was sent once");
    let peak = fake.busy.lock().unwrap().1;
    assert!(
        (1..=2).contains(&peak),
        "at most two transcriptions at once, {peak} were"
    );
    gw.stop().await;
}
