/**
 * The conformance table (sdk/conformance/*.json) for the TypeScript tests: reading its cases, the
 * scripted server that replays a case's answers on loopback, and the comparison of what the CLI
 * did with what the case expects. sdk/python/tests/conformance.py is the same for the Python
 * tests; sdk/conformance/README.md describes the format both read.
 */

import { spawn } from "node:child_process";
import { readFileSync, readdirSync, writeFileSync, existsSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { type AddressInfo, createServer as createTcpServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

type Json = Record<string, unknown>;

export const PACKAGE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const TABLE_DIR = resolve(PACKAGE_DIR, "..", "conformance");
export const CLI = join(PACKAGE_DIR, "dist", "src", "cli.js");
const ANY = "{any}";

export interface Case {
  table: string;
  name: string;
  document: Json;
}

export function loadCases(): Case[] {
  const cases: Case[] = [];
  for (const file of readdirSync(TABLE_DIR).filter((name) => name.endsWith(".json")).sort()) {
    const table = JSON.parse(readFileSync(join(TABLE_DIR, file), "utf8")) as Json;
    const fixtures = (table["fixtures"] ?? {}) as Json;
    for (const raw of table["cases"] as Json[]) {
      const document = resolveFixtures(raw, fixtures) as Json;
      cases.push({ table: file.replace(/\.json$/, ""), name: String(document["name"]), document });
    }
  }
  return cases;
}

/** `{"$fixture": "name"}` is the fixture; with `"$merge": {...}` its keys are replaced. */
function resolveFixtures(value: unknown, fixtures: Json): unknown {
  if (Array.isArray(value)) return value.map((item) => resolveFixtures(item, fixtures));
  if (isJson(value)) {
    if ("$fixture" in value) {
      const base = structuredClone(resolveFixtures(fixtures[String(value["$fixture"])], fixtures)) as Json;
      for (const [key, item] of Object.entries((resolveFixtures(value["$merge"] ?? {}, fixtures) as Json))) base[key] = item;
      return base;
    }
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, resolveFixtures(item, fixtures)]));
  }
  return value;
}

export interface Request {
  method: string;
  path: string;
  query: Record<string, string[]>;
  body: unknown;
}

/** Replays a case's `server` answers, as the Python side's `ScriptedServer` does. */
class ScriptedServer {
  readonly requests: Request[] = [];
  readonly #served = new Map<number, number>();
  constructor(readonly routes: Json[]) {}

  answer(request: Request): [number, unknown] {
    this.requests.push(request);
    let chosen: number | null = null;
    this.routes.forEach((route, index) => {
      if (route["method"] !== request.method || route["path"] !== request.path) return;
      const after = route["after"];
      if (isJson(after) && !this.requests.slice(0, -1).some((seen) => matches(seen, after))) return;
      chosen = index;
    });
    if (chosen === null) return [404, { error: { code: "not_found", message: `no ${request.path}` } }];
    const replies = this.routes[chosen]?.["replies"] as Json[];
    const served = this.#served.get(chosen) ?? 0;
    this.#served.set(chosen, served + 1);
    const reply = replies[Math.min(served, replies.length - 1)] as Json;
    return [Number(reply["status"] ?? 200), reply["body"] ?? null];
  }
}

function matches(request: Request, wanted: Json): boolean {
  if (request.method !== wanted["method"] || request.path !== wanted["path"]) return false;
  if ("query" in wanted && !deepEqual(request.query, wanted["query"])) return false;
  return !("body" in wanted) || deepEqual(request.body, wanted["body"]);
}

async function serve(routes: Json[]): Promise<{ scripted: ScriptedServer; url: string; server: Server }> {
  const scripted = new ScriptedServer(routes);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://127.0.0.1");
      const raw = Buffer.concat(chunks).toString("utf8");
      const query: Record<string, string[]> = {};
      for (const [key, value] of url.searchParams) (query[key] ??= []).push(value);
      const [status, answer] = scripted.answer({
        method: req.method ?? "GET",
        path: url.pathname,
        query,
        body: raw.trim() ? JSON.parse(raw) : null,
      });
      const payload = answer === null ? "" : JSON.stringify(answer);
      res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(payload) });
      res.end(payload);
    });
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  return { scripted, url: `http://127.0.0.1:${port}`, server };
}

/** A loopback port with nothing listening: connecting to it is refused at once. */
async function closedPort(): Promise<number> {
  const probe = createTcpServer();
  await new Promise<void>((done) => probe.listen(0, "127.0.0.1", done));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((done) => probe.close(() => done()));
  return port;
}

export interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
  requests: Request[];
  baseUrl: string;
  closedPort: number;
}

/** Run the case's command with `cli` (the words before the command) against a scripted server. */
export async function runCase(raw: Case, cli: string[], tmp: string): Promise<Outcome> {
  const port = await closedPort();
  const document = JSON.parse(JSON.stringify(raw.document).replaceAll("{closedPort}", String(port))) as Json;
  for (const [name, content] of Object.entries((document["files"] ?? {}) as Json)) {
    const text = typeof content === "string" ? content : JSON.stringify(content);
    writeFileSync(join(tmp, name), text.replaceAll("{dir}", tmp), "utf8");
  }
  const { scripted, url, server } = await serve((document["server"] ?? []) as Json[]);
  try {
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(process.env)) {
      if (value === undefined || key.startsWith("OTEL_") || key.startsWith("NEENS_") || key.toLowerCase().endsWith("_proxy")) continue;
      env[key] = value;
    }
    env["NEENS_BASE_URL"] = url;
    env["NEENS_API_KEY"] = "nk_live_conformance";
    for (const [key, value] of Object.entries((document["env"] ?? {}) as Json)) {
      if (value === null) delete env[key];
      else env[key] = String(value).replaceAll("{dir}", tmp).replaceAll("{baseUrl}", url);
    }
    const args = (document["args"] as string[]).map((arg) => arg.replaceAll("{dir}", tmp));
    const [program, ...rest] = cli;
    const child = spawn(program as string, [...rest, String(document["command"]), ...args], { env, cwd: tmp });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const code = await new Promise<number | null>((done) => child.on("close", (exit) => done(exit)));
    return { code, stdout, stderr, requests: [...scripted.requests], baseUrl: url, closedPort: port };
  } finally {
    server.closeAllConnections();
    await new Promise<void>((done) => server.close(() => done()));
  }
}

/** How `outcome` differs from what the case expects (empty when it conforms). */
export function problems(raw: Case, outcome: Outcome, tmp: string): string[] {
  const document = JSON.parse(JSON.stringify(raw.document).replaceAll("{closedPort}", String(outcome.closedPort))) as Json;
  const expect = document["expect"] as Json;
  const fill = (value: unknown): unknown => placeholders(value, outcome.baseUrl, tmp);
  const found: string[] = [];
  if (outcome.code !== expect["exitCode"]) found.push(`exit code ${outcome.code}, expected ${String(expect["exitCode"])}`);
  if ("stdout" in expect) {
    const wanted = fill(expect["stdout"]);
    if (wanted === null) {
      if (outcome.stdout.trim()) found.push(`standard output should be empty, got ${JSON.stringify(outcome.stdout)}`);
    } else {
      const lines = outcome.stdout.split("\n").filter((line, index, all) => line !== "" || index < all.length - 1);
      if (lines.length !== 1) found.push(`standard output is not one JSON line: ${JSON.stringify(outcome.stdout)}`);
      else found.push(...differences(JSON.parse(lines[0] as string), wanted, "stdout"));
    }
  }
  for (const text of (expect["stderrContains"] ?? []) as string[]) {
    if (!outcome.stderr.includes(fill(text) as string)) found.push(`standard error lacks ${JSON.stringify(text)}`);
  }
  found.push(...requestProblems(outcome.requests, (expect["requests"] ?? []) as Json[]));
  for (const text of (expect["notRequested"] ?? []) as string[]) {
    if (outcome.requests.some((r) => `${r.method} ${r.path}` === text)) found.push(`${text} was requested`);
  }
  for (const [name, content] of Object.entries((expect["written"] ?? {}) as Json)) {
    const path = join(tmp, name);
    const actual = existsSync(path) ? readFileSync(path, "utf8") : null;
    const wanted = fill(content);
    if (actual !== wanted) found.push(`file ${name}: ${JSON.stringify(actual)}, expected ${JSON.stringify(wanted)}`);
  }
  if (found.length) found.push(`standard error was:\n${outcome.stderr}`);
  return found;
}

function requestProblems(requests: Request[], wanted: Json[]): string[] {
  let at = 0;
  for (const expected of wanted) {
    while (at < requests.length && !matches(requests[at] as Request, expected)) at++;
    if (at === requests.length) {
      const made = requests.map((r) => `${r.method} ${r.path} ${JSON.stringify(r.query)} ${JSON.stringify(r.body)}`);
      return [`request ${JSON.stringify(expected)} not made in order; made: ${JSON.stringify(made)}`];
    }
    at++;
  }
  return [];
}

function placeholders(value: unknown, baseUrl: string, tmp: string): unknown {
  if (typeof value === "string") return value.replaceAll("{baseUrl}", baseUrl).replaceAll("{dir}", tmp);
  if (Array.isArray(value)) return value.map((item) => placeholders(item, baseUrl, tmp));
  if (isJson(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, placeholders(v, baseUrl, tmp)]));
  return value;
}

function differences(actual: unknown, wanted: unknown, where: string): string[] {
  if (wanted === ANY) return [];
  if (isJson(wanted)) {
    if (!isJson(actual)) return [`${where}: ${JSON.stringify(actual)}, expected an object`];
    const found: string[] = [];
    for (const key of [...new Set([...Object.keys(actual), ...Object.keys(wanted)])].sort()) {
      if (!(key in wanted)) found.push(`${where}.${key}: unexpected key (value ${JSON.stringify(actual[key])})`);
      else if (!(key in actual)) found.push(`${where}.${key}: missing`);
      else found.push(...differences(actual[key], wanted[key], `${where}.${key}`));
    }
    return found;
  }
  if (Array.isArray(wanted)) {
    if (!Array.isArray(actual) || actual.length !== wanted.length) return [`${where}: ${JSON.stringify(actual)}, expected ${JSON.stringify(wanted)}`];
    return wanted.flatMap((item, index) => differences(actual[index], item, `${where}[${index}]`));
  }
  if (typeof wanted === "number" && typeof actual === "number") {
    return Math.abs(actual - wanted) <= 1e-12 * Math.max(Math.abs(actual), Math.abs(wanted)) ? [] : [`${where}: ${actual}, expected ${wanted}`];
  }
  return actual === wanted ? [] : [`${where}: ${JSON.stringify(actual)}, expected ${JSON.stringify(wanted)}`];
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, i) => deepEqual(item, b[i]));
  }
  if (isJson(a) || isJson(b)) {
    if (!isJson(a) || !isJson(b)) return false;
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((key) => key in b && deepEqual(a[key], b[key]));
  }
  return a === b;
}

function isJson(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
