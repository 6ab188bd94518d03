//! What a schedule's `params` may read of the fire time: `${schedule.date}` and the other
//! [`NAMES`], in any string value. Checked where the file is read, rendered at each fire.

use crate::fire::FireTime;

/// The names a template may read, after `schedule.`.
pub const NAMES: [&str; 6] = [
    "name",
    "date",
    "time",
    "fire_time",
    "interval_start",
    "interval_end",
];

/// A reference no fire time can fill, at its byte offset in the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError {
    /// Where the reference starts (its `$`).
    pub offset: usize,
    /// What is wrong.
    pub message: String,
}

/// What one fire gives its templates.
pub struct Values<'a> {
    /// The schedule's name.
    pub name: &'a str,
    /// The fire time.
    pub fire: FireTime,
    /// The schedule's fire time before it, the interval's start (the fire itself when
    /// there is none).
    pub previous: FireTime,
}

impl Values<'_> {
    fn get(&self, name: &str) -> Option<String> {
        Some(match name {
            "name" => self.name.to_owned(),
            "date" => self.fire.date(),
            "time" => self.fire.time(),
            "fire_time" => self.fire.utc_text(),
            "interval_start" => self.previous.local_text(),
            "interval_end" => self.fire.local_text(),
            _ => return None,
        })
    }
}

/// Checks every `${...}` of `text` names one of [`NAMES`].
///
/// # Errors
///
/// The first reference that does not, or a `${` never closed.
pub fn check(text: &str) -> Result<(), TemplateError> {
    references(text).try_for_each(|r| r.map(|_| ()))
}

/// `text` with each reference replaced by its value for `values` (a text [`check`] refused
/// renders its bad references as they are).
pub fn render(text: &str, values: &Values<'_>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    for (start, end, value) in references(text)
        .filter_map(Result::ok)
        .filter_map(|(s, e, name)| Some((s, e, values.get(name)?)))
    {
        out.push_str(&text[rest..start]);
        out.push_str(&value);
        rest = end;
    }
    out.push_str(&text[rest..]);
    out
}

/// Each `${...}`: its span and the name after `schedule.`.
fn references(text: &str) -> impl Iterator<Item = Result<(usize, usize, &str), TemplateError>> {
    let mut from = 0;
    std::iter::from_fn(move || {
        let start = from + text[from..].find("${")?;
        let Some(close) = text[start..].find('}') else {
            from = text.len();
            return Some(Err(TemplateError {
                offset: start,
                message: "`${` is never closed by `}`".to_owned(),
            }));
        };
        let end = start + close + 1;
        from = end;
        let inner = text[start + 2..end - 1].trim();
        let name = inner
            .strip_prefix("schedule.")
            .filter(|n| NAMES.contains(n));
        Some(name.map(|n| (start, end, n)).ok_or_else(|| TemplateError {
            offset: start,
            message: format!(
                "`${{{inner}}}`: a schedule's params may read schedule.{}",
                NAMES.join(", schedule.")
            ),
        }))
    })
}
