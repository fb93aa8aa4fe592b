/** Reading gate policy files: a YAML policy (with the `yaml` package installed, as it is for
 * these tests) means the same as its JSON twin; files that cannot be used are usage errors
 * naming the file. */

import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { ConfigError } from "../src/errors.js";
import { loadPolicy } from "../src/gatePolicy.js";

const POLICY = {
  gate: { max_regressions: 0, min_pass_rate: 0.9 },
  rules: [
    { cost: { max_avg_usd: 0.05, max_delta_pct: 20 }, severity: "warn" },
    { metric: "faithfulness", min_avg: 0.8 },
  ],
  on_missing_baseline: "block",
};

const YAML = `gate:
  max_regressions: 0
  min_pass_rate: 0.9
rules:
  - cost: {max_avg_usd: 0.05, max_delta_pct: 20}
    severity: warn
  - metric: faithfulness
    min_avg: 0.8
on_missing_baseline: block
`;

test("a YAML policy means the same as its JSON twin", async () => {
  const dir = mkdtempSync(join(tmpdir(), "neens-policy-"));
  writeFileSync(join(dir, "gate.json"), JSON.stringify(POLICY));
  writeFileSync(join(dir, "gate.yaml"), YAML);
  writeFileSync(join(dir, "gate.policy"), YAML); // any other name: JSON, then YAML
  const fromJson = await loadPolicy(join(dir, "gate.json"));
  for (const name of ["gate.yaml", "gate.policy"]) {
    const fromYaml = await loadPolicy(join(dir, name));
    assert.deepEqual({ ...fromYaml, source: null }, { ...fromJson, source: null });
  }
  assert.equal(fromJson.rules.length, 2);
  assert.deepEqual(
    fromJson.rules.flatMap((rule) => rule.checks.map((check) => [check.dimension, check.budget, check.threshold, check.severity])),
    [
      ["cost", "max_avg_usd", 0.05, "warn"],
      ["cost", "max_delta_pct", 20, "warn"],
      ["metric", "min_avg", 0.8, "block"],
    ],
  );
});

test("a policy that cannot be used is a usage error naming the file and what is wrong", async () => {
  const dir = mkdtempSync(join(tmpdir(), "neens-policy-"));
  const cases: [string, string, string][] = [
    ["bad.json", "{", `gate policy ${join(dir, "bad.json")}: not valid JSON`],
    ["bad.yaml", "rules: [", `gate policy ${join(dir, "bad.yaml")}: not valid YAML`],
    ["unknown.json", '{"rule": []}', 'unknown key "rule"; a policy has "gate", "rules" and "on_missing_baseline"'],
    ["severity.json", '{"rules": [{"min_avg_score": 0.8, "severity": "fatal"}]}', 'rules[0]: "severity" must be "block" or "warn", got "fatal"'],
    ["gate.json", '{"gate": {"min_pass_rate": 1.5}}', "gate: min_pass_rate must be a number between 0 and 1, got 1.5"],
  ];
  for (const [name, text, message] of cases) {
    writeFileSync(join(dir, name), text);
    await assert.rejects(loadPolicy(join(dir, name)), (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.ok(error.message.includes(message), `${error.message} lacks ${message}`);
      return true;
    });
  }
  await assert.rejects(loadPolicy(join(dir, "missing.json")), /no such file; check --gate-policy or NEENS_GATE_POLICY/);
});
