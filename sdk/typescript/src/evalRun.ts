/**
 * `neens-eval run` and `neens-eval push`: drive a pre-prod run to a verdict and exit with it, as
 * the Python `neens eval run|push` does.
 *
 * `run` fetches the run's frozen prompts and invokes the command once per item still pending,
 * with the prompt on stdin and in $NEENS_ITEM_INPUT and the correlation attributes in
 * OTEL_RESOURCE_ATTRIBUTES; `push` creates a run in which Neens calls the agent connection. Both
 * then wait for the verdict, read the gate, comparison, metrics and items, evaluate the gate
 * policy's rules and exit 0, 1, 2 or 3. A create whose answer was lost is never sent twice: the
 * run it may have made is looked up and followed.
 */

import type { Parsed } from "./args.js";
import { type Client, type RetryNotice, Client as NeensClient, describeNotice, expectObject, pyRepr, retryFromEnv } from "./client.js";
import { exporterEnv, itemEnv, ITEM_INPUT_VAR, percentEncode } from "./correlation.js";
import { ApiError, ConfigError, EXIT_UNREACHABLE, NeensClientError, Unreachable } from "./errors.js";
import { fixed, formatG, pyDumps, shellJoin } from "./format.js";
import { type GatePolicy, type Json, evaluate, policyChecks } from "./gateRules.js";
import { policyFromArgs, refuseCreateFlags, refuseProjectId, requireCreateFields, serverGate } from "./evalArgs.js";
import { type ItemRun, Invoker, checkCommand, itemOk, itemReason } from "./invoke.js";
import {
  type EvalResult,
  type NotRun,
  describeLastSeen,
  exitCode,
  followCommand,
  newResult,
  writeJson,
  writeSummary,
} from "./summary.js";
import { writeSummaryMd } from "./summaryMd.js";
import { type LastSeen, Poller, Progress, TERMINAL, lastSeenJson, waitForVerdict } from "./waiting.js";

type Env = Record<string, string | undefined>;
const RECENT_RUNS = 50;
const SERVER_POLL_DURING_RUN_S = 2;

/** With --no-gate, a verdict that could not be reached (exit 3) is reported and exits 0. */
async function reportOnly(args: Parsed, command: () => Promise<number>): Promise<number> {
  try {
    return await command();
  } catch (error) {
    if (!(error instanceof NeensClientError) || !args["noGate"] || error.exitCode !== EXIT_UNREACHABLE) throw error;
    process.stderr.write(`neens: error: ${error.message}\nneens: --no-gate: no verdict, reported only, exiting 0\n`);
    return 0;
  }
}

/** What an interrupt must stop: the agent commands running, if any. */
const interruption: { invoker: Invoker | null } = { invoker: null };

/** SIGTERM (a cancelled CI job) is treated like Ctrl-C: the agent commands are killed too, and
 * the command exits 130. */
function onInterrupt(): void {
  interruption.invoker?.killAllNow();
  process.stderr.write("neens: interrupted\n");
  process.exit(130);
}

/** `neens-eval run`: create or resume a runner-mode run, invoke the agent, gate. */
export async function runCommand(args: Parsed, env: Env = process.env): Promise<number> {
  process.on("SIGINT", onInterrupt);
  process.on("SIGTERM", onInterrupt);
  try {
    return await runUninterrupted(args, env);
  } finally {
    process.off("SIGINT", onInterrupt);
    process.off("SIGTERM", onInterrupt);
  }
}

function runUninterrupted(args: Parsed, env: Env): Promise<number> {
  return reportOnly(args, async () => {
    refuseProjectId(args);
    const command = args["command"] as string[];
    if (Boolean(args["create"]) === Boolean(args["runId"])) {
      throw new ConfigError(
        "give either --create (with --dataset and --version-label) to start a new run, or " +
          "--run-id ppr_… to drive an existing one",
      );
    }
    if (args["create"]) {
      requireCreateFields(args);
      checkCommand(command, env);
    } else {
      refuseCreateFlags(args, "--run-id");
      if (command.length) checkCommand(command, env);
    }
    const policy = await policyFromArgs(args, env);
    const progress = new Progress(process.stderr);
    const client = makeClient(args, progress, env);
    if (args["create"]) {
      const run = await createRun(client, args, policy, "runner", progress);
      progress.log(`neens: created run ${String(run["id"])} (${String(run["itemCount"] ?? "None")} items); ${followHint(run, command)}`);
      return drive(client, run, args, policy, progress, env);
    }
    const run = await new Poller(client, String(args["runId"])).run();
    warnGateNotApplied(policy, run, progress);
    if (run["runnerMode"] === "push" || !command.length) return follow(client, run, args, policy, progress);
    return drive(client, run, args, policy, progress, env);
  });
}

/** `neens-eval push`: create a push-mode run (or follow one by id), wait for it, gate. */
export function pushCommand(args: Parsed, env: Env = process.env): Promise<number> {
  return reportOnly(args, async () => {
    refuseProjectId(args);
    if (args["runId"]) {
      refuseCreateFlags(args, "--run-id");
    } else {
      requireCreateFields(args);
      if (!String(args["agentConnection"] ?? "").trim()) {
        throw new ConfigError(
          "--agent-connection is required to create a push run: the agent connection " +
            "Neens calls (conn_…); or give --run-id ppr_… to follow an existing run",
        );
      }
    }
    const policy = await policyFromArgs(args, env);
    const progress = new Progress(process.stderr);
    const client = makeClient(args, progress, env);
    if (args["runId"]) {
      const run = await new Poller(client, String(args["runId"])).run();
      warnGateNotApplied(policy, run, progress);
      return follow(client, run, args, policy, progress);
    }
    const run = await createRun(client, args, policy, "push", progress);
    progress.log(
      `neens: created push run ${String(run["id"])} (${String(run["itemCount"] ?? "None")} items), Neens is calling ` +
        `${String(args["agentConnection"])}; ${followHint(run, [])}`,
    );
    return conclude(client, run, args, policy, progress, new Map());
  });
}

async function follow(client: Client, run: Json, args: Parsed, policy: GatePolicy, progress: Progress): Promise<number> {
  if (run["runnerMode"] === "push") {
    progress.log(`neens: following push run ${String(run["id"])}: Neens calls the agent itself`);
  } else if (!TERMINAL.has(String(run["status"])) && runCount(run, "pending")) {
    progress.log(
      `neens: following runner run ${String(run["id"])} without an agent command: its ` +
        `${runCount(run, "pending")} pending items are left to whatever runs them (give the ` +
        `command after -- with \`neens-eval run --run-id\` to run them here)`,
    );
  }
  return conclude(client, run, args, policy, progress, new Map());
}

async function drive(client: Client, run: Json, args: Parsed, policy: GatePolicy, progress: Progress, env: Env): Promise<number> {
  const poller = new Poller(client, String(run["id"]));
  let items: Json[];
  try {
    items = await poller.items();
  } catch (error) {
    if (error instanceof NeensClientError) return noVerdict(client, run, args, policy, progress, error, { at: new Date(), run });
    throw error;
  }
  let pending = items.filter((item) => item["status"] === "pending");
  if (TERMINAL.has(String(run["status"]))) {
    progress.log(`neens: run ${String(run["id"])} is already ${String(run["status"])}; nothing to run`);
    pending = [];
  } else if (pending.length < items.length) {
    progress.log(
      `neens: already captured: ${items.length - pending.length} of ${items.length} items; ` +
        `running the ${pending.length} still pending`,
    );
  }
  const base: Env = { ...env, ...exporterEnv(env, client.baseUrl, (env["NEENS_API_KEY"] ?? "").trim()) };
  const runs = await runItems(poller, run, pending, base, args, progress);
  return conclude(client, run, args, policy, progress, runs);
}

async function runItems(
  poller: Poller,
  run: Json,
  pending: Json[],
  env: Env,
  args: Parsed,
  progress: Progress,
): Promise<Map<string, ItemRun>> {
  const results = new Map<string, ItemRun>();
  if (!pending.length) return results;
  const command = args["command"] as string[];
  const runId = String(run["id"]);
  const label = String(run["versionLabel"] ?? "");
  const invoker = new Invoker(command, args["itemTimeout"] as number);
  progress.log(
    `neens: running ${pending.length} item${pending.length !== 1 ? "s" : ""} with ` +
      `\`${command.join(" ")}\` (concurrency ${String(args["concurrency"])})`,
  );
  const longPrompts: string[] = [];
  interruption.invoker = invoker;
  const started = performance.now() / 1000;
  let server: Json = run;
  let lastPoll = started;
  const queue = [...pending];
  const worker = async (): Promise<void> => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) {
      const itemId = String(item["item_id"]);
      const prompt = String(item["input"] ?? "");
      const { env: itemEnvironment, fits } = itemEnv(env, { runId, itemId, versionLabel: label, prompt });
      if (!fits) longPrompts.push(itemId);
      const result = await invoker.run(itemId, prompt, itemEnvironment);
      results.set(itemId, result);
      if (!itemOk(result)) progress.log(`neens: item ${itemId}: ${itemReason(result)}`);
    }
  };
  const ticker = setInterval(() => {
    const at = performance.now() / 1000;
    if (at - lastPoll >= SERVER_POLL_DURING_RUN_S && results.size < pending.length) {
      lastPoll = at;
      poller.run().then(
        (answer) => {
          server = answer;
        },
        () => undefined, // only for the progress line; the wait that follows reports errors
      );
    }
    const failed = [...results.values()].filter((r) => !itemOk(r)).length;
    progress.update(
      `neens: ${runId}: ${results.size}/${pending.length} items run${failed ? ` (${failed} failed)` : ""}, ` +
        `${captured(server)}/${String(server["itemCount"] ?? "?")} captured [${fixed(at - started, 0)}s]`,
      "running items",
    );
  }, 500);
  try {
    const concurrency = Math.min(args["concurrency"] as number, pending.length);
    await Promise.all(Array.from({ length: concurrency }, worker));
  } finally {
    clearInterval(ticker);
    interruption.invoker = null;
  }
  for (const itemId of longPrompts) {
    progress.log(`neens: the prompt of item ${itemId} is too long for $${ITEM_INPUT_VAR}; it was given on standard input only`);
  }
  return results;
}

async function conclude(
  client: Client,
  run: Json,
  args: Parsed,
  policy: GatePolicy,
  progress: Progress,
  runs: Map<string, ItemRun>,
): Promise<number> {
  const runId = String(run["id"]);
  const poller = new Poller(client, runId);
  poller.lastSeen = { at: new Date(), run };
  const failedLocally = new Set([...runs].filter(([, r]) => !itemOk(r)).map(([id]) => id));
  const timeout = formatG(args["timeout"] as number);
  if (runs.size) {
    progress.log(`neens: all ${runs.size} commands finished; waiting for ${runId}'s verdict (timeout ${timeout} s)`);
  } else {
    progress.log(`neens: waiting for ${runId}'s verdict (timeout ${timeout} s)`);
  }
  const reported = new Set<string>();
  const reportFailed = async (itemIds: string[]): Promise<boolean> => {
    for (const itemId of itemIds) {
      try {
        await client.post(`${poller.path}/items/${percentEncode(itemId)}/error`, {
          reason: `not run: ${itemReason(runs.get(itemId) as ItemRun)}`,
        });
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        if (error.status !== 409) {
          // 409: its trace arrived after all; the verdict stands
          progress.log(`neens: could not record item ${itemId} as an error: ${error.message}`);
          return false;
        }
      }
      reported.add(itemId);
    }
    progress.log(
      `neens: recorded ${itemIds.length} item${itemIds.length > 1 ? "s" : ""} whose ` +
        `command failed as errors on the server; waiting for the verdict`,
    );
    return true;
  };
  let result: EvalResult;
  try {
    const waited = await waitForVerdict(poller, {
      timeoutS: args["timeout"] as number,
      progress,
      describe: describeProgress(runId),
      failedLocally,
      reportFailed,
    });
    progress.close();
    result = await readResult(client, poller, waited.run, waited.outcome, waited.waitedS, args, policy, runs, reported);
  } catch (error) {
    progress.close();
    if (error instanceof NeensClientError) return noVerdict(client, run, args, policy, progress, error, poller.lastSeen);
    throw error;
  }
  if (args["asJson"]) {
    writeSummary(result, process.stderr);
    writeJson(result, process.stdout);
  } else {
    writeSummary(result, process.stdout);
  }
  if (args["summaryMd"] !== null) writeSummaryMd(result, String(args["summaryMd"]));
  return exitCode(result);
}

async function readResult(
  client: Client,
  poller: Poller,
  run: Json,
  outcome: EvalResult["outcome"],
  waitedS: number,
  args: Parsed,
  policy: GatePolicy,
  runs: Map<string, ItemRun>,
  reported: Set<string>,
): Promise<EvalResult> {
  const path = poller.path;
  const items = await poller.items();
  let gate: Json | null = null;
  let comparison: Json | null = null;
  let metrics: Json[] = [];
  if (outcome === "finished") {
    gate = expectObject(await client.get(`${path}/gate`), `GET ${path}/gate`);
    comparison = expectObject(await client.get(`${path}/comparison`), `GET ${path}/comparison`);
    const listed = expectObject(await client.get(`${path}/metrics`), `GET ${path}/metrics`)["metrics"];
    metrics = (Array.isArray(listed) ? listed : []).filter(isJson);
  }
  const storedGate = isJson(run["gate"]) ? run["gate"] : null;
  const evaluatedPolicy: GatePolicy = { ...policy, gate: storedGate && Object.keys(storedGate).length ? storedGate : null };
  const judges = policyChecks(policy).some((check) => check.metric !== null) ? await judgeNames(client, run) : new Map<string, string | null>();
  const rules = evaluate(evaluatedPolicy, { status: String(run["status"]), items, comparison, metrics, judges });
  const byId = new Map(items.map((item) => [String(item["item_id"]), item]));
  const notRun: NotRun[] = [];
  const warnings: string[] = [];
  for (const [itemId, itemRun] of runs) {
    if (itemOk(itemRun)) continue;
    const item = byId.get(itemId) ?? {};
    if (item["status"] === "pending" || reported.has(itemId)) {
      notRun.push({ itemId, input: String(item["input"] ?? ""), reason: itemReason(itemRun), recorded: reported.has(itemId) });
    } else {
      warnings.push(
        `item ${itemId}: ${itemReason(itemRun)}, but its trace was captured, so the server's verdict on it stands`,
      );
    }
  }
  return newResult({
    runId: String(run["id"]),
    url: runUrl(client, run),
    mode: String(run["runnerMode"] ?? "runner"),
    versionLabel: String(run["versionLabel"] ?? ""),
    run,
    outcome,
    enforce: !args["noGate"],
    gate,
    items,
    comparison,
    rules,
    notRun,
    waitedS,
    timeoutS: args["timeout"] as number,
    policySource: policy.source,
    warnings,
    command: (args["command"] as string[] | undefined) ?? [],
    lastSeen: poller.lastSeen ? lastSeenJson(poller.lastSeen) : null,
  });
}

/** For metric rules: the run's judges and the components of its composites, each with its name. */
async function judgeNames(client: Client, run: Json): Promise<Map<string, string | null>> {
  const names = new Map<string, string | null>();
  const queue = (Array.isArray(run["judgeDeploymentIds"]) ? run["judgeDeploymentIds"] : []).map(String);
  while (queue.length) {
    const judgeId = queue.shift() as string;
    if (names.has(judgeId)) continue;
    let judge: unknown;
    try {
      judge = await client.get(`/judges/${percentEncode(judgeId)}`);
    } catch (error) {
      if (!(error instanceof ApiError) || error.status >= 500) throw error;
      judge = null;
    }
    const doc = isJson(judge) ? judge : {};
    names.set(judgeId, typeof doc["name"] === "string" ? doc["name"] : null);
    const config = doc["config"];
    if (doc["type"] === "composite" && isJson(config)) {
      for (const part of Array.isArray(config["components"]) ? config["components"] : []) {
        if (isJson(part) && part["judgeId"]) queue.push(String(part["judgeId"]));
      }
    }
  }
  return names;
}

/** The server went away after the run was created: say where the run is and what was last seen
 * of it, write the `--json` result when asked, and let the error be reported with its code. */
function noVerdict(
  client: Client,
  run: Json,
  args: Parsed,
  policy: GatePolicy,
  progress: Progress,
  error: NeensClientError,
  lastSeen: LastSeen | null,
): never {
  if (error.exitCode !== EXIT_UNREACHABLE) throw error;
  const seen = lastSeen !== null ? lastSeen.run : run;
  const result = newResult({
    runId: String(run["id"]),
    url: runUrl(client, run),
    mode: String(run["runnerMode"] ?? "runner"),
    versionLabel: String(run["versionLabel"] ?? ""),
    run: seen,
    outcome: "unreachable",
    enforce: !args["noGate"],
    timeoutS: args["timeout"] as number,
    policySource: policy.source,
    error: error.message,
    lastSeen: lastSeen !== null ? lastSeenJson(lastSeen) : null,
    command: (args["command"] as string[] | undefined) ?? [],
  });
  if (args["asJson"]) writeJson(result, process.stdout);
  if (args["summaryMd"] !== null) {
    try {
      writeSummaryMd(result, String(args["summaryMd"]));
    } catch (failure) {
      // The outage stays the error to exit with.
      if (!(failure instanceof ConfigError)) throw failure;
      progress.log(`neens: error: ${failure.message}`);
    }
  }
  if (result.lastSeen !== null) progress.log(`neens: ${describeLastSeen(result.lastSeen)}`);
  progress.log(
    `neens: no verdict for ${result.runId}; the server keeps the run: once it is back, ` +
      `follow it again with \`${followCommand(result)}\``,
  );
  throw error;
}

/** Create the run the flags and policy describe; a create whose answer was lost is looked up. */
async function createRun(client: Client, args: Parsed, policy: GatePolicy, runnerMode: string, progress: Progress): Promise<Json> {
  const datasetId = await resolveDatasetId(client, String(args["dataset"]).trim());
  const body: Json = { dataset_id: datasetId, version_label: args["versionLabel"] };
  if (args["name"] !== null) body["name"] = args["name"];
  if (args["datasetVersion"] !== null) body["dataset_version_id"] = args["datasetVersion"];
  if (runnerMode === "push") {
    body["runner_mode"] = "push";
    body["agent_connection_id"] = args["agentConnection"];
  }
  const judges = args["judges"] as string[] | null;
  if (judges && judges.length) body["judge_deployment_ids"] = [...judges];
  if (args["baseline"] !== null) body["baseline"] = args["baseline"];
  const gate = serverGate(policy, args);
  if (Object.keys(gate).length) body["gate"] = gate;
  const known = await recentRunIds(client, datasetId);
  let created: unknown;
  try {
    created = await client.post("/preprod-evals", body);
  } catch (error) {
    if (error instanceof Unreachable) {
      if (!error.maybeApplied) throw error;
      created = await runCreatedBy(client, body, known, error, progress);
    } else if (error instanceof ApiError) {
      if (error.status === 422 && error.field === "dataset_id" && error.serverMessage.includes("golden")) {
        throw new ConfigError(
          `${error.message}; push a golden version with \`neens-eval datasets-push FILE.jsonl --name NAME ` +
            `--golden\`, or pin one with --dataset-version dsv_…`,
        );
      }
      if (error.status === 404 && error.field === "dataset_id") {
        throw new ConfigError(
          `${error.message}; give --dataset the dataset's name (as given to \`neens-eval datasets-push ` +
            `--name\`) or its id (ds_…), which that command prints`,
        );
      }
      throw error;
    } else {
      throw error;
    }
  }
  const run = expectObject(created, "POST /preprod-evals");
  if (typeof run["id"] !== "string") throw new ApiError(200, "unexpected_response", "POST /preprod-evals answered without an id");
  return run;
}

/** `--dataset` as an id: a `ds_…` value is one already; anything else is a dataset name. */
async function resolveDatasetId(client: Client, dataset: string): Promise<string> {
  if (dataset.startsWith("ds_")) return dataset;
  const listing = expectObject(await client.get("/datasets", { name: dataset }), "GET /datasets");
  const found = (Array.isArray(listing["datasets"]) ? listing["datasets"] : []).filter(isJson);
  const first = found[0];
  if (first !== undefined && typeof first["id"] === "string") return first["id"];
  throw new ConfigError(
    `--dataset: no dataset named ${pyRepr(dataset)} in this project; give the name you pushed it ` +
      `with (\`neens-eval datasets-push FILE.jsonl --name NAME --golden\`) or its id (ds_…)`,
  );
}

async function recentRunIds(client: Client, datasetId: string): Promise<string[]> {
  const listing = expectObject(await client.get("/preprod-evals", { dataset_id: datasetId, limit: RECENT_RUNS }), "GET /preprod-evals");
  return (Array.isArray(listing["runs"]) ? listing["runs"] : []).filter(isJson).map((row) => String(row["id"]));
}

/** The run a create that got no answer made, found once the server answers again. */
async function runCreatedBy(client: Client, body: Json, known: string[], error: Unreachable, progress: Progress): Promise<Json> {
  progress.log(
    "neens: the request creating the run got no answer; looking on the server for the run " +
      "it may have created (it is not sent twice)",
  );
  const datasetId = String(body["dataset_id"]);
  let listing: Json;
  try {
    listing = expectObject(await client.get("/preprod-evals", { dataset_id: datasetId, limit: RECENT_RUNS }), "GET /preprod-evals");
  } catch (failure) {
    if (!(failure instanceof NeensClientError)) throw failure;
    throw new Unreachable(
      `${error.message}; looking for the run it may have created failed too (${failure.message}): once Neens ` +
        `answers, list the dataset's runs (GET /preprod-evals?dataset_id=${datasetId}) and ` +
        `follow the run of ${String(body["version_label"])}, if there is one, with ` +
        `\`neens-eval push --run-id ID\``,
    );
  }
  const before = new Set(known);
  const fresh: Json[] = [];
  for (const row of Array.isArray(listing["runs"]) ? listing["runs"] : []) {
    if (!isJson(row) || before.has(String(row["id"]))) break;
    fresh.push(row);
  }
  const wanted: Json = {
    versionLabel: body["version_label"],
    name: body["name"] ?? body["version_label"],
    runnerMode: body["runner_mode"] ?? "runner",
    agentConnectionId: body["agent_connection_id"] ?? null,
  };
  const matches = fresh.filter((row) => Object.entries(wanted).every(([key, value]) => (row[key] ?? null) === value));
  if (matches.length === 1) {
    progress.log(`neens: the server did create run ${String(matches[0]?.["id"])}; following it`);
    return matches[0] as Json;
  }
  if (!matches.length) {
    throw new Unreachable(
      `${error.message}: the server answers again and has no new run of ${String(body["version_label"])} ` +
        `on dataset ${datasetId}, so nothing was created; run the command again`,
    );
  }
  throw new Unreachable(
    `${error.message}: the server now has ${matches.length} new runs of ${String(body["version_label"])} that ` +
      `could be it (${matches.map((row) => String(row["id"])).join(", ")}); follow the right one with ` +
      `\`neens-eval push --run-id ID\``,
  );
}

function warnGateNotApplied(policy: GatePolicy, run: Json, progress: Progress): void {
  if (policy.gate && Object.keys(policy.gate).length && canonical(policy.gate) !== canonical(run["gate"] ?? null)) {
    progress.log(
      `neens: warning: the gate block of ${String(policy.source)} is not applied: ${String(run["id"])} ` +
        `was created with the gate ${pyDumps(run["gate"] ?? null)}, which the server keeps`,
    );
  }
}

/** The client from the environment, retrying for `--retry-window` (or NEENS_RETRY_WINDOW). */
function makeClient(args: Parsed, progress: Progress, env: Env): Client {
  const retry = retryFromEnv(env);
  if (args["retryWindow"] !== null) {
    retry.windowS = args["retryWindow"] as number;
    retry.windowFrom = "--retry-window";
  }
  const client = NeensClient.fromEnv(env, retry);
  client.onRetry = (notice: RetryNotice) => progress.update(`${describeNotice(notice)} [${fixed(notice.waitedS, 0)}s]`, "retrying");
  return client;
}

function describeProgress(runId: string): (run: Json, elapsed: number) => string {
  return (run, elapsed) => {
    const tally = isJson(run["counts"]) ? run["counts"] : {};
    const total = String(run["itemCount"] ?? "?");
    const done = (Number(tally["scored"] ?? 0) || 0) + (Number(tally["error"] ?? 0) || 0);
    return `neens: ${runId} ${String(run["status"])}: ${captured(run)}/${total} captured, ${done}/${total} scored [${fixed(elapsed, 0)}s]`;
  };
}

function runCount(run: Json, key: string): number {
  const value = isJson(run["counts"]) ? run["counts"][key] : undefined;
  return typeof value === "number" && Number.isInteger(value) ? value : 0;
}

function followHint(run: Json, command: string[]): string {
  if (command.length) return `follow it again with \`neens-eval run --run-id ${String(run["id"])} -- ${shellJoin(command)}\``;
  return `follow it again with \`neens-eval push --run-id ${String(run["id"])}\``;
}

function captured(run: Json): number {
  if (!isJson(run["counts"])) return 0;
  const tally = run["counts"];
  return ["captured", "scored", "error"].reduce((sum, key) => sum + (Number(tally[key] ?? 0) || 0), 0);
}

function runUrl(client: Client, run: Json): string {
  return `${client.baseUrl}/preprod-evals/${percentEncode(String(run["id"]))}`;
}

/** JSON with sorted keys: two objects are equal as dicts are in Python, whatever their order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (isJson(value)) {
    return `{${Object.keys(value).sort().map((key) => `${JSON.stringify(key)}:${canonical(value[key])}`).join(",")}}`;
  }
  return JSON.stringify(value ?? null);
}

function isJson(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
