//! `${...}` in a command, an environment value or a folder: parsed once, its references
//! listed for validation, rendered at each attempt from a [`Scope`].

use crate::scope::{secret_var, Missing};
use crate::{Ref, Scope};
use apollo11_core::Value;
use std::fmt;

/// How a rendered value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// In a shell command: each value is one single-quoted word, so no value can add a
    /// command; a secret is a quoted reference to its environment variable,
    /// `"$APOLLO11_SECRET_NAME"`, so a recorded command never holds it.
    Shell,
    /// As is (an environment value, a folder): the value's text, a secret's too.
    Plain,
}

/// A template, parsed: literal text and references, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Text(String),
    Ref { at: usize, reference: Ref },
}

/// Why a template cannot be read or rendered: where (a byte offset in its text) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError {
    /// The byte offset of the `${` at fault in the template's text.
    pub at: usize,
    /// What is wrong.
    pub problem: TemplateProblem,
}

/// What is wrong with a template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateProblem {
    /// A `${` with no `}`.
    Unterminated,
    /// `${TEXT}` where TEXT names nothing a template can read.
    UnknownReference(String),
    /// The reference has no value in the scope.
    Missing(Missing),
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: ", self.at)?;
        match &self.problem {
            TemplateProblem::Unterminated => write!(f, "`${{` is not closed by `}}`"),
            TemplateProblem::UnknownReference(text) => write!(
                f,
                "`${{{text}}}` names nothing: expected params.NAME, run.id, \
                 steps.STEP.output[.FIELD...], steps.STEP.status, item[.FIELD...] or wave"
            ),
            TemplateProblem::Missing(missing) => write!(f, "{missing}"),
        }
    }
}

impl std::error::Error for TemplateError {}

impl Template {
    /// Reads `text`: `${REFERENCE}` is a reference ([`Ref::parse`], spaces around it
    /// allowed), `$${` a literal `${`.
    ///
    /// # Errors
    ///
    /// [`TemplateError`] at the first `${` not closed or naming nothing.
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(i) = rest.find("${") {
            let at = text.len() - rest.len() + i;
            if rest[..i].ends_with('$') {
                literal.push_str(&rest[..i - 1]);
                literal.push_str("${");
                rest = &rest[i + 2..];
                continue;
            }
            literal.push_str(&rest[..i]);
            let inner = &rest[i + 2..];
            let end = inner.find('}').ok_or(TemplateError {
                at,
                problem: TemplateProblem::Unterminated,
            })?;
            let reference = Ref::parse(inner[..end].trim()).ok_or_else(|| TemplateError {
                at,
                problem: TemplateProblem::UnknownReference(inner[..end].to_owned()),
            })?;
            if !literal.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut literal)));
            }
            parts.push(Part::Ref { at, reference });
            rest = &inner[end + 1..];
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(Template { parts })
    }

    /// The references in order, each with the byte offset of its `${`.
    pub fn references(&self) -> impl Iterator<Item = (usize, &Ref)> {
        self.parts.iter().filter_map(|p| match p {
            Part::Ref { at, reference } => Some((*at, reference)),
            Part::Text(_) => None,
        })
    }

    /// The text with each reference replaced by its value in `scope`, as `mode` says. A
    /// string is its text, any other value its JSON text.
    ///
    /// # Errors
    ///
    /// [`TemplateError`] at the first reference with no value in the scope.
    pub fn render(&self, scope: &Scope, mode: Mode) -> Result<String, TemplateError> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Ref { at, reference } => {
                    let value = rendered(reference, scope, mode).map_err(|m| TemplateError {
                        at: *at,
                        problem: TemplateProblem::Missing(m),
                    })?;
                    out.push_str(&value);
                }
            }
        }
        Ok(out)
    }
}

/// One reference's rendering.
fn rendered(reference: &Ref, scope: &Scope, mode: Mode) -> Result<String, Missing> {
    if let Ref::Param(name) = reference {
        if let Some(secret) = scope.secrets.get(name) {
            return Ok(match mode {
                Mode::Shell => format!("\"${}\"", secret_var(name)),
                Mode::Plain => secret.clone(),
            });
        }
    }
    let text = text_of(&scope.value(reference)?);
    Ok(match mode {
        Mode::Shell => shell_quote(&text),
        Mode::Plain => text,
    })
}

/// A string's text, or any other value's JSON text.
pub fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `text` as one single-quoted shell word: `'...'`, each `'` inside written `'\''`.
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Parses and renders `text` in one go.
///
/// # Errors
///
/// [`TemplateError`] from [`Template::parse`] or [`Template::render`].
pub fn render(text: &str, scope: &Scope, mode: Mode) -> Result<String, TemplateError> {
    Template::parse(text)?.render(scope, mode)
}

/// The references of `text`, each with the byte offset of its `${`.
///
/// # Errors
///
/// [`TemplateError`] from [`Template::parse`].
pub fn references(text: &str) -> Result<Vec<(usize, Ref)>, TemplateError> {
    Ok(Template::parse(text)?
        .references()
        .map(|(at, r)| (at, r.clone()))
        .collect())
}
