// Which build of aerie is current: a digest of everything the compiled output is made from.
// Plain JavaScript, because bin/aerie.mjs checks it before deciding whether tsx is needed.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Inputs beyond src/ that change what `npm run build` emits. */
const BUILD_INPUTS = [
  'package-lock.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'scripts/build.ts',
  'bin/build-stamp.mjs',
];

function sourceFiles(dir, out = []) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) sourceFiles(p, out);
    else if (e.name.endsWith('.ts')) out.push(p);
  }
  return out;
}

/** sha256 over the relative path and bytes of every build input, in a fixed order. */
export function sourceStamp(root) {
  const h = createHash('sha256');
  const files = [...sourceFiles(join(root, 'src')).map((p) => p.slice(root.length + 1)), ...BUILD_INPUTS].sort();
  for (const rel of files) {
    let bytes;
    try {
      bytes = readFileSync(join(root, rel));
    } catch {
      bytes = Buffer.alloc(0);
    }
    h.update(`${rel}\0${bytes.length}\0`).update(bytes);
  }
  return h.digest('hex');
}

export const STAMP_FILE = 'BUILD-STAMP';

/** The stamp dist/ was built from, or null when there is no complete build. */
export function builtStamp(root) {
  try {
    return readFileSync(join(root, 'dist', STAMP_FILE), 'utf8').trim();
  } catch {
    return null;
  }
}

/** True when dist/ holds a complete build of exactly the current sources. */
export function buildIsCurrent(root) {
  const built = builtStamp(root);
  return built !== null && built === sourceStamp(root);
}
