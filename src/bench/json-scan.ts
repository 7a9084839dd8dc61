// Read one key of a JSON object from its bytes without parsing the rest.
//
// Sound because of how JSON escapes strings: inside a string every `"` is written `\"`,
// so the byte sequence `"key"` followed by optional whitespace and `:` only ever
// occurs where `key` is an object key. A match inside a nested object is possible, so
// callers only ask for keys that SGLang's frames use once ("meta_info", "text", "error").

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const OPEN = 0x7b;
const CLOSE = 0x7d;

function isSpace(c: number | undefined): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
}

const keyCache = new Map<string, Buffer>();
function quoted(key: string): Buffer {
  let b = keyCache.get(key);
  if (!b) keyCache.set(key, (b = Buffer.from(JSON.stringify(key))));
  return b;
}

/**
 * Index of the first byte of the value of `key`, or -1 when the key does not occur.
 * `fromEnd` finds the last occurrence, scanning only the tail for a key written last
 * (SGLang writes meta_info after the cumulative text).
 */
export function valueStart(buf: Buffer, key: string, fromEnd = false): number {
  const needle = quoted(key);
  let from = fromEnd ? buf.length : 0;
  for (;;) {
    const at = fromEnd ? (from < 0 ? -1 : buf.lastIndexOf(needle, from)) : buf.indexOf(needle, from);
    if (at < 0) return -1;
    let i = at + needle.length;
    while (isSpace(buf[i])) i++;
    if (buf[i] === COLON) {
      i++;
      while (isSpace(buf[i])) i++;
      return i < buf.length ? i : -1;
    }
    // A string value equal to the key's name (e.g. "text": "meta_info"), not a key.
    from = fromEnd ? at - 1 : at + 1;
  }
}

/** True when the object's first key is `key` (how SGLang writes a stream error frame). */
export function firstKeyIs(buf: Buffer, key: string): boolean {
  let i = 0;
  while (isSpace(buf[i])) i++;
  if (buf[i] !== OPEN) return false;
  i++;
  while (isSpace(buf[i])) i++;
  const needle = quoted(key);
  return buf.length - i >= needle.length && buf.compare(needle, 0, needle.length, i, i + needle.length) === 0;
}

/** [start, end) of the object value of `key`, or undefined when absent or not an object. */
export function objectValueRange(buf: Buffer, key: string, fromEnd = false): [number, number] | undefined {
  const start = valueStart(buf, key, fromEnd);
  if (start < 0 || buf[start] !== OPEN) return undefined;
  let depth = 0;
  let inString = false;
  for (let i = start; i < buf.length; i++) {
    const c = buf[i];
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN) depth++;
    else if (c === CLOSE && --depth === 0) return [start, i + 1];
  }
  return undefined;
}

export type StringState = 'absent' | 'empty' | 'non-empty' | 'not-a-string';

/** Whether `key` holds a string, and whether that string is empty, without decoding it. */
export function stringValueState(buf: Buffer, key: string): StringState {
  const start = valueStart(buf, key);
  if (start < 0) return 'absent';
  if (buf[start] !== QUOTE) return 'not-a-string';
  return buf[start + 1] === QUOTE ? 'empty' : 'non-empty';
}
