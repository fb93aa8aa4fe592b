/** The conformance table, run against this build's `neens-eval` (dist/src/cli.js). The Python
 * tests run the same table against the Python CLI and against the packed tarball. */

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";

import { CLI, loadCases, problems, runCase } from "./conformance.js";

const all = loadCases();
for (const table of [...new Set(all.map((item) => item.table))]) {
  describe(`conformance: ${table}`, () => {
    for (const item of all.filter((each) => each.table === table)) {
      it(item.name, async () => {
        const tmp = mkdtempSync(join(tmpdir(), "neens-conformance-"));
        try {
          const outcome = await runCase(item, [process.execPath, CLI], tmp);
          const found = problems(item, outcome, tmp);
          assert.deepEqual(found, [], found.join("\n"));
        } finally {
          rmSync(tmp, { recursive: true, force: true });
        }
      });
    }
  });
}
