//! Reads samples back from the text format, as a scraper would.

use std::collections::BTreeMap;

/// One sample: metric name, labels, value.
#[derive(Debug)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Every sample of a scrape (comments skipped). Panics naming the line it cannot read.
pub fn samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|line| sample(line).unwrap_or_else(|| panic!("unreadable sample line: {line:?}")))
        .collect()
}

fn sample(line: &str) -> Option<Sample> {
    let (series, value) = line.rsplit_once(' ')?;
    let (name, labels) = match series.split_once('{') {
        Some((name, rest)) => (name, labels(rest.strip_suffix('}')?)?),
        None => (series, BTreeMap::new()),
    };
    Some(Sample {
        name: name.to_owned(),
        labels,
        value: value.parse().ok()?,
    })
}

/// `k="v",k2="v2"` (the values written here hold no quote or comma).
fn labels(text: &str) -> Option<BTreeMap<String, String>> {
    text.split(',')
        .map(|pair| {
            let (k, v) = pair.split_once('=')?;
            Some((
                k.to_owned(),
                v.strip_prefix('"')?.strip_suffix('"')?.to_owned(),
            ))
        })
        .collect()
}

/// The value of the one sample named `name` with exactly `labels`; panics naming it when
/// there is none.
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let wanted: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    samples
        .iter()
        .find(|s| s.name == name && s.labels == wanted)
        .unwrap_or_else(|| panic!("no sample {name}{labels:?} in the scrape"))
        .value
}
