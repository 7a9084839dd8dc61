/**
 * Which SGLang release the simulator imitates. Every behaviour that differs between releases
 * reads it from here, with the release and `path:line` in its wheel beside the rule.
 * Chosen by `aerie-sim sglang --version X.Y.Z ...` (first, before the launch flags) or
 * AERIE_SIM_SGLANG_VERSION; 0.5.23 when neither is given.
 */
export const SIM_RELEASES = ['0.5.4', '0.5.9', '0.5.12', '0.5.23'] as const;
export type SimRelease = (typeof SIM_RELEASES)[number];
export const DEFAULT_SIM_RELEASE: SimRelease = '0.5.23';

export class SimReleaseError extends Error {}

export function parseSimRelease(raw: string): SimRelease {
  if ((SIM_RELEASES as readonly string[]).includes(raw)) return raw as SimRelease;
  throw new SimReleaseError(`aerie-sim imitates SGLang ${SIM_RELEASES.join(', ')}; got '${raw}'`);
}

/** Compares releases by their numbers: atLeast('0.5.12', '0.5.9') is true. */
export function atLeast(release: SimRelease, floor: string): boolean {
  const a = release.split('.').map(Number);
  const b = floor.split('.').map(Number);
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] > b[i];
  return true;
}
