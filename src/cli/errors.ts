import { CommanderError } from "commander";
import { DomainError, type Violation } from "../domain/errors.js";

/** The exit codes docs/cli.md documents. */
export const exitCodes = { ok: 0, failure: 1, usage: 2 } as const;

/** A mistake in the command line, found by a command itself: exit 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
  constructor(
    message: string,
    /** Stable snake_case code for `--json` callers. */
    readonly code = "usage",
  ) {
    super(message);
  }
}

/** A failure the CLI finds itself (not a DomainError of the store or an answer of the API): exit 1. */
export class CliError extends Error {
  override readonly name: string = "CliError";
  constructor(
    /** Stable snake_case code for `--json` callers. */
    readonly code: string,
    message: string,
    readonly violations: readonly Violation[] = [],
  ) {
    super(message);
  }
}

/** What is printed for an error, and the exit code. */
export interface ErrorReport {
  /** The DomainError reason, the API's reason, or a usage code such as `unknown_option`. */
  code: string;
  message: string;
  violations: readonly Violation[];
  exitCode: number;
  /** A command-line mistake: the text form points at the command's help. */
  usage: boolean;
}

/** commander's error codes, renamed to the snake_case codes of the rest of Gatehouse. */
const commanderCodes: Record<string, string> = {
  "commander.unknownOption": "unknown_option",
  "commander.unknownCommand": "unknown_command",
  "commander.missingArgument": "missing_argument",
  "commander.optionMissingArgument": "missing_option_value",
  "commander.missingMandatoryOptionValue": "missing_option",
  "commander.invalidArgument": "invalid_value",
  "commander.excessArguments": "excess_arguments",
  "commander.conflictingOption": "conflicting_options",
  "commander.help": "missing_command",
};

/** Classifies anything thrown by a command into one report. */
export function reportOf(error: unknown): ErrorReport {
  if (error instanceof CommanderError) {
    return {
      code: commanderCodes[error.code] ?? "usage",
      // commander's messages start with "error: " and put a suggestion on a second line.
      message: error.message.replace(/^error: /, ""),
      violations: [],
      exitCode: exitCodes.usage,
      usage: true,
    };
  }
  if (error instanceof UsageError)
    return { code: error.code, message: error.message, violations: [], exitCode: exitCodes.usage, usage: true };
  if (error instanceof DomainError)
    return { code: error.reason, message: error.message, violations: error.violations, exitCode: exitCodes.failure, usage: false };
  if (error instanceof CliError)
    return { code: error.code, message: error.message, violations: error.violations, exitCode: exitCodes.failure, usage: false };
  return {
    code: "internal",
    message: error instanceof Error ? error.message : String(error),
    violations: [],
    exitCode: exitCodes.failure,
    usage: false,
  };
}

/**
 * The text form: one `gatehouse: ...` line, or a count followed by one line
 * per violation (never the one-line summary and the list both).
 */
export function formatErrorText(report: ErrorReport): string {
  if (report.violations.length > 1) {
    return `gatehouse: ${report.violations.length} problems:\n${report.violations.map((v) => `  ${v.field}: ${v.description}\n`).join("")}`;
  }
  return `gatehouse: ${report.message}\n`;
}

/** The `--json` form: one line on stderr. */
export function formatErrorJson(report: ErrorReport): string {
  const body: { code: string; message: string; violations?: readonly Violation[] } = {
    code: report.code,
    message: report.message.replace(/\s*\n\s*/g, " "),
  };
  if (report.violations.length > 0) body.violations = report.violations;
  return `${JSON.stringify(body)}\n`;
}
