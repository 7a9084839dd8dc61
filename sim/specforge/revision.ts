/**
 * Which SpecForge revision the simulator imitates: AERIE_SIM_SPECFORGE_REVISION names one of
 * the profiles aerie knows (src/stages/common/specforge-revision.ts; the sim imports nothing from
 * src/, so the ids are repeated here). `aerie-sim specforge` is the CLI whatever is set;
 * `aerie-sim train` and `aerie-sim prepare` follow the v0.2 profile named, v0.2.0 by default.
 */
export type SimSpecforgeRevision = 'v0.2.0' | 'v0.2-final-save' | 'v0.2-resume' | 'cli';

const KNOWN: SimSpecforgeRevision[] = ['v0.2.0', 'v0.2-final-save', 'v0.2-resume', 'cli'];

export function simSpecforgeRevision(
  env: NodeJS.ProcessEnv = process.env,
  fallback: SimSpecforgeRevision = 'v0.2.0',
): SimSpecforgeRevision {
  const v = env.AERIE_SIM_SPECFORGE_REVISION;
  if (v === undefined || v === '') return fallback;
  if (!(KNOWN as string[]).includes(v)) {
    throw new Error(
      `AERIE_SIM_SPECFORGE_REVISION=${v}: not a revision the simulator imitates (one of ${KNOWN.join(', ')})`,
    );
  }
  return v as SimSpecforgeRevision;
}
