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

/**
 * The release to imitate and the launch flags left for argparse: `--version X.Y.Z` (or
 * `--version=X.Y.Z`) right after `sglang` wins over AERIE_SIM_SGLANG_VERSION. The pair is the
 * simulator's own, so it is stripped before SGLang's parser sees the rest.
 */
export function pickRelease(argv: readonly string[], env: NodeJS.ProcessEnv): { release: SimRelease; rest: string[] } {
  const [first, second, ...after] = argv;
  if (first === '--version') {
    if (second === undefined || second.startsWith('-')) {
      throw new SimReleaseError(
        `aerie-sim sglang --version needs a release (${SIM_RELEASES.join(', ')}) right after it`,
      );
    }
    return { release: parseSimRelease(second), rest: after };
  }
  if (first !== undefined && first.startsWith('--version=')) {
    return { release: parseSimRelease(first.slice('--version='.length)), rest: argv.slice(1) };
  }
  const fromEnv = env.AERIE_SIM_SGLANG_VERSION;
  if (fromEnv !== undefined && fromEnv !== '') {
    try {
      return { release: parseSimRelease(fromEnv), rest: [...argv] };
    } catch (e) {
      throw new SimReleaseError(`AERIE_SIM_SGLANG_VERSION: ${(e as Error).message}`);
    }
  }
  return { release: DEFAULT_SIM_RELEASE, rest: [...argv] };
}
