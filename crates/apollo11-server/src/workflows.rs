//! The workflows a server can start: the files of its `--workflows` folder (each
//! `*/workflow.toml`, or `*.toml` directly in it), loaded and validated at start and on
//! reload, known by their `[workflow] name`.

use crate::ApiError;
use apollo11_core::{Idempotency, OnFailure, WorkflowSpec};
use apollo11_runtime::inspect::ParamView;
use apollo11_shell::{definition, shell};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One registered workflow.
pub struct Registered {
    /// Its file, relative to the workflows folder.
    pub file: String,
    /// Its definition.
    pub spec: WorkflowSpec,
    /// Its definition's [`digest`].
    pub digest: String,
    /// Its schedules, which `serve` fires (`crate::firing`).
    pub schedules: Vec<definition::Schedule>,
}

impl Registered {
    /// Refuses (412) to start this workflow for a client whose definition of it, of digest
    /// `sent`, is another.
    pub fn check_digest(&self, sent: &str) -> Result<(), ApiError> {
        if sent == self.digest {
            return Ok(());
        }
        Err(ApiError::DefinitionDiffers(format!(
            "workflow `{}` of this server ({}, definition digest {}) is not the \
                 definition asked for (digest {sent}): nothing was started",
            self.spec.name, self.file, self.digest
        )))
    }
}

/// The registered workflows, by name.
#[derive(Default)]
pub struct Registry {
    by_name: BTreeMap<String, Registered>,
}

impl Registry {
    /// Loads every workflow file of `dir` (none when there is no folder), steps running
    /// with their files in `data_dir`. The first invalid file is the error: its path, line,
    /// column and what is wrong; two files of one name are an error naming both.
    pub fn load(dir: Option<&Path>, data_dir: &Path) -> Result<Registry, String> {
        let mut registry = Registry::default();
        let Some(dir) = dir else {
            return Ok(registry);
        };
        for path in workflow_files(dir)? {
            let file = path
                .strip_prefix(dir)
                .unwrap_or(&path)
                .display()
                .to_string();
            let definition::Definition { spec, schedules } =
                definition::load_all(&path).map_err(|e| e.to_string())?;
            // Validated as a whole: a declared definition builds as the workflow it is.
            shell::workflow(&spec, data_dir).map_err(|e| format!("{}: {e}", path.display()))?;
            if let Some(earlier) = registry.by_name.get(&spec.name) {
                return Err(format!(
                    "{}: workflow `{}` is defined in {} already",
                    path.display(),
                    spec.name,
                    earlier.file
                ));
            }
            let registered = Registered {
                file,
                digest: apollo11_runtime::digest(&spec),
                spec,
                schedules,
            };
            registry
                .by_name
                .insert(registered.spec.name.clone(), registered);
        }
        Ok(registry)
    }

    /// A workflow by name.
    pub fn get(&self, name: &str) -> Option<&Registered> {
        self.by_name.get(name)
    }

    /// Every registered workflow, by name.
    pub fn all(&self) -> impl Iterator<Item = &Registered> {
        self.by_name.values()
    }

    /// `{"workflows": [...]}` as the API shows them.
    pub fn listed(&self) -> WorkflowList {
        let workflows = self.by_name.values().map(WorkflowItem::of).collect();
        WorkflowList { workflows }
    }
}

/// The answer of `GET /api/v1/workflows` and of a reload.
#[derive(Serialize)]
pub struct WorkflowList {
    workflows: Vec<WorkflowItem>,
}

/// One registered workflow as listed.
#[derive(Serialize)]
struct WorkflowItem {
    name: String,
    file: String,
    digest: String,
    on_failure: OnFailure,
    /// What a start may give values for (a form's fields).
    params: Vec<ParamView>,
    steps: Vec<WorkflowStep>,
}

/// One step of a listed workflow.
#[derive(Serialize)]
struct WorkflowStep {
    name: String,
    depends_on: Vec<String>,
    idempotency: Idempotency,
    compensate: bool,
}

impl WorkflowItem {
    fn of(registered: &Registered) -> WorkflowItem {
        let spec = &registered.spec;
        let steps = spec.steps.iter().map(|s| WorkflowStep {
            name: s.name.clone(),
            depends_on: s.depends_on.clone(),
            idempotency: s.idempotency,
            compensate: s.has_compensation,
        });
        WorkflowItem {
            name: spec.name.clone(),
            file: registered.file.clone(),
            digest: registered.digest.clone(),
            on_failure: spec.on_failure,
            params: spec.params.iter().map(ParamView::of).collect(),
            steps: steps.collect(),
        }
    }
}

/// A message of [`Registry::load`] as API users see it: each file named relative to the
/// workflows folder `dir`, the folder itself by what it is, not by its path on the server.
pub fn without_dir(message: &str, dir: &Path) -> String {
    let dir = dir.display().to_string();
    message
        .replace(&format!("{dir}/"), "")
        .replace(&dir, "the workflows folder")
}

/// The workflow files of `dir`, in name order.
fn workflow_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("--workflows {}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| format!("--workflows {}: {e}", dir.display()))?
            .path();
        let nested = path.join("workflow.toml");
        if path.is_dir() && nested.is_file() {
            files.push(nested);
        } else if path.is_file() && path.extension().is_some_and(|e| e == "toml") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}
