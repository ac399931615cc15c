//! Prometheus metrics: request counts and latency histograms per route
//! template (never per raw path, so ids do not explode the label space).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Default)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    latency: Mutex<BTreeMap<(String, String), Histogram>>,
}

impl Metrics {
    pub fn observe(&self, method: &str, route: &str, status: u16, seconds: f64) {
        {
            let mut requests = self.requests.lock().unwrap_or_else(|p| p.into_inner());
            *requests
                .entry((method.to_string(), route.to_string(), status))
                .or_default() += 1;
        }
        let mut latency = self.latency.lock().unwrap_or_else(|p| p.into_inner());
        let h = latency
            .entry((method.to_string(), route.to_string()))
            .or_insert_with(|| Histogram {
                counts: vec![0; BUCKETS.len()],
                ..Default::default()
            });
        for (i, bound) in BUCKETS.iter().enumerate() {
            if seconds <= *bound {
                h.counts[i] += 1;
            }
        }
        h.sum += seconds;
        h.count += 1;
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("# HELP ferrogate_http_requests_total HTTP requests by route and status.\n");
        out.push_str("# TYPE ferrogate_http_requests_total counter\n");
        for ((method, route, status), n) in self.requests.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = writeln!(
                out,
                "ferrogate_http_requests_total{{method=\"{method}\",route=\"{}\",status=\"{status}\"}} {n}",
                escape(route)
            );
        }
        out.push_str("# HELP ferrogate_http_request_duration_seconds HTTP request latency by route.\n");
        out.push_str("# TYPE ferrogate_http_request_duration_seconds histogram\n");
        for ((method, route), h) in self.latency.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let labels = format!("method=\"{method}\",route=\"{}\"", escape(route));
            for (bound, n) in BUCKETS.iter().zip(&h.counts) {
                let _ = writeln!(
                    out,
                    "ferrogate_http_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "ferrogate_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "ferrogate_http_request_duration_seconds_sum{{{labels}}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "ferrogate_http_request_duration_seconds_count{{{labels}}} {}",
                h.count
            );
        }
        out
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    #[test]
    fn renders_counts_and_buckets() {
        let m = super::Metrics::default();
        m.observe("GET", "/v2/contacts/{id}", 200, 0.003);
        m.observe("GET", "/v2/contacts/{id}", 404, 0.2);
        let text = m.render();
        assert!(text.contains(
            "ferrogate_http_requests_total{method=\"GET\",route=\"/v2/contacts/{id}\",status=\"200\"} 1"
        ));
        assert!(text.contains("le=\"0.005\"} 1"));
        assert!(text.contains("le=\"+Inf\"} 2"));
    }
}
