/**
 * A small command-line parser with argparse's rules, so `neens-eval` reads its arguments as the
 * Python `neens` does: `--flag value` or `--flag=value`, the last of a repeated flag wins (or each
 * is kept, for repeatable ones), everything after `--` is positional, and a bad value is a usage
 * error naming the flag (`argument --min-pass-rate: 1.5 is not between 0 and 1`, exit 2).
 */

import { EXIT_USAGE } from "./errors.js";

/** A value that cannot be converted; the message says why, the parser adds the flag. */
export class ArgumentTypeError extends Error {}

/** A usage error found while parsing: printed with the command's usage line, exit 2. */
export class UsageError extends Error {
  readonly exitCode = EXIT_USAGE;
}

export interface OptionSpec {
  /** The flag, such as `--min-pass-rate`. */
  flag: string;
  /** The key it is stored under (default: the flag in camelCase). */
  dest?: string;
  metavar?: string;
  help: string;
  /** `flag`: no value (true when given); `value`: one value; `append`: one value, repeatable;
   * `extend`: one or more values, repeatable. */
  kind: "flag" | "value" | "append" | "extend";
  convert?: (text: string) => unknown;
  default?: unknown;
  /** A usage error when it is not given (argparse's `required=True`). */
  required?: boolean;
}

export interface PositionalSpec {
  dest: string;
  metavar: string;
  help: string;
  /** `one`: optional single value; `rest`: every remaining positional. */
  kind: "one" | "rest";
  convert?: (text: string) => unknown;
  /** A usage error when it is not given. */
  required?: boolean;
}

export interface CommandSpec {
  name: string;
  usage: string;
  description: string;
  options: OptionSpec[];
  positionals: PositionalSpec[];
  epilog?: string;
}

export type Parsed = Record<string, unknown>;

export function destOf(option: OptionSpec): string {
  return option.dest ?? option.flag.replace(/^--/, "").replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** Parse `argv` for `spec`; `null` means help was printed (exit 0). */
export function parseArgs(spec: CommandSpec, argv: readonly string[]): Parsed | null {
  const byFlag = new Map(spec.options.map((option) => [option.flag, option]));
  const parsed: Parsed = {};
  for (const option of spec.options) {
    parsed[destOf(option)] = option.kind === "flag" ? (option.default ?? false) : (option.default ?? null);
  }
  for (const positional of spec.positionals) parsed[positional.dest] = positional.kind === "rest" ? [] : null;
  const positionals: string[] = [];
  let index = 0;
  const fail = (message: string): never => {
    throw new UsageError(message);
  };
  const convert = (option: OptionSpec, text: string): unknown => {
    if (!option.convert) return text;
    try {
      return option.convert(text);
    } catch (error) {
      if (error instanceof ArgumentTypeError) fail(`argument ${option.flag}: ${error.message}`);
      throw error;
    }
  };
  while (index < argv.length) {
    const token = argv[index] as string;
    index += 1;
    if (token === "--") {
      positionals.push(...argv.slice(index));
      break;
    }
    if (token === "-h" || token === "--help") {
      process.stdout.write(helpText(spec));
      return null;
    }
    if (!token.startsWith("-") || token === "-" || /^-\d/.test(token)) {
      positionals.push(token);
      continue;
    }
    const equals = token.indexOf("=");
    const flag = token.startsWith("--") && equals > 0 ? token.slice(0, equals) : token;
    const inline = token.startsWith("--") && equals > 0 ? token.slice(equals + 1) : null;
    const option = byFlag.get(flag);
    if (option === undefined) {
      fail(`unrecognized arguments: ${token}`);
      break;
    }
    const dest = destOf(option);
    if (option.kind === "flag") {
      if (inline !== null) fail(`argument ${flag}: ignored explicit argument '${inline}'`);
      parsed[dest] = true;
      continue;
    }
    const values: string[] = [];
    if (inline !== null) {
      values.push(inline);
    } else {
      while (index < argv.length && isValue(argv[index] as string)) {
        values.push(argv[index] as string);
        index += 1;
        if (option.kind !== "extend") break;
      }
    }
    if (values.length === 0) {
      fail(`argument ${flag}: expected ${option.kind === "extend" ? "at least one argument" : "one argument"}`);
    }
    const converted = values.map((value) => convert(option, value));
    if (option.kind === "value") {
      parsed[dest] = converted[0];
    } else {
      const list = Array.isArray(parsed[dest]) ? (parsed[dest] as unknown[]) : [];
      parsed[dest] = [...list, ...converted];
    }
  }
  let taken = 0;
  for (const positional of spec.positionals) {
    if (positional.kind === "rest") {
      parsed[positional.dest] = positionals.slice(taken);
      taken = positionals.length;
    } else if (taken < positionals.length) {
      const text = positionals[taken] as string;
      taken += 1;
      try {
        parsed[positional.dest] = positional.convert ? positional.convert(text) : text;
      } catch (error) {
        if (error instanceof ArgumentTypeError) fail(`argument ${positional.metavar}: ${error.message}`);
        throw error;
      }
    }
  }
  if (taken < positionals.length) fail(`unrecognized arguments: ${positionals.slice(taken).join(" ")}`);
  const missing = [
    ...spec.positionals.filter((p) => p.required && parsed[p.dest] === null).map((p) => p.metavar),
    ...spec.options.filter((o) => o.required && parsed[destOf(o)] === null).map((o) => o.flag),
  ];
  if (missing.length) fail(`the following arguments are required: ${missing.join(", ")}`);
  return parsed;
}

function isValue(token: string): boolean {
  return token === "-" || !token.startsWith("-") || /^-\d|^-\.\d/.test(token);
}

export function helpText(spec: CommandSpec): string {
  const lines = [`usage: ${spec.usage}`, "", spec.description, ""];
  if (spec.positionals.length) {
    lines.push("positional arguments:");
    for (const positional of spec.positionals) lines.push(row(positional.metavar, positional.help));
    lines.push("");
  }
  lines.push("options:");
  lines.push(row("-h, --help", "show this help message and exit"));
  for (const option of spec.options) {
    const shown = option.kind === "flag" ? option.flag : `${option.flag} ${option.metavar ?? "VALUE"}`;
    lines.push(row(shown, option.help));
  }
  if (spec.epilog) lines.push("", spec.epilog.trimEnd());
  return `${lines.join("\n")}\n`;
}

function row(left: string, help: string): string {
  return left.length < 24 ? `  ${left.padEnd(24)}${help}` : `  ${left}\n  ${" ".repeat(24)}${help}`;
}
