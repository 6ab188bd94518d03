//! A declared definition made into the one a run pins ([`instantiate`]).

use crate::items::{gate_name, Items};
use crate::{bind, value_type, AuthorError, Ref};
use apollo11_core::{check_name, ItemSource, NameKind, Origin, StepSpec, Value, WorkflowSpec};
use apollo11_dag::{Dag, NodeId};
use std::collections::{BTreeMap, HashMap};

/// The definition a run pins: the arguments bound ([`bind`]: defaults filled in, values
/// checked), each `for_each` over a list known now (written, or a parameter) made into one
/// step per item, with its [`Origin`]; each gate made into one step per wave. A `for_each`
/// over an output stays one template step, for [`grow`](crate::grow) at run time. Templates and
/// conditions are left as written: they are rendered at each attempt.
///
/// Dependencies: a step made from item `k` depends on the item `k` of another `for_each`
/// it depends on (pairing by key), on every step made from a declaration otherwise
/// (fan-in), and on a plain step as declared (fan-out). In waves of `N`, the steps of wave
/// `w + 1` depend on the gate's step of wave `w`, or, without a gate, on the steps of wave
/// `w` of the last declarations paired with it (`N × N` dependencies between two waves: a
/// gate, `N + N`, is the cheaper barrier for large waves). A declaration of no items stands
/// for its own dependencies. Deterministic, and idempotent: a pinned definition
/// instantiated with its own arguments is itself.
///
/// # Errors
///
/// [`AuthorError`] naming the declaration: the arguments, a list that is not one, too many
/// items, an item with no key, two items with one name, keys that do not pair, a gate that
/// cannot be one, or the expanded graph (a name made twice, a cycle).
pub fn instantiate(
    declared: &WorkflowSpec,
    given: &BTreeMap<String, Value>,
) -> Result<WorkflowSpec, AuthorError> {
    let arguments = bind(&declared.params, given)?;
    let plan = Plan::new(declared, &arguments)?;
    let steps = declared
        .steps
        .iter()
        .enumerate()
        .flat_map(|(i, step)| plan.expand(i, step))
        .collect();
    let spec = WorkflowSpec {
        steps,
        arguments,
        ..declared.clone()
    };
    check_graph(&spec)?;
    Ok(spec)
}

/// The items of `source` when known before the run starts; `None` for an output's.
fn static_items(
    step: &str,
    source: &ItemSource,
    arguments: &BTreeMap<String, Value>,
    declared: &WorkflowSpec,
) -> Result<Option<Vec<Value>>, AuthorError> {
    match source {
        ItemSource::List(items) => Ok(Some(items.clone())),
        ItemSource::Param(param) => match arguments.get(param) {
            Some(Value::Array(items)) => Ok(Some(items.clone())),
            Some(other) => Err(AuthorError::NotAList {
                step: step.to_owned(),
                source: Ref::Param(param.clone()).to_string(),
                found: value_type(other),
            }),
            None if declared.params.iter().any(|p| &p.name == param) => {
                Err(AuthorError::NotAList {
                    step: step.to_owned(),
                    source: Ref::Param(param.clone()).to_string(),
                    found: "a secret or unset",
                })
            }
            None => Err(AuthorError::UnknownParam {
                step: step.to_owned(),
                param: param.clone(),
            }),
        },
        ItemSource::Output { .. } => Ok(None),
    }
}

/// What the declarations expand to, worked out before any step is made.
struct Plan<'s> {
    spec: &'s WorkflowSpec,
    /// Declarations by name.
    index: HashMap<&'s str, usize>,
    /// The items of each declaration over a list known now.
    items: Vec<Option<Items>>,
    /// For each gate, the declaration naming it.
    gate_of: Vec<Option<usize>>,
    /// For each declaration in waves without a gate, the steps its wave `w + 1` waits
    /// for: the steps of wave `w` of the last declarations paired with it (index `w - 1`).
    after_wave: Vec<Vec<Vec<String>>>,
}

impl<'s> Plan<'s> {
    fn new(
        spec: &'s WorkflowSpec,
        arguments: &BTreeMap<String, Value>,
    ) -> Result<Plan<'s>, AuthorError> {
        let dag = declared_graph(spec)?;
        let mut items = Vec::with_capacity(spec.steps.len());
        for step in &spec.steps {
            let Some(for_each) = &step.for_each else {
                items.push(None);
                continue;
            };
            let values = static_items(&step.name, &for_each.items, arguments, spec)?;
            items.push(match values {
                Some(values) => Some(Items::new(&step.name, for_each, values)?),
                None => None,
            });
        }
        let mut plan = Plan {
            spec,
            index: spec
                .steps
                .iter()
                .enumerate()
                .map(|(i, s)| (s.name.as_str(), i))
                .collect(),
            items,
            gate_of: vec![None; spec.steps.len()],
            after_wave: vec![Vec::new(); spec.steps.len()],
        };
        plan.pair(&dag)?;
        plan.find_gates()?;
        plan.wait_between_waves(&dag);
        Ok(plan)
    }

    /// Checks the keys of paired declarations and hands waves down the pairs, in
    /// topological order.
    fn pair(&mut self, dag: &Dag) -> Result<(), AuthorError> {
        for &node in dag.topological_order() {
            let i = node.index();
            let step = &self.spec.steps[i];
            let Some(mut items) = self.items[i].take() else {
                continue;
            };
            for dep in &step.depends_on {
                let Some(other) = self.items[self.index[dep.as_str()]].as_ref() else {
                    continue;
                };
                items.check_paired(&step.name, dep, other)?;
                if items.wave_size.is_none() && items.waves.iter().all(Option::is_none) {
                    items.waves = items
                        .keys
                        .iter()
                        .map(|k| other.waves[other.index[k]])
                        .collect();
                }
            }
            self.items[i] = Some(items);
        }
        Ok(())
    }

    /// Finds each declaration's gate and checks it can be one.
    fn find_gates(&mut self) -> Result<(), AuthorError> {
        for (i, step) in self.spec.steps.iter().enumerate() {
            let Some(gate) = step.for_each.as_ref().and_then(|f| f.gate.as_ref()) else {
                continue;
            };
            let bad = |problem: String| AuthorError::BadGate {
                step: step.name.clone(),
                gate: gate.clone(),
                problem,
            };
            let g = *self
                .index
                .get(gate.as_str())
                .ok_or_else(|| AuthorError::UnknownGate {
                    step: step.name.clone(),
                    gate: gate.clone(),
                })?;
            let Some(items) = &self.items[i] else {
                return Err(bad("is on a list known only at run time".into()));
            };
            if self.spec.steps[g].for_each.is_some() {
                return Err(bad("is itself a for_each".into()));
            }
            if let Some(other) = self.gate_of[g] {
                let other = &self.spec.steps[other].name;
                return Err(bad(format!("is already the gate of `{other}`")));
            }
            self.check_gate_depends(&self.spec.steps[g], items)
                .map_err(|e| {
                    e.unwrap_or_else(|| {
                        bad(format!("depends on no step of `{}`'s items", step.name))
                    })
                })?;
            let last = gate_name(gate, items.wave_count());
            check_name(NameKind::Step, &last).map_err(|error| AuthorError::BadName {
                step: gate.clone(),
                error,
            })?;
            self.gate_of[g] = Some(i);
        }
        Ok(())
    }

    /// A gate depends on at least one `for_each` and every one it depends on pairs with the
    /// declaration it gates. `Err(None)`: it depends on none.
    fn check_gate_depends(
        &self,
        gate: &StepSpec,
        items: &Items,
    ) -> Result<(), Option<AuthorError>> {
        let mut any = false;
        for dep in &gate.depends_on {
            if let Some(other) = &self.items[self.index[dep.as_str()]] {
                other.check_paired(dep, &gate.name, items).map_err(Some)?;
                any = true;
            }
        }
        any.then_some(()).ok_or(None)
    }

    /// For each declaration in waves with no gate: what each wave after the first waits for.
    fn wait_between_waves(&mut self, dag: &Dag) {
        for i in 0..self.spec.steps.len() {
            let Some(items) = &self.items[i] else {
                continue;
            };
            let gated = self.spec.steps[i]
                .for_each
                .as_ref()
                .is_some_and(|f| f.gate.is_some());
            if items.wave_size.is_none() || gated {
                continue;
            }
            let last = self.last_paired(dag, i);
            let waits = (1..items.wave_count())
                .map(|w| {
                    let keys = &items.keys[items.wave(w)];
                    last.iter()
                        .flat_map(|&l| keys.iter().map(move |k| (l, k)))
                        .filter_map(|(l, k)| self.items[l].as_ref()?.name_of(k).map(str::to_owned))
                        .collect()
                })
                .collect();
            self.after_wave[i] = waits;
        }
    }

    /// The declarations paired with `i`, directly or through others, that no other of them
    /// depends on: the last of its chain (`i` itself when nothing pairs with it).
    fn last_paired(&self, dag: &Dag, i: usize) -> Vec<usize> {
        let paired = |n: usize| self.items[n].is_some();
        let mut chain = vec![i];
        let mut seen = vec![false; self.spec.steps.len()];
        seen[i] = true;
        let mut at = 0;
        while at < chain.len() {
            for d in dag.dependents(NodeId(chain[at] as u32)) {
                if paired(d.index()) && !seen[d.index()] {
                    seen[d.index()] = true;
                    chain.push(d.index());
                }
            }
            at += 1;
        }
        let mut last: Vec<usize> = chain
            .iter()
            .copied()
            .filter(|&c| {
                !dag.dependents(NodeId(c as u32))
                    .iter()
                    .any(|d| seen[d.index()])
            })
            .collect();
        last.sort_unstable();
        last
    }

    /// The steps declaration `i` becomes.
    fn expand(&self, i: usize, step: &StepSpec) -> Vec<StepSpec> {
        if let Some(items) = &self.items[i] {
            return (0..items.keys.len())
                .map(|j| {
                    let deps = self.item_dependencies(i, step, items, j);
                    made(
                        step,
                        items.names[j].clone(),
                        deps,
                        items.origin(&step.name, j),
                    )
                })
                .collect();
        }
        if let Some(items) = self.gate_of[i].and_then(|d| self.items[d].as_ref()) {
            return (1..=items.wave_count())
                .map(|w| {
                    let keys = &items.keys[items.wave(w)];
                    let deps = self.gate_dependencies(step, keys);
                    let origin = Origin {
                        declaration: step.name.clone(),
                        item: Value::from(w),
                        key: format!("wave-{w}"),
                        wave: Some(w),
                    };
                    made(step, gate_name(&step.name, w), deps, origin)
                })
                .collect();
        }
        let mut plain = step.clone();
        plain.depends_on = step
            .depends_on
            .iter()
            .flat_map(|d| self.all_of(d))
            .collect();
        vec![plain]
    }

    /// What the step of item `j` of declaration `i` depends on.
    fn item_dependencies(&self, i: usize, step: &StepSpec, items: &Items, j: usize) -> Vec<String> {
        let key = &items.keys[j];
        let mut deps: Vec<String> = Vec::new();
        for dep in &step.depends_on {
            match &self.items[self.index[dep.as_str()]] {
                Some(other) => deps.extend(other.name_of(key).map(str::to_owned)),
                None => deps.extend(self.all_of(dep)),
            }
        }
        let wave = match (items.wave_size, items.waves[j]) {
            (Some(_), Some(w)) if w > 1 => w,
            _ => return deps,
        };
        match step.for_each.as_ref().and_then(|f| f.gate.as_ref()) {
            Some(gate) => deps.push(gate_name(gate, wave - 1)),
            None => deps.extend(self.after_wave[i][wave as usize - 2].iter().cloned()),
        }
        deps
    }

    /// What a gate's step after the wave of `keys` depends on.
    fn gate_dependencies(&self, gate: &StepSpec, keys: &[String]) -> Vec<String> {
        let mut deps = Vec::new();
        for dep in &gate.depends_on {
            match &self.items[self.index[dep.as_str()]] {
                Some(other) => deps.extend(
                    keys.iter()
                        .filter_map(|k| other.name_of(k))
                        .map(str::to_owned),
                ),
                None => deps.extend(self.all_of(dep)),
            }
        }
        deps
    }

    /// Every step declaration `name` became (fan-in): its items' steps, its gate's steps,
    /// or itself. A declaration of no items (hence a gate of no waves) stands for what it
    /// depends on, so its dependents still wait for that.
    fn all_of(&self, name: &str) -> Vec<String> {
        let i = self.index[name];
        let made = match (
            &self.items[i],
            self.gate_of[i].and_then(|d| self.items[d].as_ref()),
        ) {
            (Some(items), _) => items.names.clone(),
            (None, Some(gated)) => (1..=gated.wave_count())
                .map(|w| gate_name(name, w))
                .collect(),
            (None, None) => return vec![name.to_owned()],
        };
        if !made.is_empty() {
            return made;
        }
        let mut upstream: Vec<String> = Vec::new();
        for dep in &self.spec.steps[i].depends_on {
            for d in self.all_of(dep) {
                if !upstream.contains(&d) {
                    upstream.push(d);
                }
            }
        }
        upstream
    }
}

/// A step made from a declaration: everything carried over but the name, the
/// dependencies, the `for_each` (spent: never copied, so that `n` items cost `n`, not `n²`)
/// and the origin.
pub(crate) fn made(
    step: &StepSpec,
    name: String,
    depends_on: Vec<String>,
    origin: Origin,
) -> StepSpec {
    StepSpec {
        name,
        depends_on,
        idempotency: step.idempotency,
        has_compensation: step.has_compensation,
        retry: step.retry.clone(),
        timeout: step.timeout,
        attributes: step.attributes.clone(),
        trigger: step.trigger,
        condition: step.condition.clone(),
        for_each: None,
        origin: Some(origin),
        wait: step.wait,
    }
}

/// The graph of the declarations as written (its node `i` is step `i`).
pub(crate) fn declared_graph(spec: &WorkflowSpec) -> Result<Dag, AuthorError> {
    let steps: Vec<(&str, Vec<&str>)> = spec
        .steps
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.depends_on.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    Ok(Dag::build(&steps, usize::MAX)?)
}

/// The expanded graph is one: no name made twice, no cycle (through waves, say).
pub(crate) fn check_graph(spec: &WorkflowSpec) -> Result<(), AuthorError> {
    declared_graph(spec).map(|_| ())
}
