// Read and write result lines the way bench_serving does.
//
// bench_serving appends `json.dumps(result)` per run. Python's json writes the default
// request rate float("inf") as the bare token `Infinity` (and NaN as `NaN`), which is
// not JSON: JSON.stringify would turn it into null and JSON.parse rejects it. So lines
// are written with Python's separators (", " and ": ") and bare non-finite tokens, and
// read back with those tokens restored, so a bench_serving line and an aerie line
// parse the same way.

const SENTINEL = '\u0000aerie-nonfinite:';

/** Serialise like Python's json.dumps with default arguments (ensure_ascii included). */
export function formatJsonLine(value: unknown): string {
  return dump(value);
}

function dump(v: unknown): string {
  if (typeof v === 'number') {
    if (Number.isNaN(v)) return 'NaN';
    if (v === Infinity) return 'Infinity';
    if (v === -Infinity) return '-Infinity';
    return JSON.stringify(v);
  }
  if (v === null || v === undefined) return 'null';
  if (Array.isArray(v)) return `[${v.map(dump).join(', ')}]`;
  if (typeof v === 'object') {
    const parts: string[] = [];
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      if (x === undefined) continue;
      parts.push(`${dumpString(k)}: ${dump(x)}`);
    }
    return `{${parts.join(', ')}}`;
  }
  if (typeof v === 'string') return dumpString(v);
  return JSON.stringify(v);
}

// Python escapes every non-ASCII UTF-16 unit as \uXXXX (surrogates one by one).
function dumpString(s: string): string {
  return JSON.stringify(s).replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Parse one line that may hold Python's bare Infinity / -Infinity / NaN. */
export function parseJsonLine(line: string): unknown {
  // Strings pass through untouched; bare tokens outside strings become sentinels.
  const quoted = line.replace(/"(?:[^"\\]|\\.)*"|-?Infinity|NaN/g, (m) =>
    m.startsWith('"') ? m : JSON.stringify(SENTINEL + m),
  );
  return JSON.parse(quoted, (_k, v: unknown) => {
    if (typeof v === 'string' && v.startsWith(SENTINEL)) {
      const t = v.slice(SENTINEL.length);
      return t === 'NaN' ? NaN : t === '-Infinity' ? -Infinity : Infinity;
    }
    return v;
  });
}

/** Parse a whole JSONL text, skipping blank lines. */
export function parseJsonLines(text: string): unknown[] {
  return text
    .split(/\r?\n/)
    .filter((l) => l.trim().length > 0)
    .map(parseJsonLine);
}
