/**
 * Field types every section shares: durations, argv lists, environment maps, ports. One
 * definition each, so the same mistake reads the same error in every section.
 */
import { z } from 'zod';

/** "2s", "500ms", "20m", "1h" or a number of seconds → milliseconds. */
export const duration = z
  .union([
    z.number().nonnegative(),
    z.string().regex(/^\d+(\.\d+)?(ms|s|m|h)$/, 'a duration like "2s", "500ms", "20m" or "1h"'),
  ])
  .transform((v) => {
    if (typeof v === 'number') return Math.round(v * 1000);
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(v)!;
    const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as 'ms' | 's' | 'm' | 'h'];
    return Math.round(Number(m[1]) * unit);
  });

export const nonEmpty = z.string().min(1, 'a non-empty string');
export const argv = z.array(nonEmpty).min(1, 'at least one element (the program to run)');
export const envMap = z.record(
  z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name'),
  z.string(),
);
export const port = z.number().int().min(1).max(65535);
