/** The pieces whose behaviour the Python SDK pins down too: the OTel correlation variables, the
 * baseline windows both SDKs and the server accept, and the formatting shared with Python. */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { fixed, formatG, groupedFixed } from "../src/format.js";
import { exporterEnv, itemEnv, mergeResourceAttributes, parsePairs } from "../src/correlation.js";
import { windowSeconds } from "../src/evalArgs.js";
import { fsum, pyDumps } from "../src/format.js";
import { PACKAGE_DIR } from "./conformance.js";

test("the correlation keys are added percent-encoded and replace only the user's values for them", () => {
  const merged = mergeResourceAttributes("service.name=support, neens.eval_run_id=old ,team=a%2Cb", {
    "neens.eval_run_id": "ppr_1",
    "neens.dataset_item_id": "dsi_1",
    "neens.version_label": "v1 beta,2=é",
  });
  assert.equal(
    merged,
    "service.name=support,team=a%2Cb,neens.eval_run_id=ppr_1,neens.dataset_item_id=dsi_1,neens.version_label=v1%20beta%2C2%3D%C3%A9",
  );
  assert.equal(parsePairs(merged)["neens.version_label"], "v1 beta,2=é");
});

test("a prompt too long for an environment variable goes on standard input only", () => {
  const long = "x".repeat(128 * 1024);
  const { env, fits } = itemEnv({ NEENS_ITEM_INPUT: "stale" }, { runId: "r", itemId: "i", versionLabel: "v", prompt: long });
  assert.equal(fits, false);
  assert.equal(env["NEENS_ITEM_INPUT"], undefined);
  assert.equal(itemEnv({}, { runId: "r", itemId: "i", versionLabel: "v", prompt: "hi" }).env["NEENS_ITEM_INPUT"], "hi");
});

test("the exporter is pointed at Neens with the key only when the user pointed it nowhere", () => {
  assert.deepEqual(exporterEnv({}, "http://neens:8000/api", "nk_live_x"), {
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://neens:8000/api/v1/traces",
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/protobuf",
    OTEL_EXPORTER_OTLP_TRACES_HEADERS: "Authorization=Bearer%20nk_live_x",
  });
  assert.deepEqual(exporterEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }, "http://neens:8000", "k"), {});
  assert.deepEqual(
    exporterEnv({ OTEL_EXPORTER_OTLP_HEADERS: "x-team=a", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://neens:8000/v1/traces" }, "http://neens:8000", "k"),
    { OTEL_EXPORTER_OTLP_TRACES_HEADERS: "x-team=a,Authorization=Bearer%20k" },
  );
  assert.deepEqual(exporterEnv({ OTEL_EXPORTER_OTLP_TRACES_HEADERS: "authorization=mine" }, "http://neens:8000", "k"), {
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://neens:8000/v1/traces",
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/protobuf",
  });
});

test("baseline windows follow the table the server and the Python SDK share", () => {
  const shared = JSON.parse(readFileSync(join(PACKAGE_DIR, "..", "..", "tests", "shared", "baseline_ranges.json"), "utf8")) as {
    cases: { range: string; seconds: number | null }[];
  };
  assert.ok(shared.cases.length > 5);
  for (const { range, seconds } of shared.cases) assert.equal(windowSeconds(range), seconds, range);
});

test("numbers are written as Python writes them", () => {
  assert.deepEqual([0.5, 600, 1e-5, 123456789, 0.1 + 0.2].map((x) => formatG(x)), ["0.5", "600", "1e-05", "1.23457e+08", "0.3"]);
  assert.equal(formatG(0.0012345, 4), "0.001234");
  assert.equal(pyDumps({ a: [1, "é"], b: null }), '{"a": [1, "\\u00e9"], "b": null}');
  assert.equal(fsum([0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]), 1);
});

test("fixed-point text rounds an exact tie to even, as Python does", () => {
  // Python: f"{0.125:.2f}" == "0.12", f"{2.5:.0f}" == "2", f"{0.375:.2f}" == "0.38", f"{1.005:.2f}" == "1.00"
  assert.deepEqual(
    [fixed(0.125, 2), fixed(2.5, 0), fixed(3.5, 0), fixed(0.375, 2), fixed(1.005, 2), fixed(-0.0001, 1), fixed(12.25, 1), fixed(999.995, 2)],
    ["0.12", "2", "4", "0.38", "1.00", "-0.0", "12.2", "1000.00"],
  );
  assert.equal(groupedFixed(1234567.891, 2), "1,234,567.89");
  assert.equal(formatG(2.5e-5), "2.5e-05");
});
