#!/usr/bin/env node
// aerie's command line. Runs the compiled build in dist/ when it matches the sources (set-up
// builds it), and the TypeScript sources through tsx otherwise, so an edited checkout never
// runs stale code. AERIE_FROM_SOURCE=1 forces the sources.
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';
import { buildIsCurrent } from './build-stamp.mjs';

// V8 lets the old generation grow to ~4× the live heap between full collections when they are
// cheap. A worker streaming 100k samples keeps ~50 MB live but then reached ~390 MB resident;
// growing by 1.5× instead keeps it under 300 MB at the same throughput (bench/generate-scale.ts).
// The factor is read at every collection, so setting it here, before any work, takes effect.
v8.setFlagsFromString('--heap-growing-percent=50');

const root = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
if (process.env.AERIE_FROM_SOURCE !== '1' && buildIsCurrent(root)) {
  await import(new URL('../dist/cli/main.js', import.meta.url).href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import(new URL('../src/cli/main.ts', import.meta.url).href);
}
