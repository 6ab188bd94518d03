//! One try of a no-op shell step (`true`) run by the shell executor alone, placed nowhere:
//! its folder and files, its gated process group, its exit and output read, with no engine,
//! log or server around it. What `limits` and `workers` time tries against.

use anyhow::{anyhow, Result};
use apollo11_runtime::{StepError, Usage};
use apollo11_shell::files::step_files;
use apollo11_shell::shell::{execute, Files, Job, Limits, Placing};
use async_trait::async_trait;
use std::path::Path;
use std::sync::Mutex;

/// Records nothing before a try's gate opens; keeps what each try used.
#[derive(Default)]
pub struct Nowhere(pub Mutex<Vec<Usage>>);

#[async_trait]
impl Placing for Nowhere {
    async fn placed(&self, _: &str, _: &str) -> Result<(), StepError> {
        Ok(())
    }

    fn used(&self, usage: Usage) {
        self.0.lock().expect("not poisoned").push(usage);
    }
}

/// Runs `attempt` of step `step` of run `bench`: `true` in `dir` (an absolute folder, which
/// its files go under too), under `limits`, placed with `placing`.
pub async fn run(
    dir: &Path,
    step: &str,
    attempt: u32,
    limits: Limits,
    placing: &Nowhere,
) -> Result<()> {
    let job = Job {
        run_id: "bench".into(),
        step: step.into(),
        attempt,
        command: "true".into(),
        dir: dir.to_path_buf(),
        limits,
        ..Job::default()
    };
    let files = step_files(dir, "bench", step, attempt, false);
    let at = Files {
        files: &files,
        base: dir,
        base_words: "the bench dir",
        exit: None,
    };
    execute(&job, &at, placing)
        .await
        .map_err(|e| anyhow!("a no-op try of {step} failed: {}", e.message))?;
    Ok(())
}
