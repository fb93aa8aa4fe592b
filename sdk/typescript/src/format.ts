/**
 * Text formatting that matches the Python SDK's output, so both CLIs print the same lines:
 * `json.dumps` with its default separators, `format(x, ".4g")`, and an exactly rounded sum.
 */

export { formatG } from "./client.js";

/** Python's `json.dumps(value)`: `", "` and `": "` separators, non-ASCII escaped. */
export function pyDumps(value: unknown): string {
  if (value === null || value === undefined) return "null";
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "number") {
    if (Number.isNaN(value)) return "NaN";
    if (!Number.isFinite(value)) return value > 0 ? "Infinity" : "-Infinity";
    return JSON.stringify(value);
  }
  if (typeof value === "string") {
    return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
  }
  if (Array.isArray(value)) return `[${value.map(pyDumps).join(", ")}]`;
  if (typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>);
    return `{${entries.map(([key, item]) => `${pyDumps(key)}: ${pyDumps(item)}`).join(", ")}}`;
  }
  return JSON.stringify(String(value));
}

/** The correctly rounded sum of `values` (Python's `math.fsum`, Shewchuk's algorithm). */
export function fsum(values: readonly number[]): number {
  const partials: number[] = [];
  for (let x of values) {
    let i = 0;
    for (let y of partials) {
      if (Math.abs(x) < Math.abs(y)) [x, y] = [y, x];
      const hi = x + y;
      const lo = y - (hi - x);
      if (lo) partials[i++] = lo;
      x = hi;
    }
    partials.length = i;
    partials.push(x);
  }
  let n = partials.length;
  if (n === 0) return 0;
  let hi = partials[--n] as number;
  let lo = 0;
  while (n > 0) {
    const x = hi;
    const y = partials[--n] as number;
    hi = x + y;
    const yr = hi - x;
    lo = y - yr;
    if (lo) break;
  }
  if (n > 0 && ((lo < 0 && (partials[n - 1] as number) < 0) || (lo > 0 && (partials[n - 1] as number) > 0))) {
    const y = lo * 2;
    const x = hi + y;
    const yr = x - hi;
    if (y === yr) hi = x;
  }
  return hi;
}

/** Python's `f"{x:.{digits}f}"`: round half to even on the exact binary value. */
export function fixed(value: number, digits: number): string {
  return value.toFixed(digits);
}

/** Python's `f"{x:.0%}"` (or more digits). */
export function percent(value: number, digits = 0): string {
  return `${(value * 100).toFixed(digits)}%`;
}

/** Python's `math.isclose`. */
export function isClose(a: number, b: number, relTol: number, absTol: number): boolean {
  if (a === b) return true;
  if (!Number.isFinite(a) || !Number.isFinite(b)) return false;
  const diff = Math.abs(b - a);
  return diff <= Math.abs(relTol * b) || diff <= Math.abs(relTol * a) || diff <= absTol;
}

/** A one-line excerpt of a prompt, quoted as JSON (at most 60 characters). */
export function quoteExcerpt(text: unknown): string {
  if (typeof text !== "string") return "";
  const line = text.split(/\s+/).filter(Boolean).join(" ");
  return JSON.stringify(line.length <= 60 ? line : `${line.slice(0, 57)}...`);
}

/** Quote a command line for a POSIX shell, as Python's `shlex.join` does. */
export function shellJoin(words: readonly string[]): string {
  return words
    .map((word) => (word && /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\"'\"'")}'`))
    .join(" ");
}
