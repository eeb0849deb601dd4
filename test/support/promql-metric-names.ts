/**
 * The metric names a PromQL expression (as a Grafana panel or variable holds
 * it) selects: enough of PromQL to tell metric names from functions,
 * aggregation operators, keywords, label names and Grafana's variables.
 * Throws on a call of a function PromQL does not have, so a typo cannot hide
 * a metric name behind it.
 */
export function promqlMetricNames(expression: string): string[] {
  let text = expression
    // Grafana's variables: $name, ${name}, ${name:format}, [[name]].
    .replace(/\$\{[^}]*\}|\$[A-Za-z_]\w*|\[\[[^\]]*\]\]/g, " ")
    // String literals (label values, label_replace arguments) become placeholders, then comments go.
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/#[^\n]*/g, " ");
  // {__name__="x"} selects a metric by label; every other matcher names a label.
  const names = [...expression.matchAll(/__name__\s*=\s*"([^"]+)"/g)].map((match) => match[1] as string);
  text = text
    .replace(/\{[^}]*\}/g, " ")
    // Ranges, subqueries and offsets: [5m], [1h:1m], offset 5m, @ 1700000000.
    .replace(/\[[^\]]*\]/g, " ")
    .replace(/\boffset\s+-?[\d.]+[a-z]+/gi, " ")
    .replace(/@\s*(?:start\(\)|end\(\)|[\d.]+)/g, " ")
    // Label lists of grouping and vector matching: by (a, b), without (a), on (a), ignoring (a), group_left (a).
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/gi, " ")
    .replace(/""/g, " ");
  // label_values(metric, label) (a Grafana variable query): its last argument is a label name.
  // With one argument, that argument is the label name and no metric is named.
  text = text.replace(/\blabel_values\s*\(([^(),]*)(,[^(),]*)?\)/g, (_, first: string, second?: string) => (second ? ` ${first} ` : " "));
  // Numbers, including 1e-3, 0x1f, durations such as 5m (when not already inside brackets).
  text = text.replace(/(?<![\w:])(?:0x[\da-f]+|\d+(?:\.\d*)?(?:e[+-]?\d+)?(?:ms|s|m|h|d|w|y)?|\.\d+(?:e[+-]?\d+)?)(?![\w:])/gi, " ");
  for (const match of text.matchAll(/[A-Za-z_:][\w:]*/g)) {
    const word = match[0];
    const index = match.index ?? 0;
    const followedByParen = /^\s*\(/.test(text.slice(index + word.length));
    const lower = word.toLowerCase();
    if (keywords.has(lower)) continue;
    if (followedByParen) {
      if (functions.has(word) || aggregations.has(lower)) continue;
      throw new Error(`"${word}(" is not a PromQL function, in: ${expression}`);
    }
    if (aggregations.has(lower) || functions.has(word)) {
      throw new Error(`"${word}" without its argument list, in: ${expression}`);
    }
    names.push(word);
  }
  return [...new Set(names)].sort();
}

const keywords = new Set([
  "and",
  "or",
  "unless",
  "bool",
  "by",
  "without",
  "on",
  "ignoring",
  "group_left",
  "group_right",
  "offset",
  "inf",
  "nan",
]);

const aggregations = new Set([
  "sum",
  "min",
  "max",
  "avg",
  "group",
  "stddev",
  "stdvar",
  "count",
  "count_values",
  "bottomk",
  "topk",
  "quantile",
  "limitk",
  "limit_ratio",
]);

/** PromQL's functions (Prometheus 2.x and 3.x), plus the query functions of Grafana's variable editor. */
const functions = new Set([
  "abs",
  "absent",
  "absent_over_time",
  "acos",
  "acosh",
  "asin",
  "asinh",
  "atan",
  "atanh",
  "avg_over_time",
  "ceil",
  "changes",
  "clamp",
  "clamp_max",
  "clamp_min",
  "cos",
  "cosh",
  "count_over_time",
  "day_of_month",
  "day_of_week",
  "day_of_year",
  "days_in_month",
  "deg",
  "delta",
  "deriv",
  "exp",
  "floor",
  "histogram_avg",
  "histogram_count",
  "histogram_fraction",
  "histogram_quantile",
  "histogram_stddev",
  "histogram_stdvar",
  "histogram_sum",
  "holt_winters",
  "double_exponential_smoothing",
  "hour",
  "idelta",
  "increase",
  "irate",
  "label_join",
  "label_replace",
  "last_over_time",
  "ln",
  "log10",
  "log2",
  "mad_over_time",
  "max_over_time",
  "min_over_time",
  "minute",
  "month",
  "pi",
  "predict_linear",
  "present_over_time",
  "quantile_over_time",
  "rad",
  "rate",
  "resets",
  "round",
  "scalar",
  "sgn",
  "sin",
  "sinh",
  "sort",
  "sort_by_label",
  "sort_by_label_desc",
  "sort_desc",
  "sqrt",
  "stddev_over_time",
  "stdvar_over_time",
  "sum_over_time",
  "tan",
  "tanh",
  "time",
  "timestamp",
  "vector",
  "year",
  // Grafana's Prometheus variable queries.
  "label_values",
  "label_names",
  "metrics",
  "query_result",
]);

/**
 * The label names an expression uses: those of each `metric{...}` selector
 * (by metric) and those of its grouping and matching clauses (by, without,
 * on, ignoring, group_left, group_right).
 */
export function promqlLabelNames(expression: string): { selectors: { metric: string; labels: string[] }[]; grouping: string[] } {
  const text = expression.replace(/\$\{[^}]*\}|\$[A-Za-z_]\w*|\[\[[^\]]*\]\]/g, "").replace(/"(?:[^"\\]|\\.)*"/g, '""');
  const selectors = [...text.matchAll(/([A-Za-z_:][\w:]*)\s*\{([^}]*)\}/g)].map((match) => ({
    metric: match[1] as string,
    labels: [...(match[2] as string).matchAll(/([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)/g)].map((label) => label[1] as string),
  }));
  const grouping = [...text.matchAll(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/gi)].flatMap((match) =>
    (match[1] as string)
      .split(",")
      .map((label) => label.trim())
      .filter((label) => label !== ""),
  );
  return { selectors, grouping };
}
