//! A condition's syntax: the language's tree, with what the language lets through but a
//! condition may not hold refused, and where a text that is not an expression goes wrong.
//!
//! The language (`evalexpr`) says what is wrong but never where. The place is found by
//! cutting the text after each of its tokens: a cut is a possible start of an expression
//! when it parses as it is, with one operand added, and with its open parentheses closed.
//! The culprit is the first token whose cut is no such start (found by bisection: a text that
//! cannot start an expression cannot once longer). When every cut can, the text ends early:
//! the error is at its end, or at its last open parenthesis when closing it is all it needs.
//! The limit: one operand (`1`) is the only completion tried, so a text the language would
//! accept only with another one (a function's second argument after a `,` at the end, say)
//! is reported at its end rather than at an earlier token.

use crate::rewrite::VAR_PREFIX;
use evalexpr::{Node, Operator};
use std::ops::Range;

/// The characters that make up operators (`>=`, `&&`, `!`, ...): a run of them is one token.
const OPERATOR_CHARS: &str = "+-*/%^=!<>&|";

/// Parses `text` as the language does, refusing what it would only find at evaluation.
///
/// # Errors
///
/// The language's message, or what is malformed.
pub(crate) fn tree(text: &str) -> Result<Node, String> {
    let tree = evalexpr::build_operator_tree(text).map_err(|e| e.to_string())?;
    match malformed(&tree) {
        Some(message) => Err(message),
        None => Ok(tree),
    }
}

/// What the language would only find at evaluation: an operator short of operands (it
/// builds `a ==` without complaint), an assignment (a condition changes nothing), or a
/// reference called as a function (`params.n 3` is a call to the language).
fn malformed(node: &Node) -> Option<String> {
    let op = node.operator();
    let wanted = match op {
        Operator::FunctionIdentifier { identifier } if identifier.starts_with(VAR_PREFIX) => {
            return Some("a reference is not a function".to_owned())
        }
        Operator::Not | Operator::Neg | Operator::FunctionIdentifier { .. } => Some(1),
        Operator::RootNode | Operator::Tuple | Operator::Chain => None,
        Operator::Const { .. } | Operator::VariableIdentifierRead { .. } => Some(0),
        Operator::VariableIdentifierWrite { .. } => return Some("it assigns".to_owned()),
        _ => Some(2),
    };
    let given = node.children().len();
    if wanted.is_some_and(|n| n != given) {
        return Some(format!(
            "`{op}` takes {} operand(s), given {given}",
            wanted.unwrap_or(0)
        ));
    }
    node.children().iter().find_map(malformed)
}

/// Where `text`, which [`tree`] refuses, goes wrong: a byte offset in it and what is wrong
/// there.
pub(crate) fn culprit(text: &str) -> (usize, String) {
    let tokens = tokens(text);
    let first_bad = tokens.partition_point(|t| can_start(&text[..t.end]));
    if let Some(token) = tokens.get(first_bad) {
        let written = &text[token.clone()];
        let message = match written {
            ")" => "`)` closes nothing".to_owned(),
            "=" | "+=" | "-=" | "*=" | "/=" | "%=" | "^=" | "&&=" | "||=" => {
                format!("`{written}` assigns: a condition compares (`==`)")
            }
            _ if written.starts_with('"') && closed_string(written).is_none() => {
                "the string is not closed".to_owned()
            }
            _ => format!("`{written}` cannot come here"),
        };
        return (token.start, message);
    }
    let (open, _) = parentheses(text);
    if let (Some(&last), true) = (open.last(), parses(text, "", open.len())) {
        return (last, "`(` is not closed".to_owned());
    }
    (
        text.len(),
        "it ends early: an operand is missing".to_owned(),
    )
}

/// Whether `prefix` is the start of some expression (see the module's documentation).
fn can_start(prefix: &str) -> bool {
    let (open, closes_nothing) = parentheses(prefix);
    closes_nothing.is_none() && ["", " 1"].iter().any(|c| parses(prefix, c, open.len()))
}

/// Whether `prefix`, then `completion`, then `open` closing parentheses, is an expression.
fn parses(prefix: &str, completion: &str, open: usize) -> bool {
    tree(&format!("{prefix}{completion}{}", ")".repeat(open))).is_ok()
}

/// The tokens of `text` as byte ranges: string literals, parentheses, `,`, `;`, runs of
/// operator characters, and runs of anything else but spaces (names, numbers).
pub(crate) fn tokens(text: &str) -> Vec<Range<usize>> {
    let mut tokens = Vec::new();
    let mut i = 0;
    while let Some(c) = text[i..].chars().next() {
        let rest = &text[i..];
        let len = match c {
            '"' => string_end(rest),
            '(' | ')' | ',' | ';' => 1,
            c if OPERATOR_CHARS.contains(c) => run(rest, |c| OPERATOR_CHARS.contains(c)),
            c if c.is_whitespace() => {
                i += c.len_utf8();
                continue;
            }
            _ => run(rest, |c| {
                !(c.is_whitespace() || OPERATOR_CHARS.contains(c) || "\"(),;".contains(c))
            }),
        };
        tokens.push(i..i + len);
        i += len;
    }
    tokens
}

/// The length of the run of characters `within` at the start of `rest`.
fn run(rest: &str, within: impl Fn(char) -> bool) -> usize {
    rest.find(|c: char| !within(c)).unwrap_or(rest.len())
}

/// The offsets of the parentheses of `text` left open, and of its first `)` that closes
/// nothing (when there is one, the parentheses open before it).
fn parentheses(text: &str) -> (Vec<usize>, Option<usize>) {
    let mut open = Vec::new();
    for token in tokens(text) {
        match &text[token.clone()] {
            "(" => open.push(token.start),
            ")" if open.pop().is_none() => return (open, Some(token.start)),
            _ => {}
        }
    }
    (open, None)
}

/// The length of a string literal at the start of `rest` (`\` escapes), or all of it.
pub(crate) fn string_end(rest: &str) -> usize {
    closed_string(rest).unwrap_or(rest.len())
}

/// The length of a string literal at the start of `rest`, if it is closed.
fn closed_string(rest: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in rest.char_indices().skip(1) {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return Some(i + 1),
            _ => escaped = false,
        }
    }
    None
}
