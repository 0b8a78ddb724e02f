//! Gateway commands and pickers in a turn, as a device sees them.

use iris_client::{Client, Event};
use iris_protocol::{Role, ServerFrame};

use super::{default_lane, send};

/// Sends a gateway command and returns frames up to its system reply.
pub async fn turn_command(client: &mut Client, text: &str) -> Vec<Event> {
    send(client, default_lane(), text, false).await;
    let mut out = Vec::new();
    loop {
        let e = client.next_event().await.expect("command reply");
        let done = matches!(&e.body, ServerFrame::Message(m) if m.role == Role::System)
            || e.frame_type().starts_with("picker.");
        out.push(e);
        if done {
            return out;
        }
    }
}

pub async fn picker_id(client: &mut Client, ty: &str) -> (String, Event) {
    let e = client
        .wait_for(|e| e.frame_type() == ty)
        .await
        .expect("picker");
    let id = e.json()["payload"]["picker_id"]
        .as_str()
        .unwrap()
        .to_owned();
    (id, e)
}
