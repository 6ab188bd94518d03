//! `/metrics` as a scrape sees it: a real workflow on the real file log with the recorder
//! installed, rendered, every metric of docs/metrics.md checked for sane values, and the
//! text passed through Prometheus's own parser (`promtool check metrics`).

mod run;
mod scrape;
mod writable;

use apollo11_prometheus::Prometheus;
use std::sync::OnceLock;

/// The process's recorder, installed once for every test of this binary.
fn prometheus() -> &'static Prometheus {
    static PROMETHEUS: OnceLock<Prometheus> = OnceLock::new();
    PROMETHEUS.get_or_init(|| {
        let prometheus = apollo11_prometheus::install(&[
            apollo11_log::metrics::HISTOGRAM_BUCKETS,
            apollo11_runtime::metrics::HISTOGRAM_BUCKETS,
        ])
        .expect("the first install succeeds");
        apollo11_log::metrics::describe();
        apollo11_runtime::metrics::describe();
        prometheus
    })
}

/// Tests that read the process-wide metrics take turns.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[test]
fn a_second_install_is_refused() {
    prometheus();
    let error = apollo11_prometheus::install(&[]).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("installing the Prometheus recorder"),
        "{error}"
    );
}
