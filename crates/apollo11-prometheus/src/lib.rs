#![doc = include_str!("../README.md")]
#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

mod gauges;
#[cfg(feature = "testing")]
pub mod promtool;

pub use gauges::{Gauge, Sample};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use std::time::Duration;

/// How often histogram samples are folded into their buckets between scrapes, so that a
/// process nobody scrapes keeps bounded memory.
pub const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Histogram buckets for one crate's metrics: `(metric name, upper bounds)`.
pub type Buckets<'a> = &'a [(&'a str, &'a [f64])];

/// Why the recorder could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The buckets given for a metric are unusable.
    #[error("histogram buckets of {metric}: {reason}")]
    Buckets {
        /// The metric.
        metric: String,
        /// What is wrong with them.
        reason: String,
    },
    /// Another recorder is installed in this process already (one per process).
    #[error("installing the Prometheus recorder: {0}")]
    Install(#[source] BuildError),
    /// The upkeep thread could not be started.
    #[error("starting the metrics upkeep thread: {0}")]
    Upkeep(#[source] std::io::Error),
}

/// The installed recorder: renders every metric in the Prometheus text format.
#[derive(Clone, Debug)]
pub struct Prometheus {
    handle: PrometheusHandle,
}

impl Prometheus {
    /// Every metric recorded so far, in the Prometheus text exposition format (what
    /// `GET /metrics` answers, `text/plain; version=0.0.4`).
    pub fn render(&self) -> String {
        self.handle.render()
    }

    /// [`Prometheus::render`], then `gauges`: the values a process computes when scraped
    /// rather than records (counts of what it holds now).
    pub fn render_with(&self, gauges: &[Gauge<'_>]) -> String {
        let mut text = self.render();
        gauges::render(&mut text, gauges);
        text
    }
}

/// Installs the Prometheus recorder as this process's `metrics` recorder, with `buckets`
/// for the histograms they name (any other histogram is rendered as a summary), and starts
/// a thread that folds histogram samples every [`UPKEEP_EVERY`].
///
/// # Errors
///
/// [`InstallError::Buckets`] naming the metric whose buckets are empty or not increasing;
/// [`InstallError::Install`] when a recorder is installed already.
pub fn install(buckets: &[Buckets<'_>]) -> Result<Prometheus, InstallError> {
    let mut builder = PrometheusBuilder::new();
    for &(metric, bounds) in buckets.iter().flat_map(|b| b.iter()) {
        check_bounds(metric, bounds)?;
        builder = builder
            .set_buckets_for_metric(Matcher::Full(metric.to_owned()), bounds)
            .map_err(|e| InstallError::Buckets {
                metric: metric.to_owned(),
                reason: e.to_string(),
            })?;
    }
    let handle = builder.install_recorder().map_err(InstallError::Install)?;
    let upkeep = handle.clone();
    std::thread::Builder::new()
        .name("apollo11-metrics-upkeep".into())
        .spawn(move || loop {
            std::thread::sleep(UPKEEP_EVERY);
            upkeep.run_upkeep();
        })
        .map_err(InstallError::Upkeep)?;
    Ok(Prometheus { handle })
}

/// Bucket bounds must be finite and strictly increasing: Prometheus reads `le` as ordered.
fn check_bounds(metric: &str, bounds: &[f64]) -> Result<(), InstallError> {
    let problem = if bounds.is_empty() {
        Some("no bounds".to_owned())
    } else if let Some(b) = bounds.iter().find(|b| !b.is_finite()) {
        Some(format!("{b} is not a finite bound"))
    } else {
        bounds
            .windows(2)
            .find(|w| w[0] >= w[1])
            .map(|w| format!("{} does not grow past {}", w[1], w[0]))
    };
    match problem {
        Some(reason) => Err(InstallError::Buckets {
            metric: metric.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_buckets_are_refused_naming_the_metric() {
        let cases: [(&[f64], &str); 3] = [
            (&[], "no bounds"),
            (&[1.0, f64::NAN], "NaN is not a finite bound"),
            (&[0.1, 0.5, 0.5], "0.5 does not grow past 0.5"),
        ];
        for (bounds, reason) in cases {
            let error = install(&[&[("apollo11_x_seconds", bounds)]]).unwrap_err();
            assert_eq!(
                error.to_string(),
                format!("histogram buckets of apollo11_x_seconds: {reason}")
            );
        }
    }
}
