//! What an attempt runs: the step's command, environment and folder with their templates
//! rendered from what the attempt can see (the run's arguments and secrets, its id, the
//! step's item and wave). `${NAME}` of a shell variable stays the shell's: only the
//! template roots (`params`, `run`, `steps`, `item`, `wave`) are templates.

use crate::definition::{CWD, ENV, ENV_PASS};
use apollo11_author::{Mode, Scope, Template, TemplateError};
use apollo11_core::{SecretSource, StepSpec, WorkflowSpec};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a step's attempts render their texts with, fixed when the workflow is built.
#[derive(Clone, Debug)]
pub struct Rendering {
    scope: Scope,
    secrets: Vec<(String, SecretSource)>,
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    env_pass: Option<Vec<String>>,
}

/// An attempt's command, environment and folder, rendered.
pub struct Prepared {
    /// The shell command.
    pub command: String,
    /// Variables set for the step (its `env`, the secrets its command names).
    pub env: Vec<(String, String)>,
    /// The engine's variables the step keeps: `None`, all of them.
    pub pass: Option<Vec<String>>,
    /// The folder it runs in.
    pub dir: PathBuf,
}

impl Rendering {
    /// The rendering of `step` of `spec` (an instantiated definition or a run's pinned one).
    pub fn of(spec: &WorkflowSpec, step: &StepSpec) -> Rendering {
        let origin = step.origin.as_ref();
        let secrets = spec
            .params
            .iter()
            .filter_map(|p| p.secret.clone().map(|s| (p.name.clone(), s)))
            .collect();
        Rendering {
            scope: Scope {
                arguments: spec.arguments.clone(),
                item: origin.map(|o| o.item.clone()),
                wave: origin.and_then(|o| o.wave),
                ..Scope::default()
            },
            secrets,
            env: step
                .attributes
                .get(ENV)
                .and_then(|e| serde_json::from_str(e).ok())
                .unwrap_or_default(),
            cwd: step.attributes.get(CWD).cloned(),
            env_pass: spec
                .attributes
                .get(ENV_PASS)
                .and_then(|p| serde_json::from_str(p).ok()),
        }
    }

    /// Renders `command` and the step's environment and folder for an attempt of `run_id`;
    /// `dir` is the workflow file's folder.
    ///
    /// # Errors
    ///
    /// What cannot be rendered, named: a secret that cannot be read, a reference with no
    /// value.
    pub fn prepare(&self, command: &str, run_id: &str, dir: &Path) -> Result<Prepared, String> {
        let mut scope = self.scope.clone();
        scope.run_id = run_id.to_owned();
        for (name, source) in &self.secrets {
            scope
                .secrets
                .insert(name.clone(), read_secret(name, source)?);
        }
        let text = |what: &str, text: &str, mode| {
            render(text, &scope, mode).map_err(|e| format!("{what} `{text}`: {e}"))
        };
        let mut env = Vec::with_capacity(self.env.len());
        for (name, value) in &self.env {
            env.push((
                name.clone(),
                text(&format!("env {name}"), value, Mode::Plain)?,
            ));
        }
        env.extend(scope.secret_vars());
        let dir = match &self.cwd {
            Some(cwd) => dir.join(text("cwd", cwd, Mode::Plain)?),
            None => dir.to_path_buf(),
        };
        Ok(Prepared {
            command: text("the command", command, Mode::Shell)?,
            env,
            pass: self.env_pass.clone(),
            dir,
        })
    }
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

fn read_secret(name: &str, source: &SecretSource) -> Result<String, String> {
    match source {
        SecretSource::Env(var) => std::env::var(var).map_err(|_| {
            format!("secret parameter `{name}`: environment variable {var} is not set")
        }),
        SecretSource::File(path) => std::fs::read_to_string(path)
            .map(|s| s.strip_suffix('\n').unwrap_or(&s).to_owned())
            .map_err(|e| format!("secret parameter `{name}`: cannot read {path}: {e}")),
    }
}
