// Package promql checks the chart's alerts and Grafana dashboard with
// Prometheus's own PromQL parser, rule validation, query engine and rules
// manager, against the series a running operator exports. It is a module of its own so that
// github.com/prometheus/prometheus (and what it pulls in) stays out of the
// operator's dependencies; `make test` runs it.
package promql
