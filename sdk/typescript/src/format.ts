/**
 * Text formatting that matches the Python SDK's output, so both CLIs print the same lines:
 * `json.dumps` with its default separators, `format(x, ".4g")`, and an exactly rounded sum.
 */


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

/**
 * Python's `f"{x:.{digits}f}"`. JavaScript's `toFixed` rounds an exact tie (2.5, 0.125) up, Python
 * to even, so the tie is rounded here from the double's exact decimal expansion.
 */
export function fixed(value: number, digits: number): string {
  if (!Number.isFinite(value) || Math.abs(value) >= 1e21) return value.toFixed(digits);
  const exact = exactDecimal(Math.abs(value));
  const [whole, fraction = ""] = exact.split(".") as [string, string?];
  const kept = fraction.slice(0, digits).padEnd(digits, "0");
  const rest = fraction.slice(digits);
  let digitsText = whole + kept;
  const roundUp = rest !== "" && (rest[0] as string) > "5" ? true
    : rest !== "" && rest[0] === "5" && /[1-9]/.test(rest.slice(1)) ? true
    : rest !== "" && rest[0] === "5" ? Number(digitsText[digitsText.length - 1]) % 2 === 1
    : false;
  if (roundUp) digitsText = (BigInt(digitsText) + 1n).toString().padStart(digitsText.length, "0");
  const head = digitsText.slice(0, digitsText.length - digits) || "0";
  const text = digits ? `${head}.${digitsText.slice(digitsText.length - digits)}` : head;
  return (value < 0 || Object.is(value, -0)) ? `-${text}` : text;
}

/** The exact decimal value of a finite non-negative double, without exponent. */
function exactDecimal(value: number): string {
  if (value === 0) return "0";
  const buffer = new DataView(new ArrayBuffer(8));
  buffer.setFloat64(0, value);
  const bits = buffer.getBigUint64(0);
  const exponentBits = Number((bits >> 52n) & 0x7ffn);
  let mantissa = bits & 0xfffffffffffffn;
  let exponent: number;
  if (exponentBits === 0) {
    exponent = -1074;
  } else {
    mantissa |= 1n << 52n;
    exponent = exponentBits - 1075;
  }
  if (exponent >= 0) return (mantissa << BigInt(exponent)).toString();
  // mantissa / 2^-exponent = mantissa * 5^-exponent / 10^-exponent
  const scaled = (mantissa * 5n ** BigInt(-exponent)).toString().padStart(-exponent + 1, "0");
  const whole = scaled.slice(0, scaled.length + exponent);
  const fraction = scaled.slice(scaled.length + exponent).replace(/0+$/, "");
  return fraction ? `${whole}.${fraction}` : whole;
}

/** Python's `f"{x:,.{digits}f}"`: thousands separated by commas. */
export function groupedFixed(value: number, digits: number): string {
  const text = fixed(value, digits);
  const negative = text.startsWith("-");
  const [whole, fraction] = (negative ? text.slice(1) : text).split(".") as [string, string?];
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return `${negative ? "-" : ""}${grouped}${fraction !== undefined ? `.${fraction}` : ""}`;
}

/** Python's `f"{x:.0%}"` (or more digits). */
export function percent(value: number, digits = 0): string {
  return `${fixed(value * 100, digits)}%`;
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

/** Python's `format(x, "g")` (or `.{precision}g`): shortest form, no trailing zeros. */
export function formatG(value: number, precision = 6): string {
  if (!Number.isFinite(value)) return Number.isNaN(value) ? "nan" : value > 0 ? "inf" : "-inf";
  if (value === 0) return Object.is(value, -0) ? "-0" : "0";
  const exponentForm = value.toExponential(precision - 1);
  const exponent = Number(exponentForm.slice(exponentForm.indexOf("e") + 1));
  if (exponent < -4 || exponent >= precision) {
    const [mantissa, exp] = exponentForm.split("e") as [string, string];
    const trimmed = mantissa.includes(".") ? mantissa.replace(/\.?0+$/, "") : mantissa;
    const sign = exp.startsWith("-") ? "-" : "+";
    const digits = exp.replace(/^[+-]/, "").padStart(2, "0");
    return `${trimmed}e${sign}${digits}`;
  }
  const plain = fixed(value, Math.max(precision - 1 - exponent, 0));
  return plain.includes(".") ? plain.replace(/\.?0+$/, "") : plain;
}
