//! ntfy: a POST of the push text to `<server>/<topic>`, with the title, priority, tags, click
//! target, sequence id and, for a push with buttons, ntfy `http` actions in headers.

use base64::Engine;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION};
use reqwest::Url;

use super::outcome::Outcome;
use super::outcome::{classify_response, transport_error, Rules};
use super::policy::PushContent;
use crate::config::push::NtfyConfig;

/// How ntfy's answers are read: a topic is never gone (anyone may publish to any topic), and
/// the error bodies are not read.
pub(crate) const RULES: Rules = Rules {
    service: "ntfy",
    gone: &[],
    gone_codes: &[],
    gone_if_named: &[],
    retry: &[],
    retry_every_failure: false,
    read_body: None,
};

/// The ntfy backend: one server, an optional access token.
pub struct Ntfy {
    http: reqwest::Client,
    server: String,
    token: Option<String>,
}

impl Ntfy {
    pub(crate) fn new(cfg: &NtfyConfig, http: reqwest::Client) -> Ntfy {
        Ntfy {
            http,
            server: cfg.server.clone(),
            token: cfg.token.clone(),
        }
    }

    /// Publishes one push to a topic.
    pub(crate) async fn send(&self, topic: &str, push: &PushContent) -> Outcome {
        // ntfy topics are 1-64 of these characters; anything else is a bad registration.
        if topic.is_empty()
            || topic.len() > 64
            || !topic
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Outcome::Rejected("the ntfy topic is not a valid topic name".into());
        }
        let Ok(mut url) = Url::parse(&self.server) else {
            return Outcome::Rejected("the ntfy server is not a URL".into());
        };
        match url.path_segments_mut() {
            Ok(mut segments) => {
                segments.pop_if_empty().push(topic);
            }
            Err(()) => return Outcome::Rejected("the ntfy server is not a URL".into()),
        }
        let mut request = self
            .http
            .post(url)
            .headers(headers(push))
            .body(push.body.clone());
        if let Some(Ok(mut value)) = self
            .token
            .as_ref()
            .map(|t| HeaderValue::from_str(&format!("Bearer {t}")))
        {
            value.set_sensitive(true);
            request = request.header(AUTHORIZATION, value);
        }
        match request.send().await {
            Ok(response) => classify_response(response, &RULES).await,
            Err(e) => transport_error(&RULES, e),
        }
    }
}

/// `Title`, `Priority`, `Tags`, `Click` and `X-Sequence-ID`.
fn headers(push: &PushContent) -> HeaderMap {
    let mut h = HeaderMap::new();
    let mut put = |name: &'static str, value: &str| {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(HeaderName::from_static(name), v);
        }
    };
    put("title", &header_text(&push.title));
    put(
        "priority",
        if push.kind.needs_action() {
            "high"
        } else {
            "default"
        },
    );
    put("tags", push.kind.ntfy_tag());
    put("click", click_url(push).as_str());
    // Pushes of one lane share a sequence id, so a newer one (or a resend) replaces the older.
    put("x-sequence-id", &push.collapse_key);
    if let Some(actions) = actions_header(push) {
        put("actions", &actions);
    }
    h
}

/// Most actions ntfy shows on one notification.
const NTFY_MAX_ACTIONS: usize = 3;

/// ntfy's `Actions` header for a push with buttons: one `http` action per choice, which the ntfy
/// app sends itself (`POST <public_url>/v1/actions` with the token and the choice as JSON) and
/// then clears the notification. None when there are more choices than ntfy shows: offering
/// some of a question's answers would be a different question.
///
/// The labels and values come from the agent, so nothing in them may end a field or an action:
/// labels keep only printable ASCII other than `,;'"`, and the body, a quoted field, has its
/// single quotes escaped as JSON does (`\u0027`).
pub fn actions_header(push: &PushContent) -> Option<String> {
    let action = push.action.as_ref()?;
    if action.choices.len() > NTFY_MAX_ACTIONS || action.url.contains([',', ';', '\'', '"']) {
        return None;
    }
    let fields: Vec<String> = action
        .choices
        .iter()
        .map(|(value, label)| {
            let label: String = label
                .chars()
                .filter(|c| c.is_ascii_graphic() || *c == ' ')
                .filter(|c| !matches!(c, ',' | ';' | '\'' | '"'))
                .collect();
            let label = match label.trim() {
                "" => "Answer",
                l => l,
            };
            let body = serde_json::json!({"token": action.token, "value": value})
                .to_string()
                .replace('\'', "\\u0027");
            format!(
                "http, {label}, {}, method=POST, headers.content-type=application/json, body='{body}', clear=true",
                action.url
            )
        })
        .collect();
    Some(fields.join("; "))
}

/// Header values must be ASCII: other text goes as an RFC 2047 encoded word, which ntfy decodes.
pub fn header_text(text: &str) -> String {
    let clean: String = text.chars().filter(|c| !c.is_control()).collect();
    if clean.is_ascii() {
        return clean;
    }
    format!(
        "=?UTF-8?B?{}?=",
        base64::engine::general_purpose::STANDARD.encode(clean.as_bytes())
    )
}

/// The app link opened when the notification is tapped:
/// `iris://open?chat_id=…&thread_id=…&message_id=…&cursor=…` (absent ids are left out).
pub fn click_url(push: &PushContent) -> Url {
    let cursor = push.cursor.to_string();
    let params = [
        ("chat_id", push.chat_id.as_deref()),
        ("thread_id", push.thread_id.as_deref()),
        ("message_id", push.message_id.as_deref()),
        ("cursor", Some(cursor.as_str())),
    ];
    Url::parse_with_params(
        "iris://open",
        params.iter().filter_map(|(k, v)| v.map(|v| (*k, v))),
    )
    .unwrap_or_else(|_| Url::parse("iris://open").expect("a constant URL"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_ascii_titles_become_encoded_words() {
        assert_eq!(header_text("Approval needed"), "Approval needed");
        assert_eq!(
            header_text("Hermes replied in Küche"),
            "=?UTF-8?B?SGVybWVzIHJlcGxpZWQgaW4gS8O8Y2hl?="
        );
    }
}
