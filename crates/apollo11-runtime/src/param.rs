//! A parameter declared in Rust ([`Param`]), for [`WorkflowBuilder::param`](crate::WorkflowBuilder::param).

use apollo11_core::{ParamKind, ParamSpec, SecretSource, Value};

/// Declares a parameter of a workflow: a value a run is started with, checked against its
/// kind, read by steps with [`StepContext::param`](crate::StepContext::param) and by
/// templates and conditions as `params.NAME`.
///
/// ```
/// use apollo11_runtime::{Param, ParamKind, SecretSource, Value};
///
/// let rows = Param::new("rows", ParamKind::Integer)
///     .default(Value::from(200_000))
///     .describe("rows to copy");
/// let token = Param::new("token", ParamKind::String)
///     .secret(SecretSource::Env("API_TOKEN".into()));
/// let date = Param::new("date", ParamKind::String).required();
/// assert_eq!(rows.spec().default, Some(Value::from(200_000)));
/// assert!(token.spec().secret.is_some() && date.spec().required);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param(ParamSpec);

impl Param {
    /// A parameter `name` whose values are of `kind`: optional, with no default.
    pub fn new(name: &str, kind: ParamKind) -> Param {
        Param(ParamSpec {
            name: name.to_owned(),
            kind,
            default: None,
            required: false,
            description: String::new(),
            secret: None,
        })
    }

    /// The value a run gets when it is given none.
    pub fn default(mut self, value: Value) -> Param {
        self.0.default = Some(value);
        self
    }

    /// A run must be given a value.
    pub fn required(mut self) -> Param {
        self.0.required = true;
        self
    }

    /// What it is for, shown to whoever starts a run.
    pub fn describe(mut self, text: &str) -> Param {
        self.0.description = text.to_owned();
        self
    }

    /// A secret, read from `source` at each attempt and never written anywhere: a run is
    /// not given it, and a step finds it in [`Scope::secrets`](crate::Scope).
    pub fn secret(mut self, source: SecretSource) -> Param {
        self.0.secret = Some(source);
        self
    }

    /// The declaration.
    pub fn spec(&self) -> &ParamSpec {
        &self.0
    }
}

impl From<Param> for ParamSpec {
    fn from(param: Param) -> ParamSpec {
        param.0
    }
}
