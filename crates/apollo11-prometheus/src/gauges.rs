//! Gauges computed when scraped: a count of what a process holds now (workers connected,
//! tries queued by label set) is read at each scrape instead of recorded, so a series
//! whose thing is gone is gone from the text, not kept at its last value.

use metrics_exporter_prometheus::formatting::{
    sanitize_label_value, write_help_line, write_type_line,
};
use std::fmt::Write;

/// A gauge and its samples now.
#[derive(Clone, Debug, PartialEq)]
pub struct Gauge<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its `# HELP` text.
    pub help: &'a str,
    /// Its series; none at all renders only the help and type lines.
    pub samples: Vec<Sample<'a>>,
}

/// One series of a [`Gauge`].
#[derive(Clone, Debug, PartialEq)]
pub struct Sample<'a> {
    /// Its labels (names as given; values escaped when rendered).
    pub labels: Vec<(&'a str, String)>,
    /// Its value.
    pub value: f64,
}

impl<'a> Sample<'a> {
    /// A sample of `value` with `labels`.
    pub fn new(labels: &[(&'a str, &str)], value: f64) -> Sample<'a> {
        let labels = labels.iter().map(|(k, v)| (*k, (*v).to_owned()));
        Sample {
            labels: labels.collect(),
            value,
        }
    }
}

/// Appends `gauges` to `text` in the text exposition format.
pub(crate) fn render(text: &mut String, gauges: &[Gauge<'_>]) {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    for gauge in gauges {
        write_help_line(text, gauge.name, None, None, gauge.help);
        write_type_line(text, gauge.name, None, None, "gauge");
        for sample in &gauge.samples {
            text.push_str(gauge.name);
            let labels: Vec<String> = (sample.labels.iter())
                .map(|(k, v)| format!("{k}=\"{}\"", sanitize_label_value(v)))
                .collect();
            if !labels.is_empty() {
                let _ = write!(text, "{{{}}}", labels.join(","));
            }
            let _ = writeln!(text, " {}", sample.value);
        }
        text.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_render_with_their_help_type_and_escaped_labels() {
        let mut text = String::from("# TYPE recorded counter\nrecorded 1");
        let gauges = [
            Gauge {
                name: "queued",
                help: "Tries waiting.",
                samples: vec![
                    Sample::new(
                        &[("needs", "role=db,zone=\"a\\b\""), ("matched", "true")],
                        2.0,
                    ),
                    Sample::new(&[], 0.5),
                ],
            },
            Gauge {
                name: "none_now",
                help: "Nothing.",
                samples: Vec::new(),
            },
        ];
        render(&mut text, &gauges);
        let expected = r#"# TYPE recorded counter
recorded 1
# HELP queued Tries waiting.
# TYPE queued gauge
queued{needs="role=db,zone=\"a\\b\"",matched="true"} 2
queued 0.5

# HELP none_now Nothing.
# TYPE none_now gauge

"#;
        assert_eq!(text, expected);
    }
}
