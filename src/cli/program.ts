import { readFileSync } from "node:fs";
import { Command, type Option } from "commander";
import type { Output } from "./output.js";

/** What every command group gets from the program that runs it. */
export interface Cli {
  /** Where results, errors and progress go (JSON with the global --json). */
  readonly out: Output;
  /** The command line as given (`run` needs to see its `--`). */
  readonly argv: readonly string[];
  /** Sets the exit code of a run that neither succeeds nor throws (`run`: the child's code). */
  exitWith(code: number): void;
}

/** Headings of the program's help, so the two kinds of command are told apart. */
export const helpGroups = {
  operator: "Operator commands (act on the data store directly):",
  api: "Secrets commands (clients of the public API):",
} as const;

/** A command group: one file under src/cli/commands that adds its commands to the program. */
export type CommandGroup = (program: Command, cli: Cli) => void;

/**
 * commander's Command with one rule added: an option that needs a value never
 * takes the next option as its value. commander reads `--name --role admin` as
 * name "--role"; here that is a usage error, and `--name=--role` is how to
 * give a value that starts with "-". Subcommands are of this class too
 * (createCommand is commander's documented hook for that).
 */
export class GatehouseCommand extends Command {
  override createCommand(name?: string): Command {
    return new GatehouseCommand(name);
  }

  /**
   * commander checks required options before unknown ones, so `--ogr x` would
   * say "required option '--org' not specified" instead of suggesting --org.
   * Required options are therefore checked by the program's preAction hook
   * (see createProgram), after commander has refused unknown options.
   */
  override addOption(option: Option): this {
    if (option.mandatory) {
      option.mandatory = false;
      requiredOptions.add(option);
    }
    return super.addOption(option);
  }

  override parseOptions(argv: string[]) {
    for (let i = 0; i < argv.length; i++) {
      const arg = argv[i] as string;
      if (arg === "--") break;
      const option = this.options.find((o) => o.required && (arg === o.long || arg === o.short));
      if (!option) continue;
      const next = argv[i + 1];
      if (next !== undefined && next.length > 1 && next.startsWith("-") && !/^-\d/.test(next)) {
        this.error(
          `error: option '${option.flags}' needs a value, but '${next}' follows it; write ${option.long ?? option.short}=${next} for a value that starts with "-"`,
          { code: "commander.optionMissingArgument", exitCode: 2 },
        );
      }
      i++;
    }
    return super.parseOptions(argv);
  }
}

/** Options declared required, checked before each action (GatehouseCommand.addOption says why). */
const requiredOptions = new WeakSet<Option>();

function checkRequiredOptions(command: Command): void {
  for (const option of command.options) {
    if (requiredOptions.has(option) && command.getOptionValue(option.attributeName()) === undefined) {
      command.error(`error: required option '${option.flags}' not specified`, {
        code: "commander.missingMandatoryOptionValue",
        exitCode: 2,
      });
    }
  }
}

/** The version of package.json, found from here in the sources and in dist/ alike. */
export function packageVersion(): string {
  for (let up = "../"; up.length <= 5 * 3; up += "../") {
    try {
      const pkg = JSON.parse(readFileSync(new URL(`${up}package.json`, import.meta.url), "utf8")) as { name?: string; version?: string };
      if (pkg.name === "gatehouse" && pkg.version) return pkg.version;
    } catch {
      // not at this level
    }
  }
  return "unknown";
}

/** Adds an "Examples:" section to a command's help. */
export function examples(command: Command, lines: readonly string[]): Command {
  return command.addHelpText("after", `\nExamples:\n${lines.map((line) => `  ${line}`).join("\n")}`);
}

const programHelp = `
Operator commands (init, serve, orgs, keys, consumers, sessions, settings, signing-key,
master-key, operators, webhooks, secrets rotate-key) act on the data store directly, never through
the API: DATABASE_URL, GATEHOUSE_DATA_DIR and the master keys as for the server.
gateway runs a standalone gateway.
Secrets commands (secrets, run) are clients of the public API: set GATEHOUSE_URL,
GATEHOUSE_API_KEY (an admin API key) and GATEHOUSE_ORG.

Exit codes: 0 success, 1 failure, 2 usage error (unknown command or option, missing value).
With --json, results are JSON on stdout and an error is one JSON line on stderr:
{"code": "...", "message": "..."}.

Run "gatehouse help <command>" or "gatehouse <command> --help" for a command's options.
Documentation: docs/cli.md.`;

/**
 * The gatehouse program: global options, help, suggestions and exit handling
 * here; each command group registers itself from its own file.
 */
export function createProgram(cli: Cli, groups: readonly CommandGroup[]): Command {
  const program = new GatehouseCommand("gatehouse")
    .description("Gateway configuration, sealed secrets and passkey-first identity for API teams.")
    .version(packageVersion(), "-V, --version", "print the version and exit")
    .helpOption("-h, --help", "show help for the command")
    .helpCommand("help [command]", "show help for a command (also: gatehouse <command> --help)")
    .option("--json", "print results as JSON on stdout, and errors as one JSON line on stderr")
    .showSuggestionAfterError(true)
    .configureHelp({ showGlobalOptions: true })
    // Errors are printed once, by main, in text or JSON; help goes to stdout.
    .configureOutput({
      writeOut: (text) => cli.out.write(text),
      writeErr: () => {},
      outputError: () => {},
    })
    .exitOverride()
    .hook("preAction", (_program, command) => checkRequiredOptions(command))
    .addHelpText("after", programHelp);
  // Set before any subcommand exists: commander copies these settings into each one.
  for (const register of groups) register(program, cli);
  return program;
}
