/**
 * `neens-eval datasets-push`: upload a JSONL file as a new version of a dataset, creating the
 * dataset the first time its name is pushed — the Python `neens datasets push`.
 *
 * Each non-blank line is `{"input": str, "expected_output"?: str | null, "metadata"?: object}`.
 * Any other key is refused rather than dropped, the whole file is checked before anything is
 * sent, and every problem is reported as `FILE:LINE: what is wrong`.
 */

import { readFileSync, statSync } from "node:fs";

import type { CommandSpec, Parsed } from "./args.js";
import { type Client, Client as NeensClient, describeNotice, unexpected } from "./client.js";
import { percentEncode } from "./correlation.js";
import { ApiError, ConfigError } from "./errors.js";
import { fixed, pyDumps } from "./format.js";
import type { Json } from "./gateRules.js";

const ITEM_KEYS = ["input", "expected_output", "metadata"];

export const DATASETS_PUSH_SPEC: CommandSpec = {
  name: "datasets-push",
  usage: "neens-eval datasets-push FILE.jsonl --name NAME [--golden] [--json]",
  description:
    "Upload FILE as a new version of the dataset NAME, creating the dataset if it does not exist. " +
    'Each non-blank line of FILE is a JSON object: {"input": str, "expected_output"?: str | null, "metadata"?: object}.',
  options: [
    { flag: "--name", metavar: "NAME", kind: "value", required: true, help: "name of the dataset to push to" },
    { flag: "--golden", kind: "flag", help: "mark the new version as the dataset's golden version" },
    { flag: "--json", dest: "asJson", kind: "flag", help: "print the result as one JSON object on stdout" },
  ],
  positionals: [{ dest: "file", metavar: "FILE.jsonl", kind: "one", required: true, help: "the items, one per line" }],
};

export interface PushResult {
  datasetId: string;
  datasetName: string;
  versionId: string;
  versionNumber: number;
  itemCount: number;
  golden: boolean;
  createdDataset: boolean;
}

export function describePush(result: PushResult): string {
  const items = result.itemCount === 1 ? "1 item" : `${result.itemCount} items`;
  const fresh = result.createdDataset ? "new dataset " : "";
  const golden = result.golden ? ", marked golden" : "";
  return (
    `Pushed ${items} to ${fresh}${result.datasetName} (${result.datasetId}) as version ` +
    `${result.versionNumber} (${result.versionId})${golden}.`
  );
}

export async function datasetsPushCommand(args: Parsed, env: Record<string, string | undefined> = process.env): Promise<number> {
  const name = String(args["name"]).trim();
  if (!name) throw new ConfigError("--name must not be empty; give the dataset's name");
  const file = String(args["file"]);
  const numbered = readNumberedItems(file);
  const items = numbered.map(([, item]) => item);
  const golden = Boolean(args["golden"]);
  const client = NeensClient.fromEnv(env);
  client.onRetry = sayRetrying();
  // The body exactly as the client will send it: JSON.stringify, as UTF-8.
  const size = Buffer.byteLength(JSON.stringify({ items, golden }), "utf8");
  await refuseOverTheLimit(client, file, size);
  const [dataset, created] = await findOrCreateDataset(client, name);
  let result: PushResult;
  try {
    result = await pushVersion(client, dataset, created, items, golden);
  } catch (error) {
    if (error instanceof ApiError && error.status === 413) {
      // A server older than `maxRequestBytes` in /healthz tells its limit only now.
      const datasetId = String(dataset["id"]);
      const leftEmpty = created ? `; the dataset ${name} (${datasetId}), created by this push, has no version yet` : "";
      throw new ConfigError(
        `${file}: the upload is ${describeBytes(size)}, over the server's request size limit ` +
          `(NEENS_MAX_REQUEST_BYTES, 16 MiB by default) [HTTP 413 ${error.code}]; ${SPLIT_HINT}${leftEmpty}`,
      );
    }
    // The server names a refused item by position (`items[6].input`); point at its line.
    const match = error instanceof ApiError ? /^items\[(\d+)\]/.exec(error.field ?? "") : null;
    if (!(error instanceof ApiError) || error.status !== 422 || match === null || Number(match[1]) >= numbered.length) throw error;
    throw new ConfigError(`${file}:${(numbered[Number(match[1])] as [number, Json])[0]}: ${error.message}`);
  }
  process.stdout.write(`${args["asJson"] ? JSON.stringify(result) : describePush(result)}\n`);
  return 0;
}

/** The lowest request size limit a Neens server can be set to (NEENS_MAX_REQUEST_BYTES): an
 * upload no larger than this fits any server, so its limit is not asked for. */
export const SMALLEST_LIMIT_BYTES = 1024;

const SPLIT_HINT =
  "split the file into smaller datasets (each push sends one whole version in one request), " +
  "or ask the server's operator to raise NEENS_MAX_REQUEST_BYTES";

/**
 * Stop before anything is created when the upload (`size` bytes, as it will be sent) is over the
 * request size limit the server tells in `GET /healthz` (`maxRequestBytes`). A server that does
 * not tell its limit (one older than the field) is sent the upload as before.
 */
async function refuseOverTheLimit(client: Client, file: string, size: number): Promise<void> {
  if (size <= SMALLEST_LIMIT_BYTES) return;
  const limit = await serverLimit(client);
  if (limit !== null && size > limit) {
    throw new ConfigError(
      `${file}: the upload is ${describeBytes(size)}, over the server's request size ` +
        `limit (NEENS_MAX_REQUEST_BYTES) of ${describeBytes(limit)}; nothing was created; ` +
        SPLIT_HINT,
    );
  }
}

/**
 * The server's request size limit in bytes, from `GET /healthz` (which needs no key), or null
 * when the answer does not give it. An error answer is taken for a server that cannot tell (the
 * upload then goes on as before); a server that does not answer at all is reported as such, as
 * the next request would be.
 */
async function serverLimit(client: Client): Promise<number | null> {
  let health: unknown;
  try {
    health = await client.get("/healthz");
  } catch (error) {
    if (error instanceof ApiError) return null;
    throw error;
  }
  const limit = typeof health === "object" && health !== null && !Array.isArray(health) ? (health as Json)["maxRequestBytes"] : undefined;
  return typeof limit === "number" && Number.isSafeInteger(limit) && limit >= 1 ? limit : null;
}

/** An exact byte count, with the size in MB from 1 MB on: `17234567 bytes (17.2 MB)`. */
export function describeBytes(size: number): string {
  return size < 1_000_000 ? `${size} bytes` : `${size} bytes (${fixed(size / 1_000_000, 1)} MB)`;
}

function sayRetrying(): (notice: { method: string; path: string; problem: string; waitedS: number; windowS: number }) => void {
  let saidAt: number | null = null;
  return (notice) => {
    if (saidAt !== null && notice.waitedS - saidAt < 10) return;
    saidAt = notice.waitedS;
    process.stderr.write(`${describeNotice(notice)}\n`);
  };
}

/** The items of a JSONL file, each with the number of the line it is on. */
export function readNumberedItems(path: string): [number, Json][] {
  let raw: Buffer;
  try {
    if (statSync(path).isDirectory()) throw new ConfigError(`${path}: is a directory; give a .jsonl file`);
    raw = readFileSync(path);
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    if ((error as { code?: string }).code === "ENOENT") throw new ConfigError(`${path}: no such file`);
    throw new ConfigError(`${path}: cannot be read (${(error as Error).message})`);
  }
  const items: [number, Json][] = [];
  const decoder = new TextDecoder("utf-8", { fatal: true });
  let start = 0;
  let number = 0;
  while (start < raw.length) {
    let end = raw.indexOf(0x0a, start);
    end = end < 0 ? raw.length : end + 1;
    number += 1;
    const where = `${path}:${number}`;
    let line: string;
    try {
      line = decoder.decode(raw.subarray(start, end));
    } catch {
      throw new ConfigError(`${where}: not valid UTF-8; save the file as UTF-8`);
    }
    if (number === 1 && line.startsWith("\ufeff")) line = line.slice(1); // editors on Windows add a BOM
    if (line.trim()) items.push([number, parseItem(line, where)]);
    start = end;
  }
  if (!items.length) throw new ConfigError(`${path}: no items; write one JSON object per line, such as {"input": "Hello"}`);
  return items;
}

/** Check one JSONL line; `where` ("FILE:LINE") prefixes every error message. */
export function parseItem(line: string, where: string): Json {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (error) {
    const constant = /(^|[^"\w])(NaN|-?Infinity)([^"\w]|$)/.exec(line);
    if (constant) throw new ConfigError(`${where}: ${constant[2]?.replace("-", "")} is not valid JSON; write a number or a string instead`);
    throw new ConfigError(`${where}: not valid JSON (${(error as Error).message})`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    fail(where, `expected a JSON object such as {"input": "..."}, got ${kind(value)}`);
  }
  const item = value as Json;
  for (const key of Object.keys(item)) {
    if (!ITEM_KEYS.includes(key)) {
      const close = closeMatch(key, ITEM_KEYS);
      const hint = close ? ` (did you mean ${pyDumps(close)}?)` : "";
      fail(where, `unknown key ${pyDumps(key)}${hint}; the keys are "input", "expected_output" and "metadata"`);
    }
  }
  if (!("input" in item)) fail(where, 'missing "input"; every item needs an "input" string');
  if (typeof item["input"] !== "string") fail(where, `"input" must be a string, got ${kind(item["input"])}`);
  const expected = item["expected_output"];
  if (expected !== undefined && expected !== null && typeof expected !== "string") {
    fail(where, `"expected_output" must be a string or null, got ${kind(expected)}`);
  }
  const metadata = item["metadata"];
  if ("metadata" in item && (typeof metadata !== "object" || metadata === null || Array.isArray(metadata))) {
    fail(where, `"metadata" must be an object, got ${kind(metadata)}`);
  }
  return item;
}

/** Create a new version of dataset `name` holding `items`, creating the dataset if needed. */
export async function pushDataset(client: Client, name: string, items: Json[], golden: boolean): Promise<PushResult> {
  const [dataset, created] = await findOrCreateDataset(client, name);
  return pushVersion(client, dataset, created, items, golden);
}

/** Create a new version of `dataset` (found, or `created` by this push) holding `items`. */
async function pushVersion(client: Client, dataset: Json, created: boolean, items: Json[], golden: boolean): Promise<PushResult> {
  const datasetId = field(dataset, "id", "string", "the dataset") as string;
  const path = `/datasets/${percentEncode(datasetId)}/versions`;
  const version = await client.post(path, { items, golden });
  const what = `POST ${path}`;
  return {
    datasetId,
    datasetName: field(dataset, "name", "string", "the dataset") as string,
    versionId: field(version, "id", "string", what) as string,
    versionNumber: field(version, "number", "int", what) as number,
    itemCount: field(version, "itemCount", "int", what) as number,
    golden: field(version, "golden", "boolean", what) as boolean,
    createdDataset: created,
  };
}

async function findOrCreateDataset(client: Client, name: string): Promise<[Json, boolean]> {
  const found = await findDataset(client, name);
  if (found !== null) return [found, false];
  let created: unknown;
  try {
    created = await client.post("/datasets", { name });
  } catch (error) {
    // 409: created by someone else since the lookup (two CI jobs pushing at once); use it.
    const again = error instanceof ApiError && error.status === 409 ? await findDataset(client, name) : null;
    if (again === null) throw error;
    return [again, false];
  }
  if (typeof created !== "object" || created === null || Array.isArray(created)) throw unexpected("POST /datasets", "a dataset object");
  return [created as Json, true];
}

async function findDataset(client: Client, name: string): Promise<Json | null> {
  const listing = field(await client.get("/datasets", { name }), "datasets", "list", "GET /datasets") as unknown[];
  for (const dataset of listing) {
    if (typeof dataset === "object" && dataset !== null && (dataset as Json)["name"] === name) return dataset as Json;
  }
  return null;
}

function field(document: unknown, key: string, type: "string" | "int" | "boolean" | "list", what: string): unknown {
  const value = typeof document === "object" && document !== null ? (document as Json)[key] : undefined;
  const ok =
    type === "list"
      ? Array.isArray(value)
      : type === "int"
        ? typeof value === "number" && Number.isInteger(value)
        : type === "boolean"
          ? typeof value === "boolean"
          : typeof value === type;
  if (!ok) throw unexpected(what, `'${key}' as ${{ string: "str", int: "int", boolean: "bool", list: "list" }[type]}`);
  return value;
}

function fail(where: string, problem: string): never {
  throw new ConfigError(`${where}: ${problem}`);
}

function kind(value: unknown): string {
  if (value === null || value === undefined) return "null";
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "number") return "a number";
  if (typeof value === "string") return "a string";
  if (Array.isArray(value)) return "an array";
  return "an object";
}

/** The closest of `choices` to `word` by Python difflib's ratio (cutoff 0.6), or null. */
export function closeMatch(word: string, choices: string[]): string | null {
  let best: string | null = null;
  let bestRatio = 0.6;
  for (const choice of choices) {
    const ratio = (2 * matchingCharacters(word, choice)) / (word.length + choice.length);
    if (ratio >= bestRatio) {
      best = choice;
      bestRatio = ratio;
    }
  }
  return best;
}

/** Ratcliff/Obershelp: the longest common block, then the same on each side of it. */
function matchingCharacters(a: string, b: string): number {
  if (!a || !b) return 0;
  let length = 0;
  let atA = 0;
  let atB = 0;
  for (let i = 0; i < a.length; i++) {
    for (let j = 0; j < b.length; j++) {
      let k = 0;
      while (i + k < a.length && j + k < b.length && a[i + k] === b[j + k]) k++;
      if (k > length) {
        length = k;
        atA = i;
        atB = j;
      }
    }
  }
  if (length === 0) return 0;
  return length + matchingCharacters(a.slice(0, atA), b.slice(0, atB)) + matchingCharacters(a.slice(atA + length), b.slice(atB + length));
}
