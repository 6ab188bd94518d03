//! A condition's text as the language reads it: each reference replaced by a variable (a
//! step's name may hold `-` or `[`, which the language would read as operators), with the
//! way back from an offset in that text to one in the text as written.

use crate::expr::ExprError;
use crate::syntax::{string_end, tokens};
use crate::Ref;

/// How the variable a reference is handed to the language as begins.
pub(crate) const VAR_PREFIX: &str = "__apollo11_ref_";

/// The variable a reference is handed to the language as.
pub(crate) fn var(i: usize) -> String {
    format!("{VAR_PREFIX}{i}")
}

/// A condition's text with its references replaced.
pub(crate) struct Rewritten {
    /// The text the language reads.
    pub(crate) text: String,
    /// The references, in order, each with its byte offset in the text as written.
    pub(crate) refs: Vec<(usize, Ref)>,
    /// Each reference's length as written, and the offset of its variable in `text`.
    spans: Vec<(usize, usize)>,
}

impl Rewritten {
    /// The offset in the text as written of offset `at` of the rewritten text (of its
    /// reference when `at` is within a variable).
    pub(crate) fn original(&self, at: usize) -> usize {
        let mut last = (0, 0);
        for (i, ((written_at, _), (len, var_at))) in self.refs.iter().zip(&self.spans).enumerate() {
            if at < *var_at {
                break;
            }
            if at < var_at + var(i).len() {
                return *written_at;
            }
            last = (var_at + var(i).len(), written_at + len);
        }
        at - last.0 + last.1
    }

    /// The offset in the rewritten text of the first token that is `name`.
    pub(crate) fn name_at(&self, name: &str) -> usize {
        tokens(&self.text)
            .into_iter()
            .find(|t| &self.text[t.clone()] == name)
            .map_or(0, |t| t.start)
    }
}

/// The text with each reference replaced by its variable, and the references with their
/// offsets. String literals are left alone.
pub(crate) fn extract(text: &str) -> Result<Rewritten, ExprError> {
    let mut out = Rewritten {
        text: String::with_capacity(text.len()),
        refs: Vec::new(),
        spans: Vec::new(),
    };
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        if rest.starts_with('"') {
            let end = string_end(rest);
            out.text.push_str(&rest[..end]);
            i += end;
            continue;
        }
        let boundary = !text[..i].ends_with(|c: char| is_name_char(c) || c == '.');
        match boundary.then(|| reference_len(rest)).flatten() {
            Some(len) => {
                let reference = Ref::parse(&rest[..len]).ok_or_else(|| ExprError::UnknownName {
                    at: i,
                    name: rest[..len].to_owned(),
                })?;
                out.spans.push((len, out.text.len()));
                out.text.push_str(&var(out.refs.len()));
                out.refs.push((i, reference));
                i += len;
            }
            None => {
                let ch = rest.chars().next().unwrap_or_default();
                out.text.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    Ok(out)
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The length of the reference starting `rest`, if one does: a root (`params`, `run`,
/// `steps`, `item`, `wave`) and what follows it. A step's name runs to its `.output` or
/// `.status`, whatever it holds but spaces.
fn reference_len(rest: &str) -> Option<usize> {
    let root_len = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
    let root = &rest[..root_len];
    if !["params", "run", "steps", "item", "wave"].contains(&root) {
        return None;
    }
    let mut start = root_len;
    if root == "steps" && rest[root_len..].starts_with('.') {
        let body = &rest[root_len + 1..];
        let word_end = body.find(char::is_whitespace).unwrap_or(body.len());
        let word = &body[..word_end];
        let marker = [".output", ".status"]
            .iter()
            .filter_map(|m| word.find(m))
            .min()?;
        start = root_len + 1 + marker;
    }
    let tail = &rest[start..];
    let tail_len = tail
        .find(|c: char| !(is_name_char(c) || c == '.'))
        .unwrap_or(tail.len());
    Some(start + tail_len)
}
