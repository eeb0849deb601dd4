import { createApp, type App } from "../app.js";
import { loadConfig } from "../config.js";
import type { ParsedArgs } from "./args.js";

/** A CLI command: parsed arguments in, exit code out. */
export type Command = (args: ParsedArgs) => Promise<number>;

/** Opens the data store for an operator command (quiet logs), runs fn, closes it. */
export async function withApp<T>(fn: (app: App) => Promise<T>): Promise<T> {
  const app = await createApp({ config: { ...loadConfig(), logLevel: process.env.LOG_LEVEL ?? "warn" } });
  try {
    return await fn(app);
  } finally {
    await app.close();
  }
}
