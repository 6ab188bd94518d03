//! The goals written beside BENCHMARKS.md's tables, one HTML comment a goal:
//!
//! `<!-- goal: SCENARIO ROW COLUMN OP BOUND -->`, OP `>=` or `<=`, BOUND a number or a
//! figure of the same run, `[FACTOR *] [ROW.]COLUMN` (the goal's own row when ROW is left
//! out). Each is checked against the scenario's JSON (`<out>/<scenario>.json`): met, MISSED
//! or not measured.

use crate::catalog::Scenario;
use clap::ValueEnum;
use serde_json::Value;

/// Opens a goal line.
const OPEN: &str = "<!-- goal:";
/// Closes it.
const CLOSE: &str = "-->";

/// One goal: a figure of one row of a scenario's JSON, held against a bound.
#[derive(Debug, PartialEq)]
pub struct Goal {
    /// Its line in the markdown, from 1.
    pub line: usize,
    pub scenario: Scenario,
    pub figure: Figure,
    pub at_least: bool,
    pub bound: Bound,
}

/// A cell of a scenario's JSON: the row carrying `row` as its key, and a column.
#[derive(Debug, PartialEq)]
pub struct Figure {
    pub row: String,
    pub column: String,
}

/// What a figure is held against.
#[derive(Debug, PartialEq)]
pub enum Bound {
    /// A number.
    Number(f64),
    /// Another figure of the same run, times a factor.
    Scaled(f64, Figure),
}

/// What a run says of a goal.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    Met { value: f64, bound: f64 },
    Missed { value: f64, bound: f64 },
    NotMeasured(String),
}

/// Every goal of `markdown` (outside fenced code blocks, where the syntax is shown), each
/// checked against its scenario's schema; an error lists every malformed goal line with its
/// line number.
pub fn parse(markdown: &str) -> Result<Vec<Goal>, String> {
    let (mut goals, mut problems, mut fenced) = (Vec::new(), Vec::new(), false);
    for (i, text) in markdown.lines().enumerate() {
        fenced ^= text.trim_start().starts_with("```");
        let Some(start) = text.find(OPEN).filter(|_| !fenced) else {
            continue;
        };
        match parse_line(i + 1, &text[start + OPEN.len()..]) {
            Ok(goal) => goals.push(goal),
            Err(why) => problems.push(format!("line {}: {why}: `{}`", i + 1, text.trim())),
        }
    }
    if problems.is_empty() {
        Ok(goals)
    } else {
        Err(problems.join("\n"))
    }
}

/// A goal from the text after `<!-- goal:`.
fn parse_line(line: usize, text: &str) -> Result<Goal, String> {
    let body = text
        .trim_end()
        .strip_suffix(CLOSE)
        .ok_or_else(|| format!("a goal ends with `{CLOSE}` on its own line"))?;
    let words: Vec<&str> = body.split_whitespace().collect();
    let [scenario, row, column, op, bound @ ..] = &words[..] else {
        return Err("expected `SCENARIO ROW COLUMN OP BOUND`".into());
    };
    let scenario = Scenario::from_str(scenario, false).map_err(|_| {
        format!(
            "no scenario `{scenario}`; known: {}",
            names(Scenario::value_variants())
        )
    })?;
    let at_least = match *op {
        ">=" => true,
        "<=" => false,
        other => return Err(format!("operator `{other}`: `>=` or `<=`")),
    };
    let figure = named(scenario, row, column)?;
    let bound = parse_bound(scenario, row, bound)?;
    Ok(Goal {
        line,
        scenario,
        figure,
        at_least,
        bound,
    })
}

/// `NUMBER`, or `[FACTOR *] [ROW.]COLUMN` with ROW defaulting to `own_row`.
fn parse_bound(scenario: Scenario, own_row: &str, words: &[&str]) -> Result<Bound, String> {
    let (factor, reference) = match words {
        [number] if number.parse::<f64>().is_ok() => {
            return Ok(Bound::Number(number.parse().unwrap_or_default()))
        }
        [reference] => (1.0, reference),
        [factor, "*", reference] => {
            let factor = factor
                .parse()
                .map_err(|_| format!("factor `{factor}` is not a number"))?;
            (factor, reference)
        }
        _ => return Err("bound: `NUMBER` or `[FACTOR *] [ROW.]COLUMN`".into()),
    };
    let (row, column) = reference.split_once('.').unwrap_or((own_row, reference));
    Ok(Bound::Scaled(factor, named(scenario, row, column)?))
}

/// The figure at `row`, `column`, both checked against the scenario's schema.
fn named(scenario: Scenario, row: &str, column: &str) -> Result<Figure, String> {
    let (schema, name) = (scenario.schema(), scenario.name());
    if !schema.rows.contains(&row) {
        return Err(format!(
            "{name} has no row `{row}`; rows: {}",
            schema.rows.join(", ")
        ));
    }
    if !schema.columns.contains(&column) {
        let columns = schema.columns.join(", ");
        return Err(format!(
            "{name} has no column `{column}`; columns: {columns}"
        ));
    }
    Ok(Figure {
        row: row.to_owned(),
        column: column.to_owned(),
    })
}

/// Scenario names, comma-separated.
pub fn names(scenarios: &[Scenario]) -> String {
    let names: Vec<String> = scenarios.iter().map(|s| s.name()).collect();
    names.join(", ")
}

impl Goal {
    /// Checks the goal against `run`, its scenario's JSON. Where several rows carry the
    /// goal's key, each must meet it.
    pub fn evaluate(&self, run: &Value) -> Outcome {
        let mut outcome = Outcome::NotMeasured(format!("no row `{}`", self.figure.row));
        for row in rows(run, &self.figure.row) {
            outcome = self.evaluate_row(run, row);
            if !matches!(outcome, Outcome::Met { .. }) {
                break;
            }
        }
        outcome
    }

    fn evaluate_row(&self, run: &Value, row: &Value) -> Outcome {
        let Some(value) = row[&self.figure.column].as_f64() else {
            return Outcome::NotMeasured(format!("no figure in {}", self.figure.column));
        };
        let bound = match &self.bound {
            Bound::Number(n) => *n,
            Bound::Scaled(factor, figure) => {
                let base = if figure.row == self.figure.row {
                    Some(row)
                } else {
                    rows(run, &figure.row).next()
                };
                match base.and_then(|r| r[&figure.column].as_f64()) {
                    Some(base) => factor * base,
                    None => return Outcome::NotMeasured(format!("no figure in {figure}")),
                }
            }
        };
        if (self.at_least && value >= bound) || (!self.at_least && value <= bound) {
            Outcome::Met { value, bound }
        } else {
            Outcome::Missed { value, bound }
        }
    }
}

/// The rows of `run` keyed `key`.
fn rows<'a>(run: &'a Value, key: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    let all = run["rows"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    all.iter().filter(move |r| r["row"] == key)
}

impl std::fmt::Display for Figure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.row, self.column)
    }
}

impl std::fmt::Display for Goal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let op = if self.at_least { ">=" } else { "<=" };
        let Figure { row, column } = &self.figure;
        write!(f, "{} {row} {column} {op} ", self.scenario.name())?;
        match &self.bound {
            Bound::Number(n) => write!(f, "{n}"),
            Bound::Scaled(factor, figure) => write!(f, "{factor} * {figure}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn goal(text: &str) -> Goal {
        let mut goals = parse(text).expect("a valid goal");
        assert_eq!(goals.len(), 1);
        goals.remove(0)
    }

    fn scheduler(ratio: Value) -> Value {
        json!({"scenario": "scheduler", "rows": [
            {"row": "runs", "steps_per_s": 40_000.0, "ratio_to_limit": null},
            {"row": "chain", "steps_per_s": 9_000.0, "ratio_to_limit": ratio},
        ]})
    }

    #[test]
    fn a_goal_met_and_missed() {
        let g = goal("<!-- goal: scheduler chain ratio_to_limit >= 0.5 -->");
        let met = Outcome::Met {
            value: 0.85,
            bound: 0.5,
        };
        assert_eq!(g.evaluate(&scheduler(json!(0.85))), met);
        let missed = Outcome::Missed {
            value: 0.4,
            bound: 0.5,
        };
        assert_eq!(g.evaluate(&scheduler(json!(0.4))), missed);
    }

    #[test]
    fn an_upper_bound() {
        let g = goal("<!-- goal: scheduler chain ratio_to_limit <= 0.5 -->");
        assert!(matches!(
            g.evaluate(&scheduler(json!(0.4))),
            Outcome::Met { .. }
        ));
        assert!(matches!(
            g.evaluate(&scheduler(json!(0.6))),
            Outcome::Missed { .. }
        ));
    }

    #[test]
    fn a_bound_from_another_row_of_the_run() {
        let g = goal("<!-- goal: scheduler chain steps_per_s >= 0.5 * runs.steps_per_s -->");
        assert_eq!(
            g.evaluate(&scheduler(json!(null))),
            Outcome::Missed {
                value: 9_000.0,
                bound: 20_000.0
            }
        );
        let g = goal("<!-- goal: scheduler chain steps_per_s >= 0.2 * runs.steps_per_s -->");
        assert!(matches!(
            g.evaluate(&scheduler(json!(null))),
            Outcome::Met { .. }
        ));
    }

    #[test]
    fn an_absent_figure_is_not_measured() {
        let g = goal("<!-- goal: scheduler chain ratio_to_limit >= 0.5 -->");
        assert!(matches!(
            g.evaluate(&scheduler(json!(null))),
            Outcome::NotMeasured(_)
        ));
        let g = goal("<!-- goal: scheduler wide steps_per_s >= 1 -->");
        assert!(matches!(
            g.evaluate(&scheduler(json!(0.8))),
            Outcome::NotMeasured(_)
        ));
        let g = goal("<!-- goal: scheduler runs steps_per_s >= 0.5 * runs.ratio_to_limit -->");
        assert!(matches!(
            g.evaluate(&scheduler(json!(0.8))),
            Outcome::NotMeasured(_)
        ));
    }

    #[test]
    fn every_row_with_the_key_must_meet_it() {
        let run = json!({"rows": [
            {"row": "gc", "pause_ms": 0.3},
            {"row": "gc", "pause_ms": 4.0},
        ]});
        let g = goal("<!-- goal: lifecycle gc pause_ms <= 1 -->");
        let missed = Outcome::Missed {
            value: 4.0,
            bound: 1.0,
        };
        assert_eq!(g.evaluate(&run), missed);
    }

    #[test]
    fn malformed_goals_are_named_with_their_line() {
        let text = "intro\n\
            <!-- goal: schedulr chain ratio_to_limit >= 0.5 -->\n\
            <!-- goal: scheduler chains ratio_to_limit >= 0.5 -->\n\
            <!-- goal: scheduler chain ratio >= 0.5 -->\n\
            <!-- goal: scheduler chain ratio_to_limit > 0.5 -->\n\
            <!-- goal: scheduler chain ratio_to_limit >= half -->\n\
            <!-- goal: scheduler chain ratio_to_limit >= 0.5\n\
            <!-- goal: scheduler chain -->\n\
            <!-- goal: scheduler chain ratio_to_limit >= 0.5 -->\n";
        let problems = parse(text).expect_err("malformed goals");
        let lines: Vec<&str> = problems.lines().collect();
        assert_eq!(lines.len(), 7, "{problems}");
        for (i, problem) in lines.iter().enumerate() {
            assert!(
                problem.starts_with(&format!("line {}:", i + 2)),
                "{problem}"
            );
        }
        assert!(lines[0].contains("no scenario `schedulr`"), "{problems}");
        assert!(lines[1].contains("no row `chains`"), "{problems}");
        assert!(lines[2].contains("no column `ratio`"), "{problems}");
        assert!(lines[3].contains("operator `>`"), "{problems}");
        assert!(lines[4].contains("no column `half`"), "{problems}");
    }

    #[test]
    fn a_goal_in_a_fenced_block_is_an_example() {
        let text = "```\n<!-- goal: SCENARIO ROW COLUMN OP BOUND -->\n```\n\
            <!-- goal: scheduler chain ratio_to_limit >= 0.5 -->\n";
        let goals = parse(text).expect("the example skipped");
        assert_eq!(goals.len(), 1);
        assert_eq!(goals[0].line, 4);
    }

    /// Every goal of BENCHMARKS.md parses and names a scenario, row and column that exist.
    #[test]
    fn benchmarks_md_goals_name_known_figures() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../BENCHMARKS.md");
        let text = std::fs::read_to_string(&path).expect("BENCHMARKS.md");
        let goals = parse(&text).unwrap_or_else(|e| panic!("BENCHMARKS.md:\n{e}"));
        assert!(goals.len() >= 20, "{} goals", goals.len());
        for scenario in [Scenario::Append, Scenario::Scheduler, Scenario::Workers] {
            assert!(goals.iter().any(|g| g.scenario == scenario), "{scenario:?}");
        }
    }
}
