//! What a declared definition refers to that it cannot reach: a reference to a step that
//! has not necessarily run, an undeclared parameter, a `for_each` over something that is not
//! a list, a gate that is not a step, `item` where there is none.

use crate::{check_value, secret_var, AuthorError, Condition, Ref, Template};
use apollo11_core::{ItemSource, ParamKind, StepSpec, WorkflowSpec};
use apollo11_dag::Dag;
use std::collections::{BTreeMap, BTreeSet};

/// A template a front end keeps in a step (its command, an environment value, its folder),
/// named for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateField {
    /// The declaration holding it.
    pub step: String,
    /// The field, as the definition names it (`run`, `env.HOST`, `cwd`).
    pub field: String,
    /// Its text.
    pub text: String,
}

/// Checks a declared definition: its graph; parameter defaults; each `for_each` (a declared
/// list parameter, an output of a dependency, a gate that is a step); each condition and
/// each template of `templates` (they parse, name declared parameters, read only steps the
/// step depends on, directly or not, and `item` or `wave` only in a step a `for_each` or a
/// gate makes; a condition compares no two values whose types differ, when both are known:
/// literals and parameters). The first problem found, in declaration order, is returned.
///
/// # Errors
///
/// [`AuthorError`] naming the step, the field and the byte offset in it.
pub fn validate(declared: &WorkflowSpec, templates: &[TemplateField]) -> Result<(), AuthorError> {
    let steps: Vec<(&str, Vec<&str>)> = declared
        .steps
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.depends_on.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    let dag = Dag::build(&steps, usize::MAX)?;
    for param in &declared.params {
        if let Some(default) = &param.default {
            check_value(param, default)?;
        }
    }
    distinct_secret_vars(declared)?;
    let checker = Checker::new(declared, &dag);
    for step in &declared.steps {
        checker.for_each(step)?;
        if let Some(text) = &step.condition {
            let located = |error| AuthorError::Condition {
                step: step.name.clone(),
                error,
            };
            let condition = Condition::parse(text).map_err(located)?;
            checker.references(step, "condition", condition.references())?;
            checker.no_secret(step, condition.references())?;
            condition
                .check_types(|r| checker.kind(r))
                .map_err(located)?;
        }
    }
    for field in templates {
        let step = checker.step(&field.step)?;
        let template = Template::parse(&field.text).map_err(|error| AuthorError::Template {
            step: field.step.clone(),
            field: field.field.clone(),
            error,
        })?;
        checker.references(step, &field.field, template.references())?;
    }
    Ok(())
}

/// Two secrets passed in one environment variable would give a step the wrong one.
fn distinct_secret_vars(declared: &WorkflowSpec) -> Result<(), AuthorError> {
    let mut vars = BTreeMap::new();
    for param in declared.params.iter().filter(|p| p.secret.is_some()) {
        let var = secret_var(&param.name);
        if let Some(first) = vars.insert(var.clone(), &param.name) {
            return Err(AuthorError::SecretVarClash {
                first: first.clone(),
                second: param.name.clone(),
                var,
            });
        }
    }
    Ok(())
}

struct Checker<'s> {
    spec: &'s WorkflowSpec,
    dag: &'s Dag,
    /// The steps that are some declaration's gate.
    gates: BTreeSet<&'s str>,
}

impl<'s> Checker<'s> {
    fn new(spec: &'s WorkflowSpec, dag: &'s Dag) -> Checker<'s> {
        let gates = spec
            .steps
            .iter()
            .filter_map(|s| s.for_each.as_ref()?.gate.as_deref())
            .collect();
        Checker { spec, dag, gates }
    }

    /// The declared kind of the parameter `reference` reads; `None` for any other reference.
    fn kind(&self, reference: &Ref) -> Option<ParamKind> {
        let Ref::Param(name) = reference else {
            return None;
        };
        self.spec
            .params
            .iter()
            .find(|p| p.name == *name)
            .map(|p| p.kind)
    }

    fn step(&self, name: &str) -> Result<&'s StepSpec, AuthorError> {
        let node = self
            .dag
            .node(name)
            .ok_or_else(|| AuthorError::UnknownStep {
                step: name.to_owned(),
            })?;
        Ok(&self.spec.steps[node.index()])
    }

    /// Whether `target` (a declaration, or a step one makes: `DECL[KEY]`) is upstream of
    /// `step`.
    fn is_upstream(&self, step: &StepSpec, target: &str) -> bool {
        let declaration = match self.dag.node(target) {
            Some(node) => Some(node),
            None => target
                .split_once('[')
                .filter(|_| target.ends_with(']'))
                .and_then(|(d, _)| self.dag.node(d)),
        };
        let Some(me) = self.dag.node(&step.name) else {
            return false;
        };
        declaration.is_some_and(|target| self.dag.depends_on(me, target))
    }

    /// Whether `name` is a declaration that becomes one step per item.
    fn is_for_each(&self, name: &str) -> bool {
        self.dag
            .node(name)
            .is_some_and(|n| self.spec.steps[n.index()].for_each.is_some())
    }

    fn for_each(&self, step: &StepSpec) -> Result<(), AuthorError> {
        let Some(for_each) = &step.for_each else {
            return Ok(());
        };
        match &for_each.items {
            ItemSource::List(_) => {}
            ItemSource::Param(name) => self.list_param(step, name)?,
            ItemSource::Output { step: source, .. } => {
                if !self.is_upstream(step, source) {
                    return Err(AuthorError::SourceNotDependency {
                        step: step.name.clone(),
                        source: source.clone(),
                    });
                }
            }
        }
        if for_each.wave_size == Some(0) {
            return Err(AuthorError::ZeroWaveSize {
                step: step.name.clone(),
            });
        }
        match &for_each.gate {
            Some(gate) if self.dag.node(gate).is_none() => Err(AuthorError::UnknownGate {
                step: step.name.clone(),
                gate: gate.clone(),
            }),
            _ => Ok(()),
        }
    }

    fn list_param(&self, step: &StepSpec, name: &str) -> Result<(), AuthorError> {
        let param = self
            .spec
            .params
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| AuthorError::UnknownParam {
                step: step.name.clone(),
                param: name.to_owned(),
            })?;
        let found = match (param.kind, &param.secret) {
            (_, Some(_)) => "a secret",
            (ParamKind::List, None) => return Ok(()),
            (kind, None) => crate::kind_label(kind),
        };
        Err(AuthorError::NotAList {
            step: step.name.clone(),
            source: Ref::Param(name.to_owned()).to_string(),
            found,
        })
    }

    /// A condition reads no secret: its value would decide what runs, and show in the
    /// reason a step was skipped.
    fn no_secret<'r>(
        &self,
        step: &StepSpec,
        mut refs: impl Iterator<Item = (usize, &'r Ref)>,
    ) -> Result<(), AuthorError> {
        let secret = |name: &String| {
            self.spec
                .params
                .iter()
                .any(|p| &p.name == name && p.secret.is_some())
        };
        match refs.find(|(_, r)| matches!(r, Ref::Param(name) if secret(name))) {
            Some((at, Ref::Param(param))) => Err(AuthorError::SecretInCondition {
                step: step.name.clone(),
                at,
                param: param.clone(),
            }),
            _ => Ok(()),
        }
    }

    fn references<'r>(
        &self,
        step: &StepSpec,
        field: &str,
        refs: impl Iterator<Item = (usize, &'r Ref)>,
    ) -> Result<(), AuthorError> {
        let makes_items = step.for_each.is_some() || self.gates.contains(step.name.as_str());
        for (at, reference) in refs {
            let located = |at| (step.name.clone(), field.to_owned(), at);
            match reference {
                Ref::Param(param) if !self.spec.params.iter().any(|p| &p.name == param) => {
                    let (step, field, at) = located(at);
                    return Err(AuthorError::UndeclaredParam {
                        step,
                        field,
                        at,
                        param: param.clone(),
                    });
                }
                Ref::Item(_) | Ref::Wave if !makes_items => {
                    let (step, field, at) = located(at);
                    let what = if *reference == Ref::Wave {
                        "wave"
                    } else {
                        "item"
                    };
                    return Err(AuthorError::NoItemHere {
                        step,
                        field,
                        at,
                        what,
                    });
                }
                Ref::Output { step: target, .. } | Ref::Status { step: target }
                    if !self.is_upstream(step, target) =>
                {
                    let (step, field, at) = located(at);
                    return Err(AuthorError::NotUpstream {
                        step,
                        field,
                        at,
                        target: target.clone(),
                    });
                }
                Ref::Output { step: target, .. } | Ref::Status { step: target }
                    if step.for_each.is_none() && self.is_for_each(target) =>
                {
                    let (step, field, at) = located(at);
                    return Err(AuthorError::ManySteps {
                        step,
                        field,
                        at,
                        target: target.clone(),
                    });
                }
                _ => {}
            }
        }
        Ok(())
    }
}
