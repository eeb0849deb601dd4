import { type Command, CommanderError } from "commander";
import { commandGroups } from "./commands/index.js";
import { exitCodes, reportOf } from "./errors.js";
import { createOutput, type OutputStreams } from "./output.js";
import { createProgram } from "./program.js";

/** The words before a bare `--` (after it, they belong to the command `run` starts). */
function ownWords(argv: readonly string[]): readonly string[] {
  const end = argv.indexOf("--");
  return end === -1 ? argv : argv.slice(0, end);
}

/** How far the words lead into the command tree, and the first word that leads nowhere. */
export function resolveCommand(program: Command, argv: readonly string[]): { path: Command[]; unknown?: string } {
  const path = [program];
  for (const word of ownWords(argv)) {
    if (word.startsWith("-")) continue;
    const current = path.at(-1) as Command;
    if (current.commands.length === 0) break;
    const next = current.commands.find((c) => c.name() === word || c.aliases().includes(word));
    if (!next) return word === "help" ? { path } : { path, unknown: word };
    path.push(next);
  }
  return { path };
}

/**
 * `gatehouse help keys create` is `gatehouse keys create --help`. commander's
 * own help command reads one word only, and `--help` after an unknown command
 * would show the program's help instead of refusing the command; both are
 * settled here, before commander parses, so that an unknown command is always
 * an error with a suggestion.
 */
function withHelpResolved(program: Command, argv: readonly string[]): string[] {
  const words = [...argv];
  const first = words.findIndex((word) => !word.startsWith("-"));
  if (first !== -1 && words[first] === "help" && !words.slice(0, first).includes("--")) {
    words.splice(first, 1);
    const { unknown } = resolveCommand(program, words);
    // An unknown word is left for commander to refuse, with its suggestion.
    if (!unknown) words.push("--help");
  }
  if (resolveCommand(program, words).unknown === undefined) return words;
  const end = words.indexOf("--");
  const own = (end === -1 ? words : words.slice(0, end)).filter((word) => word !== "--help" && word !== "-h");
  return end === -1 ? own : [...own, ...words.slice(end)];
}

/** Runs the command line; resolves to the exit code (0 ok, 1 failure, 2 usage). */
export async function main(argv: readonly string[], streams: OutputStreams = process): Promise<number> {
  const out = createOutput({ ...streams, json: ownWords(argv).includes("--json") });
  let exitCode: number = exitCodes.ok;
  const program = createProgram(
    {
      out,
      argv,
      exitWith: (code) => {
        exitCode = code;
      },
    },
    commandGroups,
  );
  try {
    await program.parseAsync(withHelpResolved(program, argv), { from: "user" });
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError && (error.code === "commander.helpDisplayed" || error.code === "commander.version")) {
      return exitCodes.ok;
    }
    const report = reportOf(error);
    const { path } = resolveCommand(program, argv);
    const command = path.at(-1) as Command;
    const name = path.map((c) => c.name()).join(" ");
    if (report.code === "missing_command") {
      // A group on its own (`gatehouse keys`): say so, then show what it offers.
      const names = command.commands.map((c) => c.name()).join(", ");
      report.message =
        path.length > 1 ? `${name.slice(program.name().length + 1)} needs a command: ${names}` : `a command is needed: ${names}`;
      out.error(report, out.json ? undefined : `\n${command.helpInformation()}`);
    } else {
      out.error(report, report.usage ? `Run "${name} --help" for usage.` : undefined);
    }
    return report.exitCode;
  }
}
