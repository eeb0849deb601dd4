/** A small parser for `command sub --flag value --switch -- rest` command lines. */
export interface ParsedArgs {
  positionals: string[];
  flags: Map<string, string[]>;
  switches: Set<string>;
  /** Everything after a bare `--`. */
  rest: string[];
}

export function parseArgs(argv: readonly string[], switchNames: readonly string[]): ParsedArgs {
  const parsed: ParsedArgs = { positionals: [], flags: new Map(), switches: new Set(), rest: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--") {
      parsed.rest = argv.slice(i + 1);
      break;
    }
    if (arg.startsWith("--")) {
      const eq = arg.indexOf("=");
      const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
      if (switchNames.includes(name) && eq === -1) {
        parsed.switches.add(name);
        continue;
      }
      const value = eq === -1 ? argv[++i] : arg.slice(eq + 1);
      if (value === undefined) throw new UsageError(`--${name} needs a value`);
      parsed.flags.set(name, [...(parsed.flags.get(name) ?? []), value]);
      continue;
    }
    parsed.positionals.push(arg);
  }
  return parsed;
}

export class UsageError extends Error {
  override readonly name = "UsageError";
}

export function requireFlag(args: ParsedArgs, name: string): string {
  const value = args.flags.get(name)?.at(-1);
  if (value === undefined || value === "") throw new UsageError(`--${name} is required`);
  return value;
}
