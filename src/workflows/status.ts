/**
 * The run's stage board: what the status query returns, what the Web UI shows as the
 * workflow's current details, and what the CLI draws. Pure, so it is shared and tested.
 */
import { STAGES, type RunStatus, type StageName, type StageState, type StageStatus } from '../shared.js';

export class StageBoard {
  private readonly stages: StageStatus[] = STAGES.map((stage) => ({ stage, state: 'pending' as StageState }));
  current?: StageName;
  error?: string;

  constructor(
    readonly runId: string,
    readonly label: string,
  ) {}

  set(stage: StageName, state: StageState, note?: string, now = new Date().toISOString()): void {
    const s = this.stages.find((x) => x.stage === stage)!;
    s.state = state;
    if (note !== undefined) s.note = note;
    if (state === 'running') {
      s.startedAt = now;
      this.current = stage;
    }
    if (state === 'done' || state === 'skipped' || state === 'failed') s.finishedAt = now;
  }

  /** Back to pending from `stage` on, for a retry. */
  reset(stage: StageName): void {
    for (const s of this.stages.slice(this.stages.findIndex((x) => x.stage === stage))) {
      s.state = 'pending';
      delete s.note;
      delete s.startedAt;
      delete s.finishedAt;
    }
  }

  get(stage: StageName): StageStatus {
    return this.stages.find((x) => x.stage === stage)!;
  }

  snapshot(): RunStatus {
    return {
      runId: this.runId,
      label: this.label,
      stages: this.stages.map((s) => ({ ...s })),
      current: this.current,
      error: this.error,
    };
  }
}

const ICON: Record<StageState, string> = {
  pending: '·',
  running: '▶',
  skipped: '↷',
  done: '✓',
  failed: '✗',
  waiting: '…',
};

/** Markdown for the Web UI's "current details". */
export function renderStageMarkdown(status: RunStatus): string {
  const rows = status.stages.map(
    (s) => `| ${ICON[s.state]} ${s.stage} | ${s.state} | ${(s.note ?? '').replace(/\|/g, '\\|')} |`,
  );
  const lines = [
    `**aerie run** \`${status.runId}\` (${status.label})`,
    '',
    '| stage | state | note |',
    '|---|---|---|',
    ...rows,
  ];
  if (status.error) lines.push('', `**failed:** ${status.error.replace(/\n/g, ' ')}`);
  return lines.join('\n');
}

/** Fixed-width rows for the terminal; `phase` overrides the note of the running stage. */
export function renderStageTable(status: RunStatus, phase?: string): string {
  const width = Math.max(...status.stages.map((s) => s.stage.length));
  return status.stages
    .map((s) => {
      const note = s.state === 'running' && phase ? phase : (s.note ?? '');
      return `  ${ICON[s.state]} ${s.stage.padEnd(width)}  ${s.state.padEnd(8)} ${note}`.trimEnd();
    })
    .join('\n');
}
