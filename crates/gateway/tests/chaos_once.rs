//! Exactly once under chaos: four devices send over a thousand messages with `client_id`s to three
//! lanes while the gateway process is killed (SIGKILL) and stopped (SIGTERM) at random over twenty
//! times, and each device drops its socket at random points, syncs from its last cursor and sends
//! again whatever it has no echo for. In the end every message is stored once, run by the agent
//! once (or `interrupted`, its answer cut off), answered once, and shown once on every device.
//!
//! `IRIS_CHAOS_SEED` replays a run (the seed is printed first); `IRIS_CHAOS_MESSAGES` (per
//! device, default 300) and `IRIS_CHAOS_RESTARTS` (default 24) scale it.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::chaos_device::{dirs, end_gateway, spawn_gateway, Counts, Device, Planned, Rng};
use common::prompt_log::prompts_run;
use common::*;
use iris_client::{Client, ConnectOptions};
use iris_protocol::{
    ClientFrame, Header, HistoryRequest, Message, MessageState, Role, ServerFrame, TurnEnd,
};
use tokio::sync::watch;

/// The whole run must end within this, or the test fails saying how far it got.
const LIMIT: Duration = Duration::from_secs(100);
const DEVICES: usize = 4;

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_is_stored_run_answered_and_shown_once_through_restarts_and_drops() {
    let seed = env_number(
        "IRIS_CHAOS_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    );
    let per_device = env_number("IRIS_CHAOS_MESSAGES", 300) as usize;
    let restarts = env_number("IRIS_CHAOS_RESTARTS", 24) as usize;
    println!("IRIS_CHAOS_SEED={seed} (messages per device {per_device}, restarts {restarts})");
    let counts = Arc::new(Counts::default());
    let started = Instant::now();
    let run = chaos(seed, per_device, restarts, counts.clone());
    if tokio::time::timeout(LIMIT, run).await.is_err() {
        panic!(
            "the chaos run did not end within {LIMIT:?} (IRIS_CHAOS_SEED={seed}); so far: {counts:?}"
        );
    }
    println!("chaos run took {:.1} s", started.elapsed().as_secs_f64());
}

/// What each lane's history holds at the end, user messages by `client_id`.
struct Stored {
    users: HashMap<String, Message>,
    answers: HashMap<String, Vec<Message>>,
}

async fn chaos(seed: u64, per_device: usize, restarts: usize, counts: Arc<Counts>) {
    let tmp = tempfile::tempdir().unwrap();
    let (data, logs) = dirs(tmp.path());
    let log = logs.join("prompts.log");
    let mut rng = Rng::new(seed);
    let (mut gateway, url) = spawn_gateway(&data, &log).await;
    let lanes = lanes(&url).await;

    let (url_tx, url_rx) = watch::channel(Some(url));
    let (progress, mut progress_rx) = watch::channel(0usize);
    let progress = Arc::new(progress);
    let mut plans = Vec::new();
    let mut devices = Vec::new();
    for d in 0..DEVICES {
        let device = format!("dev{d}");
        let plan: Vec<Planned> = (0..per_device)
            .map(|i| Planned {
                lane: lanes[rng.below(lanes.len() as u64) as usize].clone(),
                text: format!("msg {d}.{i}"),
                client_id: format!("{device}/{i}"),
            })
            .collect();
        let runner = Device::new(
            device,
            url_rx.clone(),
            rng.next_u64(),
            counts.clone(),
            progress.clone(),
        );
        devices.push(tokio::spawn(runner.run(plan.clone())));
        plans.push(plan);
    }

    // Restarts spread over the run: the r-th once (r+1)/(restarts+1) of the messages are settled.
    let total = DEVICES * per_device;
    let (mut kills, mut terms) = (0, 0);
    // How long the gateway was down (ending it and starting the next one), in all.
    let mut down = Duration::ZERO;
    for r in 0..restarts {
        let target = (r + 1) * total / (restarts + 1);
        progress_rx.wait_for(|n| *n >= target).await.unwrap();
        // A moment later, not always at the same point of a device's exchange.
        let pause = rng.below(30);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let kill = rng.chance(50);
        if kill {
            kills += 1
        } else {
            terms += 1
        }
        url_tx.send_replace(None);
        let ending = Instant::now();
        end_gateway(&mut gateway, kill).await;
        let (next, url) = spawn_gateway(&data, &log).await;
        down += ending.elapsed();
        gateway = next;
        url_tx.send_replace(Some(url));
    }
    let mut finished = Vec::new();
    for device in devices {
        finished.push(device.await.expect("a device task"));
    }

    let url = url_tx.borrow().clone().expect("the last gateway runs");
    let stored = drained(&url, &lanes).await;
    for device in &mut finished {
        device.catch_up().await;
    }
    let runs = prompts_run(&log);
    let report = check(&plans, &stored, &runs, &finished);
    println!(
        "messages {}, answered {}, interrupted {}, agent runs {}, frames received {}, \
         restarts {} (KILL {kills}, TERM {terms}), connections {}, sends {}, duplicate acks {}, \
         socket drops {}, refusals {:?}, gateway down {:.1} s in all",
        total,
        report.answered,
        report.interrupted,
        runs.len(),
        report.frames,
        restarts,
        Counts::get(&counts.connections),
        Counts::get(&counts.sends),
        Counts::get(&counts.duplicate_acks),
        Counts::get(&counts.drops),
        counts.refusals.lock().unwrap(),
        down.as_secs_f64(),
    );
    end_gateway(&mut gateway, false).await;
}

/// The default channel and two new ones, as `chat_id`s.
async fn lanes(url: &str) -> Vec<String> {
    let (mut setup, _) = Client::connect(ConnectOptions::new(url, TOKEN, "setup"))
        .await
        .expect("connect");
    let mut lanes = vec!["default".to_owned()];
    for name in ["second", "third"] {
        lanes.push(create_channel(&mut setup, name, None).await);
    }
    lanes
}

/// Every message of a lane's history, oldest first, page by page.
async fn whole_history(client: &mut Client, lane: &str) -> Vec<Message> {
    let mut messages = Vec::new();
    let mut before = None;
    loop {
        let request = ClientFrame::History(HistoryRequest {
            before_message_id: before.clone(),
            limit: Some(200),
        });
        let reply = client
            .request(Header::lane(lane, None), request)
            .await
            .expect("history answered");
        let ServerFrame::History(page) = reply.body else {
            panic!("expected history, got {:?}", reply.body);
        };
        let more = page.has_more;
        before = page.oldest_message_id.clone();
        messages.splice(0..0, page.messages);
        if !more || before.is_none() {
            return messages;
        }
    }
}

/// Waits until no user message of any lane is queued or running (each `agent.idle` is a moment
/// to look again), and returns what the lanes hold then.
async fn drained(url: &str, lanes: &[String]) -> Stored {
    let (mut checker, _) = Client::connect(ConnectOptions::new(url, TOKEN, "checker"))
        .await
        .expect("connect");
    loop {
        let mut all = Vec::new();
        for lane in lanes {
            all.extend(whole_history(&mut checker, lane).await);
        }
        let busy = all.iter().any(|m| {
            m.role == Role::User
                && matches!(m.state, Some(MessageState::Queued | MessageState::Running))
        });
        if !busy {
            return stored(all);
        }
        let _ = checker
            .wait_for_timeout(
                |e| e.frame_type() == "agent.idle",
                Duration::from_millis(500),
            )
            .await;
        checker.take_seen();
    }
}

fn stored(all: Vec<Message>) -> Stored {
    let mut users: HashMap<String, Message> = HashMap::new();
    let mut answers: HashMap<String, Vec<Message>> = HashMap::new();
    for m in all {
        match m.role {
            Role::User => {
                let id = m
                    .client_id
                    .clone()
                    .expect("every user message has a client_id");
                if let Some(first) = users.insert(id.clone(), m.clone()) {
                    panic!("two stored user messages for {id}: {first:?} and {m:?}");
                }
            }
            Role::Assistant => {
                let to = m.reply_to.clone().expect("an answer replies to a message");
                answers.entry(to).or_default().push(m);
            }
            _ => {}
        }
    }
    Stored { users, answers }
}

struct Report {
    answered: usize,
    interrupted: usize,
    frames: usize,
}

/// Checks the store, the agent's runs and every device's frames against the plan.
fn check(plans: &[Vec<Planned>], stored: &Stored, runs: &[String], devices: &[Device]) -> Report {
    let mut ran: HashMap<&str, usize> = HashMap::new();
    for prompt in runs {
        *ran.entry(prompt.as_str()).or_default() += 1;
    }
    let planned: HashSet<&str> = plans.iter().flatten().map(|p| p.text.as_str()).collect();
    let strays: Vec<&&str> = ran.keys().filter(|t| !planned.contains(**t)).collect();
    assert!(
        strays.is_empty(),
        "the agent ran prompts nobody sent: {strays:?}"
    );
    assert_eq!(
        stored.users.len(),
        planned.len(),
        "one stored user message per client_id, and no other"
    );
    let (mut answered, mut interrupted) = (0, 0);
    // The final state of each user message, and its answer's id, by the user message's id.
    let mut finals: BTreeMap<String, (MessageState, Option<String>)> = BTreeMap::new();
    let mut problems = Vec::new();
    for p in plans.iter().flatten() {
        let user = stored
            .users
            .get(&p.client_id)
            .unwrap_or_else(|| panic!("{} is not stored", p.client_id));
        assert_eq!(user.text, p.text, "{}", p.client_id);
        let runs = ran.get(p.text.as_str()).copied().unwrap_or(0);
        let answers = stored
            .answers
            .get(&user.message_id)
            .map_or(&[][..], Vec::as_slice);
        let state = user.state.expect("a receipt");
        match message_problem(p, state, runs, answers) {
            Some(problem) => {
                problems.push(format!("{} {}: {problem}", p.client_id, user.message_id))
            }
            None if state == MessageState::Answered => answered += 1,
            None => interrupted += 1,
        }
        let answer = answers.first().map(|a| a.message_id.clone());
        finals.insert(user.message_id.clone(), (state, answer));
    }
    assert!(
        problems.is_empty(),
        "{} of {} messages were not stored, run and answered once:\n{}",
        problems.len(),
        finals.len(),
        problems[..problems.len().min(30)].join("\n")
    );
    let mut frames = 0;
    for device in devices {
        frames += device.frames.len();
        shown_once(device, &finals);
    }
    Report {
        answered,
        interrupted,
        frames,
    }
}

/// What is wrong with one message's end: its state, how often the agent ran it, its answers.
fn message_problem(
    p: &Planned,
    state: MessageState,
    runs: usize,
    answers: &[Message],
) -> Option<String> {
    if answers.len() > 1 {
        return Some(format!("{} answers", answers.len()));
    }
    match state {
        MessageState::Answered => {
            if runs != 1 {
                return Some(format!("answered, and the agent ran it {runs} times"));
            }
            let [answer] = answers else {
                return Some("answered without an answer".into());
            };
            if answer.ended != Some(TurnEnd::Completed)
                || answer.text != format!("Echo: {}", p.text)
            {
                return Some(format!("answered by {answer:?}"));
            }
        }
        MessageState::Interrupted => {
            if runs > 1 {
                return Some(format!("interrupted, and the agent ran it {runs} times"));
            }
            if let Some(answer) = answers.iter().find(|a| a.ended != Some(TurnEnd::CutOff)) {
                return Some(format!("interrupted, and answered by {answer:?}"));
            }
        }
        other => {
            return Some(format!(
                "ends {other:?}; the agent ran it {runs} times; answers {answers:?}"
            ))
        }
    }
    None
}

/// The `payload.message_id` of a frame, if it has one.
fn frame_message_id(event: &iris_client::Event) -> Option<String> {
    event.json()["payload"]["message_id"]
        .as_str()
        .map(str::to_owned)
}

/// A device got each final state and each answer's last frame, and nothing twice: no two distinct
/// durable frames at one cursor, no two user messages for one client_id, no two answers for one
/// user message.
fn shown_once(device: &Device, finals: &BTreeMap<String, (MessageState, Option<String>)>) {
    let who = &device.id;
    let mut at: HashMap<u64, (String, Option<String>, Option<String>)> = HashMap::new();
    let mut final_states: HashMap<String, HashSet<MessageState>> = HashMap::new();
    let mut answer_ends: HashSet<String> = HashSet::new();
    let mut users_by_client: HashMap<String, HashSet<String>> = HashMap::new();
    let mut answers_by_user: HashMap<String, HashSet<String>> = HashMap::new();
    for event in &device.frames {
        let cursor = event.cursor.expect("durable");
        let key = (
            event.frame_type().to_owned(),
            event.header.chat_id.clone(),
            frame_message_id(event),
        );
        if let Some(earlier) = at.insert(cursor, key.clone()) {
            assert_eq!(
                earlier, key,
                "{who}: two distinct frames at cursor {cursor}"
            );
        }
        match &event.body {
            ServerFrame::MessageState(s) => {
                final_states
                    .entry(s.message_id.clone())
                    .or_default()
                    .insert(s.state);
            }
            ServerFrame::MessageStop(s) => {
                answer_ends.insert(s.message_id.clone());
            }
            ServerFrame::MessageStart(s) => {
                if let Some(to) = &s.reply_to {
                    answers_by_user
                        .entry(to.clone())
                        .or_default()
                        .insert(s.message_id.clone());
                }
            }
            ServerFrame::Message(m) => {
                if let Some(state) = m.state {
                    final_states
                        .entry(m.message_id.clone())
                        .or_default()
                        .insert(state);
                }
                if let Some(id) = &m.client_id {
                    users_by_client
                        .entry(id.clone())
                        .or_default()
                        .insert(m.message_id.clone());
                }
                if m.role == Role::Assistant {
                    answer_ends.insert(m.message_id.clone());
                    if let Some(to) = &m.reply_to {
                        answers_by_user
                            .entry(to.clone())
                            .or_default()
                            .insert(m.message_id.clone());
                    }
                }
            }
            _ => {}
        }
    }
    for (client_id, ids) in &users_by_client {
        assert_eq!(
            ids.len(),
            1,
            "{who}: two user messages for {client_id}: {ids:?}"
        );
    }
    for (user, ids) in &answers_by_user {
        assert_eq!(ids.len(), 1, "{who}: two answers to {user}: {ids:?}");
    }
    for (user, (state, answer)) in finals {
        assert!(
            final_states.get(user).is_some_and(|s| s.contains(state)),
            "{who} never got {user}'s final state {state:?}: {:?}",
            final_states.get(user)
        );
        if let Some(answer) = answer {
            assert!(
                answer_ends.contains(answer),
                "{who} never got the end of {user}'s answer {answer}"
            );
        }
    }
}
