/**
 * Running the agent command once per item: prompt on stdin, bounded in time, killed cleanly.
 *
 * Each command runs in a process group of its own (`detached`), so a timeout or Ctrl-C kills the
 * whole group, grandchildren included. Its standard output and error are captured, never mixed
 * into the CLI's output (stdout may be the `--json` result); the tail of its error output is kept
 * to explain a failure.
 */

import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import { delimiter, join, sep } from "node:path";

import { ConfigError } from "./errors.js";
import { pyRepr } from "./client.js";
import { fixed } from "./format.js";

const TAIL_CHARS = 2000;
const KILL_GRACE_MS = 2000;

/** How one item's command ended. */
export interface ItemRun {
  itemId: string;
  /** null when it was killed for running too long, or could not be started. */
  returncode: number | null;
  /** The signal that ended it, when one did. */
  signal: string | null;
  timedOut: boolean;
  durationS: number;
  stderrTail: string;
  startError: string | null;
}

export function itemOk(run: ItemRun): boolean {
  return run.returncode === 0 && !run.timedOut && run.startError === null;
}

/** Why the command failed, in one line (empty when it did not). */
export function itemReason(run: ItemRun): string {
  if (run.startError !== null) return `could not start the command (${run.startError})`;
  let why: string;
  if (run.timedOut) why = `timed out after ${fixed(run.durationS, 0)} s (--item-timeout) and was killed`;
  else if (run.signal !== null) why = `was killed by signal ${signalNumber(run.signal)}`;
  else if (run.returncode) why = `exited with code ${run.returncode}`;
  else return "";
  const last = lastLine(run.stderrTail);
  return `the command ${why}${last ? `: ${last}` : ""}`;
}

/** Refuse, before anything is created, a command that cannot be started. */
export function checkCommand(command: readonly string[], env: Record<string, string | undefined>): void {
  const program = command[0];
  if (program === undefined) {
    throw new ConfigError(
      "no agent command: put it after --, for example: " +
        "neens-eval run --create --dataset ds_… --version-label v1 -- node dist/myagent.js",
    );
  }
  if (program.includes(sep)) {
    if (!isExecutable(program)) {
      throw new ConfigError(`agent command ${pyRepr(program)} is not an executable file; check the path after --`);
    }
    return;
  }
  const found = (env["PATH"] ?? "").split(delimiter).some((dir) => dir && isExecutable(join(dir, program)));
  if (!found) throw new ConfigError(`agent command ${pyRepr(program)} was not found on PATH; check the command after --`);
}

function isExecutable(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Runs commands and remembers the live ones, so an interrupt can kill them all. */
export class Invoker {
  readonly #live = new Set<ChildProcess>();

  constructor(
    readonly command: readonly string[],
    readonly itemTimeoutS: number,
  ) {}

  run(itemId: string, prompt: string, env: Record<string, string>): Promise<ItemRun> {
    const started = performance.now();
    const elapsed = (): number => (performance.now() - started) / 1000;
    return new Promise((resolve) => {
      let child: ChildProcess;
      try {
        child = spawn(this.command[0] as string, this.command.slice(1), {
          env,
          stdio: ["pipe", "pipe", "pipe"],
          detached: true,
        });
      } catch (error) {
        resolve(failedStart(itemId, error));
        return;
      }
      this.#live.add(child);
      let stderr = "";
      let timedOut = false;
      let settled = false;
      child.stdout?.resume();
      child.stderr?.setEncoding("utf8");
      child.stderr?.on("data", (chunk: string) => {
        stderr = (stderr + chunk).slice(-TAIL_CHARS * 4);
      });
      child.stdin?.on("error", () => undefined); // a command that does not read its stdin
      child.stdin?.end(prompt, "utf8");
      const timer = setTimeout(() => {
        timedOut = true;
        killGroup(child);
      }, this.itemTimeoutS * 1000);
      child.on("error", (error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.#live.delete(child);
        resolve(failedStart(itemId, error));
      });
      child.on("close", (code, signal) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.#live.delete(child);
        resolve({
          itemId,
          returncode: timedOut ? null : code,
          signal: timedOut ? null : signal,
          timedOut,
          durationS: elapsed(),
          stderrTail: stderr.slice(-TAIL_CHARS),
          startError: null,
        });
      });
    });
  }

  /** Kill every command still running (on Ctrl-C or an error that stops the CLI). */
  killAll(): void {
    for (const child of this.#live) killGroup(child);
  }

  /** On an interrupt, just before the CLI exits: SIGTERM every command's process group, wait up
   * to 2 seconds for them to go, then SIGKILL whatever is left, all before returning. */
  killAllNow(): void {
    const groups = [...this.#live].map((child) => child.pid).filter((pid): pid is number => pid !== undefined);
    for (const pid of groups) signalGroup(pid, "SIGTERM");
    const pause = new Int32Array(new SharedArrayBuffer(4));
    const deadline = performance.now() + KILL_GRACE_MS;
    while (groups.some(groupAlive) && performance.now() < deadline) Atomics.wait(pause, 0, 0, 20);
    for (const pid of groups) signalGroup(pid, "SIGKILL");
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** SIGTERM the command's process group, then SIGKILL whatever is left 2 seconds later. */
function killGroup(child: ChildProcess): void {
  const pid = child.pid;
  if (pid === undefined) return;
  try {
    process.kill(-pid, "SIGTERM");
  } catch {
    return;
  }
  const timer = setTimeout(() => {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // already gone
    }
  }, KILL_GRACE_MS);
  timer.unref();
}

function failedStart(itemId: string, error: unknown): ItemRun {
  const code = (error as { code?: string }).code;
  const message = code === "ENOENT" ? "No such file or directory" : code === "EACCES" ? "Permission denied" : String((error as Error).message ?? error);
  return { itemId, returncode: null, signal: null, timedOut: false, durationS: 0, stderrTail: "", startError: message };
}

function signalNumber(signal: string): string {
  const numbers: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGSEGV: 11, SIGPIPE: 13, SIGTERM: 15 };
  return String(numbers[signal] ?? signal);
}

function lastLine(text: string): string {
  const lines = text.trim().split(/\r?\n/).map((line) => line.trim()).filter(Boolean);
  const last = lines[lines.length - 1];
  if (last === undefined) return "";
  return last.length <= 300 ? last : `${last.slice(0, 297)}...`;
}
