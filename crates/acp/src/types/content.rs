//! Content blocks: what prompts, message chunks and tool calls carry.

use serde::{Deserialize, Serialize};

tagged_union! {
    /// A piece of content in a prompt, a message chunk or a tool call.
    pub enum ContentBlock, tag = "type" {
        /// Plain text (Markdown by convention).
        Text(TextContent) = "text",
        /// A base64-encoded image.
        Image(ImageContent) = "image",
        /// A base64-encoded audio clip.
        Audio(AudioContent) = "audio",
        /// A reference to a file the agent can read itself.
        ResourceLink(ResourceLink) = "resource_link",
        /// A file's contents embedded in the message.
        Resource(EmbeddedResource) = "resource",
    }
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock::Text(TextContent { text: text.into() })
    }

    /// An image block from base64 data.
    pub fn image(data_base64: impl Into<String>, mime_type: impl Into<String>) -> ContentBlock {
        ContentBlock::Image(ImageContent {
            data: data_base64.into(),
            mime_type: mime_type.into(),
            uri: None,
        })
    }

    /// A link to a file on the agent's disk (a `file://` URI).
    pub fn resource_link(uri: impl Into<String>, name: impl Into<String>) -> ContentBlock {
        ContentBlock::ResourceLink(ResourceLink {
            uri: uri.into(),
            name: name.into(),
            mime_type: None,
            size: None,
            title: None,
            description: None,
        })
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text(t) => Some(&t.text),
            _ => None,
        }
    }
}

/// `{"type":"text"}` content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextContent {
    /// The text.
    pub text: String,
}

/// `{"type":"image"}` content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageContent {
    /// Base64-encoded bytes.
    pub data: String,
    /// e.g. `image/png`.
    pub mime_type: String,
    /// Where the image came from, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
}

/// `{"type":"audio"}` content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AudioContent {
    /// Base64-encoded bytes.
    pub data: String,
    /// e.g. `audio/wav`.
    pub mime_type: String,
}

/// `{"type":"resource_link"}` content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceLink {
    /// Usually a `file://` URI.
    pub uri: String,
    /// The file name shown to people.
    pub name: String,
    /// The media type, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Size in bytes, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// A display title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `{"type":"resource"}` content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddedResource {
    /// The embedded contents.
    pub resource: ResourceContents,
}

/// Contents of an embedded resource: text or a base64 blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceContents {
    /// The resource's URI.
    pub uri: String,
    /// The media type, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Text contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Base64-encoded binary contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}
