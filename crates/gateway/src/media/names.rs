//! Names and types of media: display names that are never paths, MIME types and kinds as the
//! gateway trusts them, and the wire description of a stored file.

use iris_protocol::MediaInfo;
use iris_store::MediaRow;

/// The wire description of a stored media row.
pub fn info(row: &MediaRow) -> MediaInfo {
    MediaInfo {
        media_id: row.media_id.clone(),
        kind: row.kind.clone(),
        mime: row.mime.clone(),
        size: row.size,
        filename: row.filename.clone(),
        voice: row.voice,
    }
}

/// Longest display name kept, in bytes.
const MAX_NAME: usize = 255;

/// A display name from whatever the app or the agent called a file: the last path component,
/// without control or format characters (a right-to-left override would show `a\u{202E}txt.exe`
/// as `aexe.txt`), at most 255 bytes (keeping a short extension), never empty, `.`
/// or `..`. It is only ever shown, never used as a path.
pub fn display_name(raw: &str, fallback: &str) -> String {
    let last = raw.rsplit(['/', '\\']).next().unwrap_or("");
    let cleaned: String = crate::text::without_format(last)
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    let cleaned = cleaned.trim();
    if cleaned.is_empty() || cleaned.chars().all(|c| c == '.') {
        return fallback.to_owned();
    }
    if cleaned.len() <= MAX_NAME {
        return cleaned.to_owned();
    }
    let ext = cleaned
        .rsplit_once('.')
        .map(|(_, e)| e)
        .filter(|e| !e.is_empty() && e.len() <= 16);
    let keep = MAX_NAME - ext.map_or(0, |e| e.len() + 1);
    let mut stem_end = keep.min(cleaned.len());
    while !cleaned.is_char_boundary(stem_end) {
        stem_end -= 1;
    }
    let stem = &cleaned[..stem_end];
    match ext {
        Some(e) => format!("{stem}.{e}"),
        None => stem.to_owned(),
    }
}

/// A MIME type as given, when it looks like one (`type/subtype`, visible ASCII), else
/// `application/octet-stream`.
pub fn clean_mime(raw: &str) -> String {
    let m = raw.trim().to_ascii_lowercase();
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    let ok = m.len() <= 127 && m.split_once('/').is_some_and(|(t, s)| token(t) && token(s));
    if ok {
        m
    } else {
        "application/octet-stream".into()
    }
}

/// Raster image types a browser or an app may show inline. Nothing else is ever an `image`: SVG
/// and HTML can carry scripts, so they are files, offered for download.
const RASTER: &[&str] = &[
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "image/bmp",
    "image/avif",
    "image/heif",
    "image/tiff",
    "image/jxl",
    "image/vnd.microsoft.icon",
];

/// Whether a MIME type is one of the raster image types shown inline.
pub fn is_raster(mime: &str) -> bool {
    RASTER.contains(&mime)
}

/// The kind and MIME type of stored content, from its first bytes (see
/// [`super::files::HEAD_LEN`]), never from what the sender claimed: `image` only for a raster
/// image the magic bytes prove, `video` and `audio` only for recognized containers, else `file`.
/// Recognized content gets the MIME type of what it is; otherwise the declared type is kept
/// unless it claims to be an image, video or audio (`application/octet-stream` then).
pub fn recognize(declared_mime: &str, head: &[u8]) -> (&'static str, String) {
    use infer::MatcherType;
    if let Some(found) = infer::get(head) {
        let mime = found.mime_type();
        let kind = match found.matcher_type() {
            MatcherType::Image if is_raster(mime) => "image",
            MatcherType::Video => "video",
            MatcherType::Audio => "audio",
            _ => "file",
        };
        return (kind, mime.to_owned());
    }
    let claims_media = matches!(kind_of(declared_mime), "image" | "video" | "audio");
    let mime = match claims_media {
        true => "application/octet-stream".to_owned(),
        false => declared_mime.to_owned(),
    };
    ("file", mime)
}

/// The kind a MIME type implies.
pub fn kind_of(mime: &str) -> &'static str {
    match mime.split('/').next().unwrap_or("") {
        "image" => "image",
        "video" => "video",
        "audio" => "audio",
        _ => "file",
    }
}

/// A MIME type guessed from a file name's extension.
pub fn mime_from_name(name: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "heic" => "image/heic",
        "svg" => "image/svg+xml",
        "mp4" | "m4v" => "video/mp4",
        "mov" => "video/quicktime",
        "webm" => "video/webm",
        "mp3" => "audio/mpeg",
        "m4a" => "audio/mp4",
        "ogg" | "oga" | "opus" => "audio/ogg",
        "wav" => "audio/wav",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "json" => "application/json",
        "txt" | "log" => "text/plain",
        "md" => "text/markdown",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        _ => "application/octet-stream",
    }
}

/// The usual file extension of a MIME type, for naming content that came without a name.
pub fn extension_of(mime: &str) -> &'static str {
    match mime {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/mpeg" => "mp3",
        "audio/wav" | "audio/x-wav" => "wav",
        "audio/ogg" => "ogg",
        "audio/x-flac" | "audio/flac" => "flac",
        "audio/aac" => "aac",
        "audio/m4a" | "audio/mp4" => "m4a",
        "audio/webm" => "webm",
        "video/mp4" => "mp4",
        "application/pdf" => "pdf",
        "application/json" => "json",
        "text/plain" => "txt",
        "text/markdown" => "md",
        _ => "bin",
    }
}

/// A reference shortened for an error message.
pub(crate) fn short(s: &str) -> String {
    s.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_never_carry_a_path() {
        assert_eq!(display_name("../../etc/passwd", "file"), "passwd");
        assert_eq!(display_name("C:\\Windows\\win.ini", "file"), "win.ini");
        assert_eq!(display_name("..", "file"), "file");
        assert_eq!(display_name("a/b/", "file"), "file");
        assert_eq!(display_name("nul\u{0}by\nte.txt", "file"), "nulbyte.txt");
        let long = format!("{}.png", "é".repeat(5000));
        let name = display_name(&long, "file");
        assert!(name.len() <= 255 && name.ends_with(".png"), "{name}");
    }

    #[test]
    fn mime_and_kind_are_cleaned() {
        assert_eq!(clean_mime("Image/PNG"), "image/png");
        assert_eq!(
            clean_mime("text/plain; charset=utf-8"),
            "application/octet-stream"
        );
        assert_eq!(clean_mime("nonsense"), "application/octet-stream");
        assert_eq!(mime_from_name("a.JPG"), "image/jpeg");
    }

    #[test]
    fn kinds_come_from_the_bytes_not_the_claim() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        assert_eq!(recognize("image/png", png), ("image", "image/png".into()));
        assert_eq!(
            recognize("application/pdf", png),
            ("image", "image/png".into())
        );
        let svg = b"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>";
        assert_eq!(
            recognize("image/svg+xml", svg),
            ("file", "application/octet-stream".into())
        );
        let html = b"<!DOCTYPE html><html><script>alert(1)</script></html>";
        assert_eq!(recognize("image/png", html).0, "file");
        assert_ne!(recognize("image/png", html).1, "image/png");
        assert_eq!(
            recognize("text/plain", b"hello"),
            ("file", "text/plain".into())
        );
        assert_eq!(
            recognize("video/mp4", b"not a video"),
            ("file", "application/octet-stream".into())
        );
        let mp4 = b"\0\0\0\x18ftypmp42\0\0\0\0mp42isom";
        assert_eq!(recognize("application/octet-stream", mp4).0, "video");
    }
}
