//! Text meant for a terminal. Process names, command lines, paths and symbol names come from
//! other users' processes and files; written raw to root's terminal, an escape sequence in
//! one of them could retitle the window, hide lines or, on some terminals, inject input.

use std::borrow::Cow;

/// `text` with every control character but newline and tab (C0, DEL, C1) shown as an escape
/// (`\x1b`, `\u{9b}`); invalid UTF-8 becomes U+FFFD.
pub(crate) fn safe(text: &[u8]) -> Cow<'_, str> {
    let text = String::from_utf8_lossy(text);
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            c if !unsafe_char(c) => out.push(c),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_shown_not_sent() {
        assert_eq!(safe(b"plain\ttext\n"), "plain\ttext\n");
        assert_eq!(safe(b"\x1b[31mEVIL\x07\r"), "\\x1b[31mEVIL\\x07\\x0d");
        assert_eq!(safe("csi \u{9b}2J".as_bytes()), "csi \\u{9b}2J");
        assert_eq!(safe(b"bad \xff utf8"), "bad \u{fffd} utf8");
    }
}
