import type { Command } from "./command.js";

/** `gatehouse secrets ...` and `gatehouse run`: clients of the public Secrets API (secrets issue). */
export const secretsCommands: Record<string, Command> = {};

export const secretsUsage = "";
