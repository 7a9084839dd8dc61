/**
 * Which SpecForge a host runs, and what follows from it. SpecForge changed its interface
 * several times in 2026 (scripts → one `specforge` CLI; a working v0.2 `--resume`; a final
 * checkpoint; prepare_hidden_states' aux flag), and researchers pin a revision per cluster, so
 * every driver decision that differs between revisions reads it from here, never from a guess.
 *
 * Profiles, oldest first (dates are the commits' in github:sgl-project/SpecForge; every v0.2
 * revision's version.txt says 0.2.0, so the package version cannot tell them apart):
 *   v0.2.0           73e6f808 (2025-12-23) … before 03a3dedb: scripts; --resume broken; no final save
 *   v0.2-final-save  03a3dedb (2026-01-12) … before 961ca7c3: scripts; --resume broken; final save
 *   v0.2-resume      961ca7c3 (2026-03-16) … 20e2e3f0 (2026-07-13, the last with train_eagle3.py)
 *   cli              7d1fbf08 (2026-07-14, server-only runtime) … a6b6b023 (2026-08-08) = PyPI specforge 0.2.0;
 *                    its offline extraction from ca949555 (2026-07-18): the prepare_hidden_states.py of
 *                    7d1fbf08…ffe081c8 takes neither aux flag, and preflight refuses it
 * The CLI between 86c7d765 (2026-07-04) and 7d1fbf08 is a pre-release with another runtime: not supported.
 */
export type SpecforgeProfileId = 'v0.2.0' | 'v0.2-final-save' | 'v0.2-resume' | 'cli';

export const SPECFORGE_PROFILE_IDS: readonly SpecforgeProfileId[] = ['v0.2.0', 'v0.2-final-save', 'v0.2-resume', 'cli'];

/** What stages.train.specforge-revision accepts: a profile, or `auto` (what preflight finds on the host). */
export type SpecforgeRevisionPin = 'auto' | SpecforgeProfileId;

export type SpecforgeDriver = 'specforge-v0.2' | 'specforge';

export interface SpecforgeProfile {
  id: SpecforgeProfileId;
  /** What `aerie plan` / `doctor` print. */
  label: string;
  flavor: 'v0.2-scripts' | 'cli';
  /** The train driver that speaks this revision's interface. */
  driver: SpecforgeDriver;
  /** v0.2 `--resume` restores optimizer, scheduler and data position (fixed in 961ca7c3). */
  v02ResumeWorks: boolean;
  /** The trainer saves a checkpoint when it finishes, not only every save_interval (03a3dedb). */
  finalSave: boolean;
  /** How prepare_hidden_states.py is told to capture aux states (ca949555 switched to the draft config). */
  prepareAuxFlag: '--enable-aux-hidden-states' | '--draft-model-config';
  /** How an interrupted run continues. */
  resume: 'aerie-continuation' | 'v0.2-resume' | 'resume_from';
}

export const SPECFORGE_PROFILES: Record<SpecforgeProfileId, SpecforgeProfile> = {
  'v0.2.0': {
    id: 'v0.2.0',
    label: 'SpecForge v0.2.0 scripts (73e6f808)',
    flavor: 'v0.2-scripts',
    driver: 'specforge-v0.2',
    // SpecForge@73e6f808:specforge/utils.py:66 get_last_checkpoint matches ^epoch_(\d+)$ while the
    // script saves epoch_{e}_step_{s}: --resume finds nothing and starts over.
    v02ResumeWorks: false,
    // SpecForge@73e6f808:scripts/train_eagle3.py saves only on save_interval (no final save before 03a3dedb).
    finalSave: false,
    // SpecForge@73e6f808:scripts/prepare_hidden_states.py:80
    prepareAuxFlag: '--enable-aux-hidden-states',
    resume: 'aerie-continuation',
  },
  'v0.2-final-save': {
    id: 'v0.2-final-save',
    label: 'SpecForge v0.2 scripts, 03a3dedb…961ca7c3^',
    flavor: 'v0.2-scripts',
    driver: 'specforge-v0.2',
    v02ResumeWorks: false,
    // SpecForge@03a3dedb:scripts/train_eagle3.py:865-870 ("Training completed at step …, saving final checkpoint...")
    finalSave: true,
    prepareAuxFlag: '--enable-aux-hidden-states',
    resume: 'aerie-continuation',
  },
  'v0.2-resume': {
    id: 'v0.2-resume',
    label: 'SpecForge v0.2 scripts, 961ca7c3…20e2e3f0 (full --resume from 6d01edb5)',
    flavor: 'v0.2-scripts',
    driver: 'specforge-v0.2',
    // SpecForge@961ca7c3:scripts/train_eagle3.py:401,819-820 (start_epoch, global_step from ckpt_info)
    v02ResumeWorks: true,
    finalSave: true,
    // SpecForge@20e2e3f0:scripts/prepare_hidden_states.py:92
    prepareAuxFlag: '--enable-aux-hidden-states',
    resume: 'v0.2-resume',
  },
  cli: {
    id: 'cli',
    label: 'SpecForge CLI (a6b6b023 / PyPI specforge 0.2.0)',
    flavor: 'cli',
    driver: 'specforge',
    v02ResumeWorks: false,
    finalSave: true,
    // SpecForge@a6b6b023:scripts/prepare_hidden_states.py:111 (the flag exists from ca949555)
    prepareAuxFlag: '--draft-model-config',
    // SpecForge@a6b6b023:specforge/config/schema.py:568-569 (training.resume_from: a checkpoint dir)
    resume: 'resume_from',
  },
};

/** The profiles a train driver can drive. */
export function profilesFor(driver: SpecforgeDriver): SpecforgeProfileId[] {
  return SPECFORGE_PROFILE_IDS.filter((id) => SPECFORGE_PROFILES[id].driver === driver);
}

/** What follows from a profile, one line each, for `aerie plan` and `aerie doctor`. */
export function profileBehaviours(id: SpecforgeProfileId): string[] {
  const p = SPECFORGE_PROFILES[id];
  const resume = {
    'aerie-continuation':
      'resume: --resume here matches only epoch_N directories, and --ckpt-dir dies before 07959b44, so aerie links resume_step_N/epoch_0 to the newest complete checkpoint and passes --resume there (weights only: optimizer and LR schedule start over)',
    'v0.2-resume':
      'resume: --resume, after aerie moves a damaged newest checkpoint aside (it restores optimizer, scheduler and data position from 6d01edb5; 961ca7c3 restores weights and step only)',
    resume_from: 'resume: training.resume_from=<newest complete <run>-step<N>> at the same world size',
  }[p.resume];
  const save = p.finalSave
    ? 'final checkpoint: saved when training ends'
    : 'final checkpoint: none; only every save-interval steps (the last steps are lost unless they are a multiple of it)';
  return [resume, save, `prepare_hidden_states.py: ${p.prepareAuxFlag}`];
}
