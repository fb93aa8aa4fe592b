import type { Command } from "./cli.js";

export const SWEEP_COMMANDS: Record<string, Command> = {};
