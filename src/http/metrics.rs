//! Prometheus metrics through the `metrics` facade and its Prometheus
//! exporter: request counts and latency histograms per route template
//! (never per raw path, so ids do not explode the label space), and the
//! SQLite writer's group-commit counters. The recorder is this process's
//! handle in the application state, not a global one: `/metrics` renders
//! it.

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder};

const REQUESTS: &str = "ferrogate_http_requests_total";
const LATENCY: &str = "ferrogate_http_request_duration_seconds";
const COMMITS: &str = "ferrogate_sqlite_commits_total";
const WRITE_JOBS: &str = "ferrogate_sqlite_write_jobs_total";

const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

pub struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
}

impl Default for Metrics {
    fn default() -> Self {
        let builder = PrometheusBuilder::new();
        // Fixed buckets make the latency a histogram (not a summary);
        // the list is valid, so the fallback is never taken.
        let builder = match builder.set_buckets_for_metric(Matcher::Full(LATENCY.into()), BUCKETS) {
            Ok(b) => b,
            Err(_) => PrometheusBuilder::new(),
        };
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        let metrics = Metrics { recorder, handle };
        metrics.with(|| {
            metrics::describe_counter!(REQUESTS, "HTTP requests by route and status.");
            metrics::describe_histogram!(LATENCY, metrics::Unit::Seconds, "HTTP request latency by route.");
            metrics::describe_counter!(COMMITS, "Commits of the SQLite writer (group commit).");
            metrics::describe_counter!(WRITE_JOBS, "Write jobs carried by those commits.");
        });
        metrics
    }
}

impl Metrics {
    fn with(&self, f: impl FnOnce()) {
        metrics::with_local_recorder(&self.recorder, f)
    }

    pub fn observe(&self, method: &str, route: &str, status: u16, seconds: f64) {
        self.with(|| {
            metrics::counter!(REQUESTS, "method" => method.to_string(), "route" => route.to_string(),
                "status" => status.to_string())
            .increment(1);
            metrics::histogram!(LATENCY, "method" => method.to_string(), "route" => route.to_string())
                .record(seconds);
        });
    }

    /// The SQLite writer's totals so far (counters set to the value read).
    pub fn writer(&self, commits: u64, jobs: u64) {
        self.with(|| {
            metrics::counter!(COMMITS).absolute(commits);
            metrics::counter!(WRITE_JOBS).absolute(jobs);
        });
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        self.handle.render()
    }

    /// Folds recorded histogram samples into their buckets; run now and
    /// then so memory stays flat between scrapes.
    pub fn upkeep(&self) {
        self.handle.run_upkeep();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn renders_counts_and_buckets() {
        let m = super::Metrics::default();
        m.observe("GET", "/v2/contacts/{id}", 200, 0.003);
        m.observe("GET", "/v2/contacts/{id}", 404, 0.2);
        m.writer(7, 20);
        let text = m.render();
        assert!(
            text.contains(
                "ferrogate_http_requests_total{method=\"GET\",route=\"/v2/contacts/{id}\",status=\"200\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("# TYPE ferrogate_http_request_duration_seconds histogram"),
            "{text}"
        );
        assert!(text.contains("le=\"0.005\"} 1"), "{text}");
        assert!(text.contains("le=\"+Inf\"} 2"), "{text}");
        assert!(text.contains("ferrogate_sqlite_commits_total 7"), "{text}");
        assert!(text.contains("ferrogate_sqlite_write_jobs_total 20"), "{text}");
        assert!(text.contains("# HELP ferrogate_http_requests_total"), "{text}");
    }
}
