/** The library side of `@neens/eval`: the client and the pieces the CLI is built from. */
export { Client, type RetryPolicy } from "./client.js";
export { ApiError, AuthError, ConfigError, NeensClientError, Unreachable } from "./errors.js";
export { mergeResourceAttributes, itemEnv, exporterEnv } from "./correlation.js";
export { parsePolicy, loadPolicy } from "./gatePolicy.js";
export { evaluate } from "./gateRules.js";
export { main } from "./cli.js";
export { VERSION } from "./version.js";
