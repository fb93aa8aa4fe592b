/** The client-side rules on the cost cases they share with the server's gate and the Python SDK
 * (tests/shared/gate_cases.json at the repository's root), so no side drifts on what a case means. */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { parsePolicy } from "../src/gatePolicy.js";
import { ABS_TOLERANCE, REL_TOLERANCE, evaluate } from "../src/gateRules.js";
import { PACKAGE_DIR } from "./conformance.js";

interface GateCase {
  name: string;
  status: string;
  rule: string;
  threshold: number;
  candidate: Record<string, unknown>;
  baseline: Record<string, unknown> | null;
  expected: string;
  observed?: number;
  reason_contains?: string;
}

const table = JSON.parse(readFileSync(join(PACKAGE_DIR, "..", "..", "tests", "shared", "gate_cases.json"), "utf8")) as {
  tolerance: { relative: number; absolute: number };
  cases: GateCase[];
};
const SCORED = [{ item_id: "dsi_1", status: "scored", score: 0.9, passed: true }];

test("the rules round with the tolerance of the shared table", () => {
  assert.deepEqual([REL_TOLERANCE, ABS_TOLERANCE], [table.tolerance.relative, table.tolerance.absolute]);
});

for (const item of table.cases) {
  test(`shared gate case: ${item.name}`, () => {
    const policy = parsePolicy({ rules: [{ cost: { [item.rule]: item.threshold } }], on_missing_baseline: "pass" }, "gate_cases.json");
    const comparison = { candidate: item.candidate, baseline: item.baseline };
    const results = evaluate(policy, { status: item.status, items: SCORED, comparison, metrics: [], judges: new Map() });
    assert.equal(results.length, 1);
    const [rule] = results;
    assert.equal(rule?.status, item.expected, rule?.reason);
    if (item.observed !== undefined) {
      assert.ok(rule?.observed !== null && Math.abs((rule?.observed ?? NaN) - item.observed) <= 1e-9 * Math.abs(item.observed) + 1e-12);
    }
    assert.ok(rule?.reason.includes(item.reason_contains ?? ""), rule?.reason);
  });
}
