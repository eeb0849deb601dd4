import { problemOf, type Problem } from "./client.js";
import type { Field } from "./dom.js";

type AnyField = Field<HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement>;

/**
 * Shows a failed call: each violation next to the field it names (the server's
 * snake_case field path, with or without a prefix such as `settings.`), and the
 * rest in the form's status region. Returns the problem.
 */
export function showProblem(
  error: unknown,
  fields: Record<string, AnyField>,
  status: { show(message: string, kind?: "info" | "error" | "success"): void },
  prefix = "",
): Problem {
  const problem = problemOf(error);
  for (const f of Object.values(fields)) f.setError(null);
  const unplaced: string[] = [];
  let first: AnyField | undefined;
  for (const violation of problem.violations) {
    const path = violation.field.startsWith(prefix) ? violation.field.slice(prefix.length) : violation.field;
    const name = path.replace(/\[\d+\]$/, "");
    const target = fields[name];
    if (target) {
      target.setError(path === name ? violation.description : `${path}: ${violation.description}`);
      first ??= target;
    } else {
      unplaced.push(`${violation.field}: ${violation.description}`);
    }
  }
  if (problem.violations.length === 0 || unplaced.length > 0) {
    status.show(unplaced.length > 0 ? unplaced.join("; ") : problem.message, "error");
  } else {
    status.show("Please correct the highlighted fields.", "error");
  }
  first?.control.focus();
  return problem;
}

export function clearErrors(fields: Record<string, AnyField>): void {
  for (const f of Object.values(fields)) f.setError(null);
}
