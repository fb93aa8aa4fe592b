/** A cancelled CI job (SIGTERM) or Ctrl-C stops `neens-eval run` with exit 130, and the agent
 * commands it started are stopped too, their whole process group, even one that ignores SIGTERM. */

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { CLI } from "./conformance.js";

const RUN = {
  id: "ppr_1", versionLabel: "v1", runnerMode: "runner", status: "awaiting_traces", itemCount: 1,
  counts: { pending: 1, captured: 0, scored: 0, error: 0 },
};
const ITEMS = { items: [{ item_id: "dsi_0", input: "Where is order 17?", status: "pending" }] };

/** Whether `pid` is a live process (a zombie waiting to be reaped has stopped running). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = existsSync(`/proc/${pid}/stat`) ? readFileSync(`/proc/${pid}/stat`, "utf8") : "";
  return !/^\d+ \(.*\) Z/.test(stat);
}

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  test(`${signal} stops the run with exit 130 and kills the agent's process group`, async () => {
    const neens = createServer((req, res) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify(req.url?.endsWith("/items") ? ITEMS : RUN));
    });
    await new Promise<void>((done) => neens.listen(0, "127.0.0.1", done));
    const dir = mkdtempSync(join(tmpdir(), "neens-interrupt-"));
    const pidFile = join(dir, "grandchild.pid");
    // The agent starts a grandchild that ignores SIGTERM, then waits for it.
    const agent = `trap '' TERM; sh -c 'trap "" TERM; echo $$ > ${pidFile}; sleep 60' & wait`;
    let grandchild = 0;
    try {
      const child = spawn(process.execPath, [CLI, "run", "--run-id", "ppr_1", "--", "sh", "-c", agent], {
        env: { ...process.env, NEENS_BASE_URL: `http://127.0.0.1:${(neens.address() as AddressInfo).port}`, NEENS_API_KEY: "nk_live_x" },
      });
      let stderr = "";
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
      const exited = new Promise<number | null>((done) => child.on("close", (code) => done(code)));
      for (let i = 0; i < 200 && !existsSync(pidFile); i++) await new Promise((done) => setTimeout(done, 50));
      grandchild = Number(readFileSync(pidFile, "utf8").trim());
      child.kill(signal);
      assert.equal(await exited, 130, stderr);
      assert.match(stderr, /neens: interrupted/);
      for (let i = 0; i < 40 && running(grandchild); i++) await new Promise((done) => setTimeout(done, 50));
      assert.equal(running(grandchild), false, "the agent's grandchild still runs");
    } finally {
      if (grandchild && running(grandchild)) {
        // Leave nothing behind when the test fails: the agent's whole group.
        const group = Number(readFileSync(`/proc/${grandchild}/stat`, "utf8").replace(/^.*\) /, "").split(" ")[2]);
        process.kill(-group, "SIGKILL");
      }
      neens.closeAllConnections();
      await new Promise<void>((done) => neens.close(() => done()));
    }
  });
}
