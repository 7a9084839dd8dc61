/**
 * Which SpecForge a host runs, and what follows from it. SpecForge changed its interface
 * several times in 2026 (scripts → one `specforge` CLI; a working v0.2 `--resume`; a final
 * checkpoint; prepare_hidden_states' aux flag), and researchers pin a revision per cluster, so
 * every driver decision that differs between revisions reads it from here, never from a guess.
 *
 * Profiles, oldest first (dates are the commits' in github:sgl-project/SpecForge):
 *   v0.2.0           73e6f808 (2025-12-23) … before 03a3dedb: scripts; --resume broken; no final save
 *   v0.2-final-save  03a3dedb (2026-01-12) … before 961ca7c3: scripts; --resume broken; final save
 *   v0.2-resume      961ca7c3 (2026-03-16) … 20e2e3f0 (2026-07-13, the last with train_eagle3.py)
 *   cli              a6b6b023 (2026-08-08) = PyPI specforge 0.2.0: `specforge train -c` / `export`
 */
export type SpecforgeProfileId = 'v0.2.0' | 'v0.2-final-save' | 'v0.2-resume' | 'cli';

export interface SpecforgeProfile {
  id: SpecforgeProfileId;
  /** What `aerie plan` / `doctor` print. */
  label: string;
  flavor: 'v0.2-scripts' | 'cli';
  /** v0.2 `--resume` restores optimizer, scheduler and data position (fixed in 961ca7c3). */
  v02ResumeWorks: boolean;
  /** The trainer saves a checkpoint when it finishes, not only every save_interval (03a3dedb). */
  finalSave: boolean;
  /** How prepare_hidden_states.py is told to capture aux states (ca949555 switched to the draft config). */
  prepareAuxFlag: '--enable-aux-hidden-states' | '--draft-model-config';
}

export const SPECFORGE_PROFILES: Record<SpecforgeProfileId, SpecforgeProfile> = {
  'v0.2.0': {
    id: 'v0.2.0',
    label: 'SpecForge v0.2.0 scripts (73e6f808)',
    flavor: 'v0.2-scripts',
    v02ResumeWorks: false,
    finalSave: false,
    prepareAuxFlag: '--enable-aux-hidden-states',
  },
  'v0.2-final-save': {
    id: 'v0.2-final-save',
    label: 'SpecForge v0.2 scripts, 03a3dedb…961ca7c3^',
    flavor: 'v0.2-scripts',
    v02ResumeWorks: false,
    finalSave: true,
    prepareAuxFlag: '--enable-aux-hidden-states',
  },
  'v0.2-resume': {
    id: 'v0.2-resume',
    label: 'SpecForge v0.2 scripts, 961ca7c3…20e2e3f0',
    flavor: 'v0.2-scripts',
    v02ResumeWorks: true,
    finalSave: true,
    prepareAuxFlag: '--enable-aux-hidden-states',
  },
  cli: {
    id: 'cli',
    label: 'SpecForge CLI (a6b6b023 / PyPI specforge 0.2.0)',
    flavor: 'cli',
    v02ResumeWorks: false,
    finalSave: true,
    prepareAuxFlag: '--draft-model-config',
  },
};
