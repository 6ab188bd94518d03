//! Offsets in a TOML string's value put back on the string as written: a basic string
//! (`"..."`, escapes such as `\"`, `\n`, `\u00e9` one character of the value each), a literal
//! one (`'...'`), and their multi-line forms (`"""..."""`, `'''...'''`: the newline right
//! after the opening quotes is not part of the value, nor, in the basic form, a backslash at
//! the end of a line with the blanks and newlines after it).
//!
//! The string is decoded again here, each character of the value with its place; when that
//! does not give the value the parser gave (a form these rules miss), no offset is given.

/// The byte offset in `written` (a string as the file has it, quotes included) of byte `at`
/// of its value `value`; the closing quotes for the value's end. `None` when `written` is
/// not a string whose value is `value`, or `at` is past its end.
pub(super) fn value_offset(written: &str, value: &str, at: usize) -> Option<usize> {
    let (chars, end) = decode(written)?;
    if !chars.iter().map(|(_, c)| *c).eq(value.chars()) {
        return None;
    }
    let mut decoded = 0;
    for (source, c) in chars {
        decoded += c.len_utf8();
        if at < decoded {
            return Some(source);
        }
    }
    (at == decoded).then_some(end)
}

/// The characters of the value of the string `written`, each with its offset in it, and the
/// offset of its closing quotes.
fn decode(written: &str) -> Option<(Vec<(usize, char)>, usize)> {
    let quotes = ["\"\"\"", "'''", "\"", "'"]
        .into_iter()
        .find(|q| written.starts_with(q) && written.len() >= 2 * q.len() && written.ends_with(q))?;
    let multi_line = quotes.len() == 3;
    let escapes = quotes.starts_with('"');
    let end = written.len() - quotes.len();
    let mut i = quotes.len();
    if multi_line {
        i += ["\n", "\r\n"]
            .into_iter()
            .find(|nl| written[i..].starts_with(nl))
            .map_or(0, str::len);
    }
    let mut chars = Vec::new();
    while i < end {
        let c = written[i..].chars().next()?;
        if !(escapes && c == '\\') {
            chars.push((i, c));
            i += c.len_utf8();
            continue;
        }
        match escape(&written[i + 1..end], multi_line)? {
            Escape::Char(decoded, len) => {
                chars.push((i, decoded));
                i += 1 + len;
            }
            Escape::LineEnd(len) => i += 1 + len,
        }
    }
    Some((chars, end))
}

/// What follows a backslash in a basic string.
enum Escape {
    /// One character, written in this many bytes after the backslash.
    Char(char, usize),
    /// A line-ending backslash: this many bytes of blanks and newlines after it are skipped.
    LineEnd(usize),
}

/// The escape that `rest` (the text after a backslash) begins with.
fn escape(rest: &str, multi_line: bool) -> Option<Escape> {
    let simple = |c: char| Some(Escape::Char(c, 1));
    match rest.chars().next()? {
        'b' => simple('\u{8}'),
        't' => simple('\t'),
        'n' => simple('\n'),
        'f' => simple('\u{c}'),
        'r' => simple('\r'),
        'e' => simple('\u{1b}'),
        '"' => simple('"'),
        '\\' => simple('\\'),
        'x' => hex(rest, 2),
        'u' => hex(rest, 4),
        'U' => hex(rest, 8),
        c if multi_line && c.is_whitespace() => {
            let blank = rest
                .find(|c: char| !c.is_whitespace())
                .unwrap_or(rest.len());
            rest[..blank]
                .contains('\n')
                .then_some(Escape::LineEnd(blank))
        }
        _ => None,
    }
}

/// The character of the `digits` hexadecimal digits after the letter starting `rest`.
fn hex(rest: &str, digits: usize) -> Option<Escape> {
    let code = u32::from_str_radix(rest.get(1..1 + digits)?, 16).ok()?;
    Some(Escape::Char(char::from_u32(code)?, 1 + digits))
}

#[cfg(test)]
mod tests {
    use super::value_offset;

    #[test]
    fn offsets_follow_escapes_and_the_end_is_the_closing_quotes() {
        let written = r#""a\U0001F600b\\""#;
        let value = "a\u{1F600}b\\";
        assert_eq!(value_offset(written, value, 0), Some(1));
        assert_eq!(value_offset(written, value, 1), Some(2));
        assert_eq!(
            value_offset(written, value, 3),
            Some(2),
            "within a character"
        );
        assert_eq!(value_offset(written, value, 5), Some(12));
        assert_eq!(value_offset(written, value, 6), Some(13));
        assert_eq!(value_offset(written, value, 7), Some(15));
        assert_eq!(value_offset(written, value, 8), None);
    }

    #[test]
    fn a_string_that_does_not_decode_to_the_value_gives_no_offset() {
        assert_eq!(value_offset(r#""a\qb""#, "aqb", 2), None);
        assert_eq!(value_offset(r#""ab""#, "abc", 1), None);
        assert_eq!(value_offset("3", "3", 0), None);
        assert_eq!(value_offset("'''\nx'''", "x", 0), Some(4));
    }
}
