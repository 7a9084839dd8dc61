#!/usr/bin/env node
// aerie's command line, run from TypeScript source through tsx (no build step).
import { register } from 'tsx/esm/api';
register();
await import(new URL('../src/cli/main.ts', import.meta.url).href);
