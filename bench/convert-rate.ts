/**
 * The converter's rate against a plain `cp` of the same bytes, and its peak RSS: runs
 * bench/convert-rate.py (the converter is Python, so is its harness) with the machine's python3.
 *
 *   npx tsx bench/convert-rate.ts [--samples 2000] [--hidden 4096] [--tokens 200] [--dir /dev/shm/x] [--batch 250]
 *
 * The goal: SpecForge files at >= 80% of the copy rate, peak RSS under 300 MB.
 */
import { spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');
const r = spawnSync('python3', [join(ROOT, 'bench/convert-rate.py'), ...process.argv.slice(2)], { stdio: 'inherit' });
process.exit(r.status ?? 1);
