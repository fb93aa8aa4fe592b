/** The client's retry rule against a real loopback server: reads are retried through 503s, a
 * create that got no answer is never sent twice, redirects are not followed (the key only ever
 * goes to NEENS_BASE_URL), and configuration problems are usage errors. */

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";

import { Client } from "../src/client.js";
import { ApiError, AuthError, ConfigError, Unreachable } from "../src/errors.js";

async function server(handle: (req: IncomingMessage, res: ServerResponse, calls: number) => void): Promise<{ url: string; calls: () => number; close: () => Promise<void> }> {
  let calls = 0;
  const http = createServer((req, res) => {
    calls += 1;
    req.resume();
    req.on("end", () => handle(req, res, calls));
  });
  await new Promise<void>((done) => http.listen(0, "127.0.0.1", done));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls: () => calls,
    close: () => new Promise<void>((done) => {
      http.closeAllConnections();
      http.close(() => done());
    }),
  };
}

const retry = { windowS: 5, backoffS: 0.01, maxBackoffS: 0.01 };

test("a read is retried through 503 until it is answered", async () => {
  const neens = await server((_, res, calls) => {
    res.writeHead(calls < 3 ? 503 : 200, { "Content-Type": "application/json" });
    res.end(calls < 3 ? "" : JSON.stringify({ ok: true }));
  });
  try {
    const notices: string[] = [];
    const client = new Client(neens.url, "nk_live_x", { retry });
    client.onRetry = (notice) => notices.push(notice.problem);
    assert.deepEqual(await client.get("/x"), { ok: true });
    assert.equal(neens.calls(), 3);
    assert.deepEqual(notices, ["HTTP 503 Service Unavailable", "HTTP 503 Service Unavailable"]);
  } finally {
    await neens.close();
  }
});

test("when the retries give up, the error names what set the window", async () => {
  const neens = await server((_, res) => {
    res.writeHead(503);
    res.end();
  });
  try {
    const fast = { windowS: 0.05, backoffS: 0.01, maxBackoffS: 0.01 };
    for (const [policy, named] of [
      [fast, "NEENS_RETRY_WINDOW"],
      [{ ...fast, windowFrom: "--retry-window" }, "--retry-window"],
    ] as const) {
      const client = new Client(neens.url, "nk_live_x", { retry: policy });
      await assert.rejects(client.get("/x"), (error: unknown) => {
        assert.ok(error instanceof Unreachable, String(error));
        assert.match(error.message, new RegExp(`\\(retries last 0\\.05 s, ${named} changes it\\)$`));
        return true;
      });
    }
  } finally {
    await neens.close();
  }
});

test("a create that meets a gateway error is reported as maybe applied, never sent twice", async () => {
  const neens = await server((_, res) => {
    res.writeHead(502);
    res.end();
  });
  try {
    const client = new Client(neens.url, "nk_live_x", { retry });
    await assert.rejects(client.post("/preprod-evals", {}), (error: unknown) => {
      assert.ok(error instanceof Unreachable && error.maybeApplied, String(error));
      assert.match(error.message, /POST \/preprod-evals \(HTTP 502 Bad Gateway\); the request may or may not have been applied/);
      return true;
    });
    assert.equal(neens.calls(), 1);
  } finally {
    await neens.close();
  }
});

test("a redirect is not followed, and the error names where it pointed", async () => {
  const neens = await server((_, res) => {
    res.writeHead(307, { Location: "https://elsewhere.example/x" });
    res.end();
  });
  try {
    const client = new Client(neens.url, "nk_live_x", { retry });
    await assert.rejects(client.get("/x"), (error: unknown) => {
      assert.ok(error instanceof ApiError && error.exitCode === 2);
      assert.match(error.message, /redirect to https:\/\/elsewhere\.example\/x; set NEENS_BASE_URL/);
      return true;
    });
    assert.equal(neens.calls(), 1);
  } finally {
    await neens.close();
  }
});

test("server errors map to exit codes: 401 is a refused key (2), 500 is no verdict (3)", async () => {
  const neens = await server((req, res) => {
    const status = req.url === "/auth" ? 401 : 500;
    res.writeHead(status, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ error: { code: status === 401 ? "not_authenticated" : "internal", message: "nope", field: "Authorization" } }));
  });
  try {
    const client = new Client(neens.url, "nk_live_x", { retry: { ...retry, windowS: 0 } });
    await assert.rejects(client.get("/auth"), (error: unknown) => error instanceof AuthError && error.exitCode === 2 && error.message === "nope (field Authorization) [HTTP 401 not_authenticated]; check NEENS_API_KEY");
    await assert.rejects(client.get("/boom"), (error: unknown) => error instanceof ApiError && error.exitCode === 3);
  } finally {
    await neens.close();
  }
});

test("a malformed NEENS_BASE_URL or key is a usage error before anything is sent", () => {
  assert.throws(() => Client.fromEnv({ NEENS_BASE_URL: "neens.example.com", NEENS_API_KEY: "k" }), (error: unknown) => error instanceof ConfigError && /must start with http:\/\/ or https:\/\//.test(error.message));
  assert.throws(() => Client.fromEnv({ NEENS_BASE_URL: "http://h:99999", NEENS_API_KEY: "k" }), /the port in 'http:\/\/h:99999' is not a number between 0 and 65535/);
  assert.throws(() => Client.fromEnv({ NEENS_BASE_URL: "http://h", NEENS_API_KEY: "nk live" }), /NEENS_API_KEY: the API key is empty or contains whitespace/);
  assert.throws(() => Client.fromEnv({ NEENS_BASE_URL: "http://h", NEENS_API_KEY: "k", NEENS_RETRY_WINDOW: "soon" }), /NEENS_RETRY_WINDOW: 'soon' is not a number of seconds/);
});
