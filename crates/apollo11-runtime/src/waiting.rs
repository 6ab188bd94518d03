//! The code of a waiting step declared in Rust ([`crate::StepBuilder::waiting`]): none. The
//! driver never runs a waiting step's attempt (it appends `Started` and waits for a signal,
//! a timer or a deadline), so `run` is reached only by a caller that runs a workflow's
//! steps by hand, and tells it so.

use crate::{Output, Step, StepContext, StepError};
use async_trait::async_trait;

pub(crate) struct Waiting;

#[async_trait]
impl Step for Waiting {
    async fn run(&self, _: &StepContext) -> Result<Output, StepError> {
        Err(StepError::fatal(
            "a waiting step runs no code: it ends by a signal, its timer or its deadline",
        ))
    }
}
