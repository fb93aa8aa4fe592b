/**
 * Waiting for a run's verdict with a live progress line on standard error; and, for sweeps,
 * `waitUntilTerminal` with a `Board` of live lines, one per arm.
 *
 * On a terminal the line is rewritten in place; in a CI log it is printed as a new line only when
 * it changes, and at most every 10 seconds unless the status changed, so a long run does not
 * flood the log. The wait ends when the run is terminal (`finished`), when `--timeout` runs out
 * (`timeout`), or when every item still pending is one whose command failed here (`stalled`).
 */

import { type Client, expectObject, sleep, unexpected } from "./client.js";
import { percentEncode } from "./correlation.js";
import type { Json } from "./gateRules.js";

export const TERMINAL = new Set(["completed", "completed_with_regressions", "failed", "cancelled"]);
const LOG_EVERY_S = 10;
const STALL_GRACE_S = 2;

const now = (): number => performance.now() / 1000;

export interface Stream {
  write(text: string): unknown;
  isTTY?: boolean;
}

/** One live status line on `stream`, plus permanent log lines above it. */
export class Progress {
  readonly interactive: boolean;
  #shown = "";
  #lastText = "";
  #lastTime = 0;
  #lastKey = "";

  constructor(readonly stream: Stream = process.stderr, interactive?: boolean) {
    this.interactive = interactive ?? Boolean(stream.isTTY);
  }

  /** Show `text`; `key` (the run status, say) forces a log line when it changes. */
  update(text: string, key = ""): void {
    if (this.interactive) {
      this.stream.write(`\r\x1b[2K${text}`);
      this.#shown = text;
      return;
    }
    const at = now();
    if (text === this.#lastText) return;
    if (key === this.#lastKey && at - this.#lastTime < LOG_EVERY_S && this.#lastText) return;
    this.stream.write(`${text}\n`);
    this.#lastText = text;
    this.#lastTime = at;
    this.#lastKey = key;
  }

  /** A line that stays (the live line, if any, is redrawn below it). */
  log(text: string): void {
    if (this.interactive && this.#shown) this.stream.write("\r\x1b[2K");
    this.stream.write(`${text}\n`);
    if (this.interactive && this.#shown) this.stream.write(this.#shown);
  }

  close(): void {
    if (this.interactive && this.#shown) {
      this.stream.write("\r\x1b[2K");
      this.#shown = "";
    }
  }
}

/** The run as last read from the server, and when: what is known once it stops answering. */
export interface LastSeen {
  at: Date;
  run: Json;
}

export function lastSeenJson(seen: LastSeen): Json {
  return {
    at: `${seen.at.toISOString().slice(0, 19)}Z`,
    status: seen.run["status"] ?? null,
    itemCount: seen.run["itemCount"] ?? null,
    counts: seen.run["counts"] ?? null,
  };
}

/** Reads one object of the API again and again: quick at first, then every `maxInterval` s. */
export class ObjectPoller {
  interval = 0.2;
  seenAt: Date | null = null;

  constructor(
    readonly client: Client,
    readonly path: string,
    readonly maxInterval = 2,
  ) {}

  async read(): Promise<Json> {
    const document = expectObject(await this.client.get(this.path), `GET ${this.path}`);
    this.seenAt = new Date();
    return document;
  }

  async sleep(): Promise<void> {
    await sleep(this.interval);
    this.interval = Math.min(this.interval * 1.5, this.maxInterval);
  }
}

/** Polls a pre-prod run and its items. */
export class Poller extends ObjectPoller {
  lastSeen: LastSeen | null = null;

  constructor(
    client: Client,
    readonly runId: string,
  ) {
    super(client, `/preprod-evals/${percentEncode(runId)}`);
  }

  async run(): Promise<Json> {
    const run = await this.read();
    this.lastSeen = { at: new Date(), run };
    return run;
  }

  async items(): Promise<Json[]> {
    const answer = expectObject(await this.client.get(`${this.path}/items`), `GET ${this.path}/items`);
    const items = answer["items"];
    if (!Array.isArray(items)) throw unexpected(`GET ${this.path}/items`, "an 'items' list");
    return items.filter((item): item is Json => typeof item === "object" && item !== null && !Array.isArray(item));
  }
}

export type WaitOutcome = "finished" | "timeout" | "stalled";

export interface WaitResult {
  run: Json;
  outcome: WaitOutcome;
  waitedS: number;
}

/** Poll until the run is terminal, stalled on locally failed items, or `timeoutS` passed. When
 * only locally failed items are left pending (for 2 s, in case their traces are on the way),
 * `reportFailed` records them on the server as errors, and the wait goes on to the verdict. */
export async function waitForVerdict(
  poller: Poller,
  options: {
    timeoutS: number;
    progress: Progress;
    describe: (run: Json, elapsed: number) => string;
    failedLocally?: Set<string>;
    reportFailed?: (itemIds: string[]) => Promise<boolean>;
  },
): Promise<WaitResult> {
  const started = now();
  const deadline = started + options.timeoutS;
  const failed = options.failedLocally ?? new Set<string>();
  let stalledSince: number | null = null;
  let reported = false;
  for (;;) {
    const run = await poller.run();
    const at = now();
    const status = String(run["status"]);
    options.progress.update(options.describe(run, at - started), status);
    if (TERMINAL.has(status)) return { run, outcome: "finished", waitedS: at - started };
    const still = failed.size ? await failedStillPending(poller, run, failed) : new Set<string>();
    if (still.size && !reported) {
      stalledSince = stalledSince ?? at;
      if (at - stalledSince >= STALL_GRACE_S) {
        if (options.reportFailed === undefined || !(await options.reportFailed([...still].sort()))) {
          return { run, outcome: "stalled", waitedS: at - started };
        }
        reported = true;
      }
    } else {
      stalledSince = null;
    }
    if (at >= deadline) return { run, outcome: "timeout", waitedS: at - started };
    await poller.sleep();
  }
}

async function failedStillPending(poller: Poller, run: Json, failed: Set<string>): Promise<Set<string>> {
  const counts = run["counts"];
  const pending = typeof counts === "object" && counts !== null ? (counts as Json)["pending"] : undefined;
  if (typeof pending === "number" && Number.isInteger(pending) && !(pending > 0 && pending <= failed.size)) {
    return new Set();
  }
  const still = new Set(
    (await poller.items()).filter((item) => item["status"] === "pending").map((item) => String(item["item_id"])),
  );
  return still.size && [...still].every((id) => failed.has(id)) ? still : new Set();
}

/** One live line of a `Board`: `milestone` is the part of its state worth a log line at once. */
export interface BoardRow {
  key: string;
  text: string;
  milestone: string;
}

/** Several live lines on `stream`, one per row (a sweep's arms, each in its own state). */
export class Board {
  readonly interactive: boolean;
  #shown: string[] = [];
  readonly #last = new Map<string, [string, string, number]>();

  constructor(readonly stream: Stream = process.stderr, interactive?: boolean) {
    this.interactive = interactive ?? Boolean(stream.isTTY);
  }

  update(rows: BoardRow[]): void {
    if (this.interactive) {
      this.#erase();
      const width = Math.max((process.stderr.columns ?? 80) - 1, 20);
      this.#shown = rows.map((row) => (row.text.length <= width ? row.text : `${row.text.slice(0, width - 1)}…`));
      this.#draw();
      return;
    }
    const at = now();
    for (const row of rows) {
      const last = this.#last.get(row.key);
      if (last !== undefined) {
        const [text, milestone, when] = last;
        if (row.text === text) continue;
        if (row.milestone === milestone && at - when < LOG_EVERY_S) continue;
      }
      this.stream.write(`${row.text}\n`);
      this.#last.set(row.key, [row.text, row.milestone, at]);
    }
  }

  log(text: string): void {
    this.#erase();
    this.stream.write(`${text}\n`);
    this.#draw();
  }

  close(): void {
    this.#erase();
    this.#shown = [];
  }

  #erase(): void {
    if (this.interactive && this.#shown.length) this.stream.write(`\x1b[${this.#shown.length}F\x1b[J`);
  }

  #draw(): void {
    if (this.interactive) for (const text of this.#shown) this.stream.write(`${text}\n`);
  }
}

export interface ObjectWait {
  document: Json;
  outcome: "finished" | "timeout";
  waitedS: number;
}

/** Read the object until its `status` is terminal, or `timeoutS` passed; `show` sees each read. */
export async function waitUntilTerminal(
  poller: ObjectPoller,
  options: { terminal: Set<string>; timeoutS: number; show: (document: Json) => void; first?: Json | null },
): Promise<ObjectWait> {
  const started = now();
  const deadline = started + options.timeoutS;
  let document: Json | null = options.first ?? null;
  for (;;) {
    if (document === null) document = await poller.read();
    const at = now();
    options.show(document);
    if (options.terminal.has(String(document["status"]))) return { document, outcome: "finished", waitedS: at - started };
    if (at >= deadline) return { document, outcome: "timeout", waitedS: at - started };
    await poller.sleep();
    document = null;
  }
}
