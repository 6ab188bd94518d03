//! What an attempt runs: the step's command, environment and folder with their templates
//! rendered from what the attempt can see (its [`Scope`]: the run's arguments and secrets,
//! its id, the outputs and statuses of the steps it may read, its item and wave), and which
//! of the engine's own environment variables it keeps. `${NAME}` of a shell variable stays
//! the shell's: only the template roots (`params`, `run`, `steps`, `item`, `wave`) are
//! templates.

use crate::definition::{CWD, ENV, ENV_PASS};
use apollo11_author::{Mode, Ref, Scope, Template, TemplateError};
use apollo11_core::{StepSpec, WorkflowSpec};
use apollo11_runtime::StepError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a step's attempts render their texts with, fixed when the workflow is built.
#[derive(Clone, Debug)]
pub struct Rendering {
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    pass: Option<Vec<String>>,
}

/// An attempt's command, environment and folder, rendered.
pub struct Prepared {
    /// The shell command: each value one quoted word, each secret `"$APOLLO11_SECRET_…"`.
    pub command: String,
    /// Variables set for the step (its `env`, then the secrets' variables).
    pub env: Vec<(String, String)>,
    /// The engine's variables the step keeps: those `env_pass` lists, or (`None`, a
    /// workflow without `env_pass`, as every file was before it existed) all of them.
    pub pass: Option<Vec<String>>,
    /// The folder it runs in (its executor checks that it exists).
    pub dir: PathBuf,
}

impl Rendering {
    /// The rendering of `step` of `spec` (an instantiated definition or a run's pinned one).
    pub fn of(spec: &WorkflowSpec, step: &StepSpec) -> Rendering {
        let pass = spec
            .attributes
            .get(ENV_PASS)
            .and_then(|p| serde_json::from_str(p).ok());
        Rendering {
            env: step
                .attributes
                .get(ENV)
                .and_then(|e| serde_json::from_str(e).ok())
                .unwrap_or_default(),
            cwd: step.attributes.get(CWD).cloned(),
            pass,
        }
    }

    /// Renders `command` and the step's environment and folder for an attempt that sees
    /// `scope`; `dir` is the workflow file's folder.
    ///
    /// # Errors
    ///
    /// A fatal [`StepError`] naming what cannot be rendered (a reference with no value, a
    /// secret in `cwd`, which is recorded).
    pub fn prepare(&self, command: &str, scope: &Scope, dir: &Path) -> Result<Prepared, StepError> {
        let text = |what: &str, text: &str, mode| {
            render(text, scope, mode).map_err(|e| StepError::fatal(format!("{what} `{text}`: {e}")))
        };
        let mut env = Vec::with_capacity(self.env.len() + scope.secrets.len());
        for (name, value) in &self.env {
            env.push((
                name.clone(),
                text(&format!("env {name}"), value, Mode::Plain)?,
            ));
        }
        env.extend(scope.secret_vars());
        let dir = match &self.cwd {
            Some(cwd) => {
                no_secret_in(cwd, scope)?;
                dir.join(text("cwd", cwd, Mode::Plain)?)
            }
            None => dir.to_path_buf(),
        };
        Ok(Prepared {
            command: text("the command", command, Mode::Shell)?,
            env,
            pass: self.pass.clone(),
            dir,
        })
    }
}

/// Refuses a secret in `cwd`: the folder is recorded with the command.
fn no_secret_in(cwd: &str, scope: &Scope) -> Result<(), StepError> {
    let Ok(template) = Template::parse(&shell_text(cwd)) else {
        // Rendering it names what is wrong.
        return Ok(());
    };
    for (_, reference) in template.references() {
        if let Ref::Param(name) = reference {
            if scope.secrets.contains_key(name) {
                return Err(StepError::fatal(format!(
                    "cwd `{cwd}`: `params.{name}` is a secret, which a folder cannot name (the folder is recorded with the command)"
                )));
            }
        }
    }
    Ok(())
}

/// Renders a step's text, `${NAME}` of a shell variable left as written.
///
/// # Errors
///
/// [`TemplateError`] at the first template that does not parse or has no value.
pub fn render(text: &str, scope: &Scope, mode: Mode) -> Result<String, TemplateError> {
    Template::parse(&shell_text(text))?.render(scope, mode)
}

/// The template roots: what `${ROOT...}` must start with to be a template.
const ROOTS: [&str; 5] = ["params", "run", "steps", "item", "wave"];

/// `text` with each `${` that opens no template root escaped (`$${`), so the shell's own
/// `${HOME}`, `${X:-default}` pass through as written.
pub fn shell_text(text: &str) -> String {
    escape(text).0
}

/// The byte offset in the written text of `offset` in its [`shell_text`].
pub fn source_offset(text: &str, offset: usize) -> usize {
    offset - escape(text).1.iter().filter(|&&at| at < offset).count()
}

/// [`shell_text`], and where (in it) each `$` it added is.
fn escape(text: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(text.len());
    let mut added = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        let written = rest[..i].ends_with('$');
        out.push_str(&rest[..i]);
        let inner = &rest[i + 2..];
        let root_len = inner
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(inner.len());
        if !written && !ROOTS.contains(&&inner[..root_len]) {
            added.push(out.len());
            out.push('$');
        }
        out.push_str("${");
        rest = inner;
    }
    out.push_str(rest);
    (out, added)
}
