/** `neens-eval datasets-push` checks the upload against the server's request size limit
 * (`maxRequestBytes` in `GET /healthz`) before creating anything. The cases both CLIs share are
 * in sdk/conformance/datasets.json; these check what the table cannot say for both at once: the
 * exact byte count, which is the TypeScript CLI's own body (JSON.stringify, without json.dumps'
 * spaces). The server is the conformance table's scripted loopback stub, which speaks the API's
 * shape and records every request, so an older server (no field) can be played. The same push
 * against the real server is in tests/e2e/test_cli_datasets.py. */

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { describeBytes, SMALLEST_LIMIT_BYTES } from "../src/datasets.js";
import { CLI, type Outcome, runCase } from "./conformance.js";

const SPLIT_HINT =
  "split the file into smaller datasets (each push sends one whole version in one request), " +
  "or ask the server's operator to raise NEENS_MAX_REQUEST_BYTES";

type Route = [method: string, path: string, status: number, body: unknown];

function health(fields: Record<string, unknown> = {}): Record<string, unknown> {
  return { status: "ok", version: "0.1.0", database: "sqlite", ...fields };
}

const DATASET = { id: "ds_1", name: "support-golden" };
const VERSION = { id: "dsv_1", number: 1, itemCount: 1, golden: false, createdAt: "2026-12-01T00:00:00Z" };

/** A JSONL file of one item per input, and the size of the body the CLI sends for it. */
function itemsFile(dir: string, inputs: string[], name = "big.jsonl"): [string, number] {
  const path = join(dir, name);
  writeFileSync(path, inputs.map((input) => `${JSON.stringify({ input })}\n`).join(""), "utf8");
  const body = JSON.stringify({ items: inputs.map((input) => ({ input })), golden: false });
  return [path, Buffer.byteLength(body, "utf8")];
}

async function push(dir: string, file: string, routes: Route[], env: Record<string, string> = {}): Promise<Outcome & { paths: string[] }> {
  const server = routes.map(([method, path, status, body]) => ({ method, path, replies: [{ status, body }] }));
  const document = { command: "datasets-push", args: [file, "--name", "support-golden", "--json"], server, env };
  const outcome = await runCase({ table: "datasets", name: "limit", document }, [process.execPath, CLI], dir);
  return { ...outcome, paths: outcome.requests.map((request) => `${request.method} ${request.path}`) };
}

async function inTmp(body: (dir: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "neens-datasets-limit-"));
  try {
    await body(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("an upload over the limit names its exact size as sent and creates nothing", () =>
  inTmp(async (dir) => {
    const [file, size] = itemsFile(dir, Array(5).fill("Où est ma commande ? 🙂 ".repeat(20)));
    assert.ok(size > 2048);
    const outcome = await push(dir, file, [
      ["GET", "/healthz", 200, health({ maxRequestBytes: 2048 })],
      ["GET", "/datasets", 200, { datasets: [] }],
      ["POST", "/datasets", 201, DATASET],
    ]);
    assert.equal(outcome.code, 2);
    assert.equal(outcome.stdout, "");
    assert.equal(
      outcome.stderr,
      `neens: error: ${file}: the upload is ${size} bytes, over the server's request size limit ` +
        `(NEENS_MAX_REQUEST_BYTES) of 2048 bytes; nothing was created; ${SPLIT_HINT}\n`,
    );
    assert.deepEqual(outcome.paths, ["GET /healthz"]);
  }));

test("an upload at the limit is pushed, and one byte more is refused", () =>
  inTmp(async (dir) => {
    const [file, size] = itemsFile(dir, Array(20).fill("Grüße 🙂 ".repeat(10)));
    const routes = (limit: number): Route[] => [
      ["GET", "/healthz", 200, health({ maxRequestBytes: limit })],
      ["GET", "/datasets", 200, { datasets: [DATASET] }],
      ["POST", "/datasets/ds_1/versions", 201, { ...VERSION, itemCount: 20 }],
    ];
    const at = await push(dir, file, routes(size));
    assert.equal(at.code, 0, at.stderr);
    assert.deepEqual(at.paths, ["GET /healthz", "GET /datasets", "POST /datasets/ds_1/versions"]);
    const over = await push(dir, file, routes(size - 1));
    assert.equal(over.code, 2, over.stderr);
    assert.ok(over.stderr.includes(`the upload is ${size} bytes, over`), over.stderr);
    assert.deepEqual(over.paths, ["GET /healthz"]);
  }));

test("the limit is asked only for an upload over 1024 bytes, the lowest a server can have", () =>
  inTmp(async (dir) => {
    const [, empty] = itemsFile(dir, [""], "empty.jsonl");
    const fits = SMALLEST_LIMIT_BYTES - empty;
    const [small, smallSize] = itemsFile(dir, ["s".repeat(fits)], "small.jsonl");
    const [larger, largerSize] = itemsFile(dir, ["s".repeat(fits + 1)], "larger.jsonl");
    assert.deepEqual([smallSize, largerSize], [1024, 1025]);
    const routes: Route[] = [
      ["GET", "/healthz", 200, health({ maxRequestBytes: 16_777_216 })],
      ["GET", "/datasets", 200, { datasets: [DATASET] }],
      ["POST", "/datasets/ds_1/versions", 201, VERSION],
    ];
    const quiet = await push(dir, small, routes);
    assert.equal(quiet.code, 0, quiet.stderr);
    assert.deepEqual(quiet.paths, ["GET /datasets", "POST /datasets/ds_1/versions"]);
    const asked = await push(dir, larger, routes);
    assert.equal(asked.code, 0, asked.stderr);
    assert.deepEqual(asked.paths, ["GET /healthz", "GET /datasets", "POST /datasets/ds_1/versions"]);
  }));

test("a server without the field (older than it) is sent the upload; its 413 says the size and what to do", () =>
  inTmp(async (dir) => {
    const [file, size] = itemsFile(dir, Array(5).fill("x".repeat(1000)));
    const tooLarge = { error: { code: "payload_too_large", message: "request body is over" } };
    const outcome = await push(dir, file, [
      ["GET", "/healthz", 200, health()],
      ["GET", "/datasets", 200, { datasets: [] }],
      ["POST", "/datasets", 201, DATASET],
      ["POST", "/datasets/ds_1/versions", 413, tooLarge],
    ]);
    assert.equal(outcome.code, 2);
    assert.equal(
      outcome.stderr,
      `neens: error: ${file}: the upload is ${size} bytes, over the server's request size limit ` +
        `(NEENS_MAX_REQUEST_BYTES, 16 MiB by default) [HTTP 413 payload_too_large]; ${SPLIT_HINT}; ` +
        "the dataset support-golden (ds_1), created by this push, has no version yet\n",
    );
    assert.deepEqual(outcome.paths, ["GET /healthz", "GET /datasets", "POST /datasets", "POST /datasets/ds_1/versions"]);
    // Into a dataset that was already there, nothing is said to be left empty.
    const existing = await push(dir, file, [
      ["GET", "/healthz", 200, health()],
      ["GET", "/datasets", 200, { datasets: [DATASET] }],
      ["POST", "/datasets/ds_1/versions", 413, tooLarge],
    ]);
    assert.equal(existing.code, 2);
    assert.ok(existing.stderr.endsWith(`[HTTP 413 payload_too_large]; ${SPLIT_HINT}\n`), existing.stderr);
  }));

for (const [name, status, body] of [
  ["a 404", 404, { error: { code: "not_found", message: "Not Found" } }],
  ["a 500", 500, { error: { code: "internal", message: "database down" } }],
  ["a string", 200, health({ maxRequestBytes: "2048" })],
  ["null", 200, health({ maxRequestBytes: null })],
  ["a boolean", 200, health({ maxRequestBytes: true })],
  ["zero", 200, health({ maxRequestBytes: 0 })],
  ["not an object", 200, ["not", "an", "object"]],
  ["a JSON string", 200, "<html>a proxy's page</html>"],
] as const) {
  test(`a /healthz answering ${name} does not tell a limit: the push goes on`, () =>
    inTmp(async (dir) => {
      const [file] = itemsFile(dir, Array(5).fill("x".repeat(1000)));
      const outcome = await push(dir, file, [
        ["GET", "/healthz", status, body],
        ["GET", "/datasets", 200, { datasets: [DATASET] }],
        ["POST", "/datasets/ds_1/versions", 201, { ...VERSION, itemCount: 5 }],
      ]);
      assert.equal(outcome.code, 0, outcome.stderr);
      assert.deepEqual(outcome.paths, ["GET /healthz", "GET /datasets", "POST /datasets/ds_1/versions"]);
    }));
}

test("a server that does not answer is reported at the limit request, exit 3", () =>
  inTmp(async (dir) => {
    const [file] = itemsFile(dir, Array(5).fill("x".repeat(1000)));
    const outcome = await push(dir, file, [], {
      NEENS_BASE_URL: "http://127.0.0.1:{closedPort}",
      NEENS_RETRY_WINDOW: "1",
    });
    assert.equal(outcome.code, 3, outcome.stderr);
    const lines = outcome.stderr.trimEnd().split("\n");
    assert.ok(lines[0]?.startsWith("neens: Neens does not answer GET /healthz (connection refused)"), outcome.stderr);
    assert.ok(!outcome.stderr.includes("GET /datasets"), outcome.stderr);
    assert.ok(lines.at(-1)?.startsWith("neens: error: could not reach Neens"), outcome.stderr);
  }));

test("sizes of a megabyte or more are also given in MB, as the Python CLI gives them", () => {
  assert.equal(describeBytes(999_999), "999999 bytes");
  assert.equal(describeBytes(1_000_000), "1000000 bytes (1.0 MB)");
  assert.equal(describeBytes(16_777_216), "16777216 bytes (16.8 MB)");
  assert.equal(describeBytes(2_250_000), "2250000 bytes (2.2 MB)"); // half to even, as Python's .1f
});
