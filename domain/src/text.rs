//! Bounded text: truncation that never splits a UTF-8 character, and short
//! excerpts of remote bodies. One rule for every message the operator copies
//! from elsewhere (a provider's answer, an error's text) into a status, an
//! error or a log line: cut on a character boundary, say so with `…`.

/// Appended to text that was cut short, so a reader knows it was.
const ELLIPSIS: char = '…';

/// Cuts `s` to at most `max_bytes` bytes on a character boundary, ending with
/// `…` when something was cut. Channels such as WeCom count their limits in
/// bytes, and a request whose body is not valid UTF-8 is rejected, so a naive
/// byte slice is not an option.
pub fn truncate_bytes(s: &str, max_bytes: usize) -> String {
    if s.len() <= max_bytes {
        return s.to_owned();
    }
    let budget = max_bytes.saturating_sub(ELLIPSIS.len_utf8());
    let mut end = budget;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::with_capacity(end + ELLIPSIS.len_utf8());
    out.push_str(&s[..end]);
    if max_bytes >= ELLIPSIS.len_utf8() {
        out.push(ELLIPSIS);
    }
    out
}

/// Cuts `s` to at most `max_chars` characters, ending with `…` when something
/// was cut. Slack counts its block limits in characters.
pub fn truncate_chars(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        None => s.to_owned(),
        Some(_) => {
            let keep = max_chars.saturating_sub(1);
            let mut out: String = s.chars().take(keep).collect();
            if max_chars > 0 {
                out.push(ELLIPSIS);
            }
            out
        }
    }
}

/// At most this many characters of a remote body go into an error message.
pub const EXCERPT_CHARS: usize = 200;

/// A short, single-line, printable excerpt of a (possibly binary, possibly
/// huge) body for error messages: lossy UTF-8, control characters flattened
/// to spaces, at most [`EXCERPT_CHARS`] characters.
pub fn excerpt(body: &[u8]) -> String {
    // Decode a little more than needed: enough for 200 characters of 4 bytes.
    let head = &body[..body.len().min(EXCERPT_CHARS * 4 + 4)];
    let text = String::from_utf8_lossy(head);
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    truncate_chars(flat.trim(), EXCERPT_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_bytes_respects_char_boundaries() {
        let s = "漏洞".repeat(10); // 3 bytes per char
        let t = truncate_bytes(&s, 10);
        assert!(t.len() <= 10, "{} bytes", t.len());
        assert!(t.ends_with('…'));
        assert_eq!(t, "漏洞…"); // 6 bytes + 3 bytes of ellipsis
        assert_eq!(truncate_bytes("short", 10), "short");
    }

    #[test]
    fn truncate_chars_counts_chars() {
        assert_eq!(truncate_chars("abcdef", 4), "abc…");
        assert_eq!(truncate_chars("abcd", 4), "abcd");
        assert_eq!(truncate_chars("ééééé", 3).chars().count(), 3);
    }

    #[test]
    fn excerpt_is_bounded_and_single_line() {
        let body = format!("line1\nline2\r\n{}", "x".repeat(10_000));
        let e = excerpt(body.as_bytes());
        assert!(e.chars().count() <= EXCERPT_CHARS);
        assert!(!e.contains('\n'));
        assert!(e.starts_with("line1 line2"));
        assert_eq!(excerpt(&[0xff, 0xfe, b'o', b'k']), "\u{fffd}\u{fffd}ok");
    }
}
