import type { Command } from "./command.js";

/** `gatehouse settings set`: operator command on identity settings (identity issue). */
export const settingsCommands: Record<string, Command> = {};

export const settingsUsage = "";
