import { promqlLabelNames, promqlMetricNames } from "../support/promql-metric-names.js";

/**
 * The extractor the Grafana dashboard test relies on: if it missed a metric
 * name, a query on a metric nobody exports would pass that test.
 */
describe("the metric names of a PromQL expression", () => {
  test("a counter inside rate() and an aggregation with a by clause", () => {
    expect(
      promqlMetricNames('sum by (route, status_class) (rate(gatehouse_gateway_requests_total{route=~"$route"}[$__rate_interval]))'),
    ).toEqual(["gatehouse_gateway_requests_total"]);
  });

  test("histogram_quantile over buckets, a ratio, on/group_left, offsets, numbers and bool", () => {
    const expression = `histogram_quantile(0.99, sum(rate(a_seconds_bucket{le!="+Inf", code="ok"}[5m])) by (le))
      / on (instance) group_left (version) b_info offset 1h
      + (c_total > bool 1e-3) * 2 unless d:recorded:rate5m # e_total in a comment`;
    expect(promqlMetricNames(expression)).toEqual(["a_seconds_bucket", "b_info", "c_total", "d:recorded:rate5m"]);
  });

  test("label values and strings are not metric names; __name__ is", () => {
    expect(promqlMetricNames('label_replace(up_total{job="gatehouse_rpc_requests_total"}, "x", "$1", "instance", "(.*)")')).toEqual([
      "up_total",
    ]);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a Grafana variable, not a template
    expect(promqlMetricNames('{__name__="gatehouse_routes", instance=~"${gateway:regex}"}')).toEqual(["gatehouse_routes"]);
  });

  test("Grafana variable queries: label_values(metric, label) names the metric, label_values(label) none", () => {
    expect(promqlMetricNames('label_values(gatehouse_gateway_requests_total{instance=~"$gateway"}, route)')).toEqual([
      "gatehouse_gateway_requests_total",
    ]);
    expect(promqlMetricNames("label_values(instance)")).toEqual([]);
  });

  test("a metric name misspelt stays a name (so the dashboard test reports it); an unknown function throws", () => {
    expect(promqlMetricNames("rate(gatehouse_rpc_request_total[5m])")).toEqual(["gatehouse_rpc_request_total"]);
    expect(() => promqlMetricNames("rte(gatehouse_rpc_requests_total[5m])")).toThrow(/"rte\(" is not a PromQL function/);
    expect(() => promqlMetricNames("sum")).toThrow(/without its argument list/);
  });

  test("label names of selectors and grouping clauses", () => {
    expect(promqlLabelNames('sum by (service, le) (rate(x_bucket{code!="ok", instance=~"$p"}[1m])) / on(instance) y')).toEqual({
      selectors: [{ metric: "x_bucket", labels: ["code", "instance"] }],
      grouping: ["service", "le", "instance"],
    });
  });
});
