/** The command line is read by argparse's rules, as the Python CLI reads it. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { UsageError, parseArgs } from "../src/args.js";
import { PUSH_SPEC, RUN_SPEC } from "../src/evalArgs.js";

test("values, repeated and extended flags, --flag=value, and the agent command after --", () => {
  const parsed = parseArgs(RUN_SPEC, [
    "--create", "--dataset=support-golden", "--version-label", "v1", "--judge", "jdg_1", "jdg_2",
    "--judge", "jdg_3", "--min-pass-rate", "0.9", "--max-cost-delta-pct", "-20", "--concurrency", "4",
    "--", "python", "-m", "myagent", "--verbose",
  ]);
  assert.ok(parsed !== null);
  assert.equal(parsed["create"], true);
  assert.equal(parsed["dataset"], "support-golden");
  assert.deepEqual(parsed["judges"], ["jdg_1", "jdg_2", "jdg_3"]);
  assert.equal(parsed["minPassRate"], 0.9);
  assert.equal(parsed["maxCostDeltaPct"], -20);
  assert.equal(parsed["concurrency"], 4);
  assert.equal(parsed["timeout"], 600);
  assert.deepEqual(parsed["command"], ["python", "-m", "myagent", "--verbose"]);
  assert.deepEqual(parsed["baseline"], null);
});

test("a baseline is read as the server takes it", () => {
  assert.deepEqual(parseArgs(PUSH_SPEC, ["--baseline", "prod:7d"])?.["baseline"], { kind: "prod_window", range: "7d" });
  assert.deepEqual(parseArgs(PUSH_SPEC, ["--baseline", "run:ppr_1"])?.["baseline"], { kind: "preprod_run", value: "ppr_1" });
});

test("bad usage names the flag, as argparse does", () => {
  const cases: [string[], string][] = [
    [["--min-pass-rate", "1.5"], "argument --min-pass-rate: 1.5 is not between 0 and 1 (0.9 means 90%)"],
    [["--max-regressions", "two"], "argument --max-regressions: 'two' is not a whole number"],
    [["--baseline", "prod:400d"], "argument --baseline: 'prod:400d' is not a baseline; use prod:WINDOW"],
    [["--timeout", "0"], "argument --timeout: 0 is not a positive number of seconds"],
    [["--timeout"], "argument --timeout: expected one argument"],
    [["--retry-window", "-1"], "argument --retry-window: '-1' is not a number of seconds (0 or more)"],
    [["--datset", "x"], "unrecognized arguments: --datset"],
    [["stray"], "unrecognized arguments: stray"],
    [["--json=yes"], "argument --json: ignored explicit argument 'yes'"],
  ];
  for (const [argv, message] of cases) {
    assert.throws(() => parseArgs(PUSH_SPEC, argv), (error: unknown) => {
      assert.ok(error instanceof UsageError, String(error));
      assert.ok(error.message.startsWith(message), `${error.message} does not start with ${message}`);
      return true;
    });
  }
});
