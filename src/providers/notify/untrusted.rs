//! Text a tenant (package strings, names) or a provider (OSV summaries and
//! ids, the reasons built from them) controls, made inert for a chat
//! channel's markup: shown as written, never as a link, a mention or
//! formatting. Every chat line is built from such text, so each channel
//! escapes whole lines; only its own template adds markup.

/// URLs with a scheme lose it (`https://x` reads `https[://]x`), the way
/// security tools defang indicators: no client turns them into a link.
fn defang_urls(text: &str) -> String {
    text.replace("://", "[://]")
}

/// Line breaks (Unicode's line and paragraph separators too) and other
/// control characters become spaces: a string cannot start a line of its
/// own (a heading, a quote). Bidirectional controls (embeddings,
/// overrides, isolates, marks) become U+FFFD: they would reorder what the
/// reader sees (`\u{202E}` shows `cba` for `abc`), so their place is
/// shown instead.
fn one_line(text: &str) -> impl Iterator<Item = char> + '_ {
    text.chars().map(|c| match c {
        '\u{2028}' | '\u{2029}' => ' ',
        '\u{061C}'
        | '\u{200E}'
        | '\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}' => '\u{FFFD}',
        c if c.is_control() => ' ',
        c => c,
    })
}

/// Slack's mrkdwn: `&`, `<` and `>` as entities, which covers `<URL|text>`
/// links and `<@U…>`, `<!channel>` mentions; one line; then URLs defanged.
pub(super) fn slack(text: &str) -> String {
    let escaped: String = one_line(text)
        .map(|c| match c {
            '&' => "&amp;".to_owned(),
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            c => c.to_string(),
        })
        .collect();
    defang_urls(&escaped)
}

/// For markdown with no escape character every client honours (WeCom's;
/// the subset Adaptive Cards render in Microsoft Teams), each character
/// read as markup (`[text](url)` links, `<@userid>` mentions, `<font>` tags,
/// `**bold**`, `` `code` ``, `#` headings, `>` quotes, entities) becomes
/// its full-width form, which reads the same and means nothing; line breaks
/// become spaces, so a string cannot start a heading or a quote line. URLs
/// are defanged first, so that the defang's brackets are full-width too.
pub(super) fn full_width_markup(text: &str) -> String {
    let defanged = defang_urls(text);
    one_line(&defanged)
        .map(|c| match c {
            '<' => '＜',
            '>' => '＞',
            '[' => '［',
            ']' => '］',
            '(' => '（',
            ')' => '）',
            '*' => '＊',
            '`' => '｀',
            '#' => '＃',
            '&' => '＆',
            '_' => '＿',
            '~' => '～',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_becomes_text() {
        assert_eq!(
            slack("<!channel> <https://evil.example|x> & http://a.b\n> q"),
            "&lt;!channel&gt; &lt;https[://]evil.example|x&gt; &amp; http[://]a.b &gt; q"
        );
        assert_eq!(
            full_width_markup("[x](https://e.example) <@all>\n# h **b** `c` &lt;"),
            "［x］（https［://］e.example） ＜@all＞ ＃ h ＊＊b＊＊ ｀c｀ ＆lt;"
        );
        assert_eq!(
            full_width_markup("pkg:pypi/requests@2.31.0"),
            "pkg:pypi/requests@2.31.0"
        );
    }

    #[test]
    fn unicode_line_breaks_and_direction_controls_are_neutralised() {
        // U+2028 and U+2029 end a line in many clients; U+202E shows what
        // follows reversed, U+2066..U+2069 isolate, U+200E/F mark.
        let text = "a\u{2028}# b\u{2029}> c \u{202E}lmx.exe\u{202C} \u{2066}d\u{2069}\u{200F}";
        assert_eq!(
            full_width_markup(text),
            "a ＃ b ＞ c \u{FFFD}lmx.exe\u{FFFD} \u{FFFD}d\u{FFFD}\u{FFFD}"
        );
        assert_eq!(
            slack(text),
            "a # b &gt; c \u{FFFD}lmx.exe\u{FFFD} \u{FFFD}d\u{FFFD}\u{FFFD}"
        );
    }
}
