#!/usr/bin/env node
/**
 * `neens-eval`: the TypeScript twin of the Python `neens` client commands, with the same flags,
 * environment variables, `--json` documents and exit codes.
 *
 *     neens-eval run ...            is   neens eval run ...
 *     neens-eval push ...           is   neens eval push ...
 *     neens-eval datasets-push ...  is   neens datasets push ...
 *     neens-eval sweep-preview|sweep-start|sweep-get|sweep-cancel|sweep-decide ...
 *                                   is   neens sweep preview|start|get|cancel|decide ...
 */

import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { type CommandSpec, type Parsed, UsageError, parseArgs } from "./args.js";
import { DATASETS_PUSH_SPEC, datasetsPushCommand } from "./datasets.js";
import { EXIT_USAGE, NeensClientError } from "./errors.js";
import { PUSH_SPEC, RUN_SPEC } from "./evalArgs.js";
import { pushCommand, runCommand } from "./evalRun.js";
import { SWEEP_COMMANDS } from "./sweep.js";
import { VERSION } from "./version.js";

export interface Command {
  spec: CommandSpec;
  handler: (args: Parsed) => Promise<number>;
  summary: string;
}

export const COMMANDS: Record<string, Command> = {
  run: { spec: RUN_SPEC, handler: (args) => runCommand(args), summary: "run your agent command once per golden prompt, then gate" },
  push: { spec: PUSH_SPEC, handler: (args) => pushCommand(args), summary: "have Neens call your agent endpoint once per golden prompt, then gate" },
  "datasets-push": { spec: DATASETS_PUSH_SPEC, handler: (args) => datasetsPushCommand(args), summary: "upload a JSONL file as a new version of a dataset" },
  ...SWEEP_COMMANDS,
};

function topHelp(): string {
  const rows = Object.entries(COMMANDS).map(([name, command]) => `  ${name.padEnd(16)}${command.summary}`);
  return (
    "usage: neens-eval COMMAND [options]\n\n" +
    "Neens from a terminal or a CI job: push datasets, run evaluation gates, compare models with sweeps.\n" +
    "The TypeScript twin of the Python `neens` command: same flags, same exit codes.\n\n" +
    `commands:\n${rows.join("\n")}\n\n` +
    "Client commands read NEENS_BASE_URL and NEENS_API_KEY from the environment. Run\n" +
    "`neens-eval COMMAND --help` for the options of a command.\n"
  );
}

/** Run `neens-eval` with `argv` and return the exit code. */
export async function main(argv: readonly string[] = process.argv.slice(2)): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined) {
    process.stderr.write(topHelp());
    return EXIT_USAGE;
  }
  if (name === "-h" || name === "--help") {
    process.stdout.write(topHelp());
    return 0;
  }
  if (name === "--version") {
    process.stdout.write(`neens-eval ${VERSION}\n`);
    return 0;
  }
  const command = COMMANDS[name];
  if (command === undefined) {
    process.stderr.write(
      `usage: neens-eval COMMAND [options]\nneens-eval: error: argument COMMAND: invalid choice: '${name}' ` +
        `(choose from ${Object.keys(COMMANDS).map((n) => `'${n}'`).join(", ")})\n`,
    );
    return EXIT_USAGE;
  }
  let args: Parsed | null;
  try {
    args = parseArgs(command.spec, rest);
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`usage: ${command.spec.usage}\nneens-eval ${name}: error: ${error.message}\n`);
      return EXIT_USAGE;
    }
    throw error;
  }
  if (args === null) return 0;
  try {
    return await command.handler(args);
  } catch (error) {
    if (error instanceof NeensClientError) {
      process.stderr.write(`neens: error: ${error.message}\n`);
      return error.exitCode;
    }
    throw error;
  }
}

function invokedDirectly(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (invokedDirectly()) {
  // Ctrl-C stops only the waiting (a run or sweep goes on at the server): say so, exit 130.
  // `run` also kills its agent commands, and treats SIGTERM the same (see evalRun.ts).
  process.on("SIGINT", () => {
    if (process.listenerCount("SIGINT") > 1) return;
    process.stderr.write("neens: interrupted\n");
    process.exit(130);
  });
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`neens: internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 70;
    },
  );
}
