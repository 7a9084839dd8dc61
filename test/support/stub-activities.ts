/**
 * Stand-ins for aerie's activities (src/activities/), with the same names and shapes, for
 * running the real pipeline workflow in seconds: each call is recorded, answers at once
 * with a plausible result, and a test scripts the calls it cares about (a server that dies,
 * a trainer that fails, an activity that runs until cancelled). The ledger is a map here:
 * a stage's record is valid when its inputs hash (stage plus upstream hashes) matches.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Activities } from '../../src/activities/index.js';
import type { LeaseActivities } from '../../src/activities/leases.js';
import type { ServerLaunch } from '../../src/activities/server.js';
import type { StageName } from '../../src/shared.js';

export type ActivityName = keyof Activities;
type Input<K extends ActivityName> = Parameters<Activities[K]>[0];
type Output<K extends ActivityName> = Awaited<ReturnType<Activities[K]>>;
type LedgerRecord = NonNullable<Output<'checkLedger'>['record']>;

export interface StubCall<K extends ActivityName = ActivityName> {
  name: K;
  input: Input<K>;
  /** Temporal's attempt number: above 1 when Temporal, not the workflow, retried it. */
  attempt: number;
}

/** A scripted answer: nth counts this activity's calls from 1 (retries included). */
export type Script = { [K in ActivityName]?: (input: Input<K>, nth: number) => Promise<Output<K>> | Output<K> };

/** A failure as aerie's activities raise them: typed, and non-retryable so the workflow decides. */
export function failure(type: string, message: string): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: true });
}

/** Heartbeats until the workflow cancels the activity, then fails as a cancelled activity does. */
export async function untilCancelled(started?: () => void): Promise<never> {
  const ctx = Context.current();
  const beat = setInterval(() => ctx.heartbeat(), 50);
  started?.();
  try {
    return await ctx.cancelled;
  } finally {
    clearInterval(beat);
  }
}

export class StubActivities {
  readonly calls: StubCall[] = [];
  /** The calls that returned (did not throw), in the order they returned. */
  readonly succeeded: StubCall[] = [];
  /** Ledger records by stage, as writeLedger left them; tests may seed or drop them. */
  readonly ledger = new Map<StageName, LedgerRecord>();
  private readonly counts = new Map<ActivityName, number>();
  private readonly launches = new Map<string, number>();
  /** Launch ids in launch order. */
  readonly launched: string[] = [];
  private nextPid = 1000;
  /** GPU-lease calls (acquire, hold, release), apart from trace() so the stage traces read as before. */
  readonly leaseCalls: { name: keyof LeaseActivities; attempt: number }[] = [];
  /** The lease activities the pipeline gets: stubs that grant at once, unless a test sets the real ones. */
  leases: LeaseActivities = STUB_LEASES;

  constructor(private script: Script = {}) {}

  /** Replaces one activity's answer from now on. */
  on<K extends ActivityName>(name: K, fn: NonNullable<Script[K]>): this {
    this.script = { ...this.script, [name]: fn };
    return this;
  }

  /** The calls as short lines: the activity, and the input that tells one decision from another. */
  trace(): string[] {
    return this.calls.map(describe);
  }

  /** Every server launched and not (yet) stopped, by launch id. */
  liveServers(): string[] {
    const stopped = new Set(
      this.calls.filter((c) => c.name === 'stopServer').map((c) => (c.input as Input<'stopServer'>).launch.launchId),
    );
    return this.launched.filter((id) => !stopped.has(id));
  }

  activities(): Activities {
    const all = {} as Record<ActivityName, (input: never) => Promise<unknown>>;
    for (const name of Object.keys(DEFAULTS) as ActivityName[]) {
      all[name] = async (input: never) => {
        const nth = (this.counts.get(name) ?? 0) + 1;
        this.counts.set(name, nth);
        const call = { name, input, attempt: Context.current().info.attempt };
        this.calls.push(call);
        const scripted = this.script[name] as ((i: never, n: number) => unknown) | undefined;
        const out = await (scripted
          ? scripted(input, nth)
          : (DEFAULTS[name] as (s: StubActivities, i: never) => unknown)(this, input));
        if (name === 'launchServer') this.launched.push((out as ServerLaunch).launchId);
        this.succeeded.push(call);
        return out;
      };
    }
    const leases = {} as Record<keyof LeaseActivities, (input: never) => Promise<unknown>>;
    for (const name of Object.keys(STUB_LEASES) as (keyof LeaseActivities)[]) {
      leases[name] = (input: never) => {
        this.leaseCalls.push({ name, attempt: Context.current().info.attempt });
        return (this.leases[name] as (i: never) => Promise<unknown>)(input);
      };
    }
    return { ...all, ...leases } as unknown as Activities;
  }

  /** A ServerLaunch like launchServer's: launch ids `<run>.server-<role>.<n>` count launches per role. */
  launch(input: Input<'launchServer'>): ServerLaunch {
    const key = `${input.runId}.server-${input.role}${input.slot ? `-${input.slot}` : ''}`;
    const n = this.launches.get(key) ?? 0;
    this.launches.set(key, n + 1);
    const launchId = `${key}.${n}`;
    const pid = this.nextPid++;
    const argv = [
      'sglang',
      '--model-path',
      input.config.target['model-path'],
      '--port',
      String(input.config.server.port),
    ];
    return {
      role: input.role,
      launchId,
      host: input.config.target.host,
      port: input.config.server.port,
      pid,
      pgid: pid,
      logPath: `/stub/logs/${launchId}.log`,
      argv,
      modelPath: input.config.target['model-path'],
      tpSize: input.config.server['tp-size'],
      ...(input.drafterDir ? { speculative: { algorithm: 'EAGLE3', draftModelPath: input.drafterDir } } : {}),
      ...(input.sglang ? { sglangVersion: input.sglang.version, sglangVersionHow: input.sglang.how } : {}),
      reattached: false,
      notes: [],
      watchMs: 250,
      record: {
        launchId,
        pid,
        pgid: pid,
        startTime: '1',
        argvHash: 'stub',
        argv,
        logPath: `/stub/logs/${launchId}.log`,
        exitPath: `/stub/logs/${launchId}.exit`,
        startedAt: STUB_TIME,
        host: input.config.target.host,
      } as ServerLaunch['record'],
    };
  }
}

/** A server's calls in trace() from ready to stop when all goes well, with its stage's activities between. */
export function serve(launchId: string, ...use: string[]): string[] {
  return [
    `awaitServerReady ${launchId}`,
    `smokeTest ${launchId}`,
    ...use.map((u) => `${u} ${launchId}`),
    `stopServer ${launchId}`,
  ];
}

const STUB_TIME = '2026-01-01T00:00:00.000Z';

/** The stub ledger's inputs hash: the stage over its upstream hashes, so a test can read the chain. */
export function stubHash(stage: StageName, upstream: string[]): string {
  return upstream.length ? `${stage}<${upstream.join(',')}` : stage;
}

const DEFAULTS: { [K in ActivityName]: (s: StubActivities, input: Input<K>) => Output<K> } = {
  preflight: () => ({
    note: 'stub host reachable',
    checks: [],
    specforge: 'cli',
    sglang: { version: '0.5.23', how: 'stub' },
  }),
  checkLedger: (s, { stage, upstream }) => {
    const hash = stubHash(stage, upstream);
    const record = s.ledger.get(stage);
    if (record && record.inputsHash === hash) return { valid: true, inputsHash: hash, reason: 'already done', record };
    return { valid: false, inputsHash: hash, reason: record ? 'inputs changed' : 'no ledger record' };
  },
  writeLedger: (s, i) => {
    const record: LedgerRecord = {
      stage: i.stage,
      inputsHash: i.inputsHash,
      outputs: i.outputs.map((path) => ({ path, bytes: 1 })),
      result: i.result,
      note: i.note,
      finishedAt: STUB_TIME,
      runId: i.runId,
    };
    s.ledger.set(i.stage, record);
    return record;
  },
  launchServer: (s, i) => s.launch(i),
  awaitServerReady: () => ({
    elapsedMs: 1,
    phase: 'ready',
    warnings: [],
    notes: ['ready (stub)'],
    startupRecord: '/stub/startup.json',
  }),
  smokeTest: () => ({ text: 'hello', completionTokens: 1, elapsedMs: 1 }),
  stopServer: () => ({ signals: ['TERM'], groupEmpty: true, gpuReleased: true, foreignGpuProcesses: 0 }),
  stopRunLeftovers: () => ({ stopped: [] }),
  generateData: () => ({
    dataPath: '/stub/data/train.jsonl',
    counts: { samples: 4 },
    outputs: ['/stub/data/train.jsonl'],
    note: '4 samples',
  }),
  // A pool of four batches, each of one sample, unless a test scripts the plan.
  planGeneratePool: () => ({ total: 4, batches: 4, batchSize: 1, samples: 4, planned: 0, resumed: 0 }),
  generatePoolBatch: (_s, i) => ({ index: i.index, samples: 1, counts: { ok: 1, error: 0, skipped: 0 }, resumed: 0 }),
  combineGeneratePool: () => ({
    dataPath: '/stub/data/train.jsonl',
    counts: { samples: 4 },
    outputs: ['/stub/data/train.jsonl'],
    note: '4 samples',
  }),
  planExtractPool: () => ({ samples: 4, batches: 4, batchSize: 1 }),
  combineExtractPool: () => ({
    hidden: { dir: '/stub/hidden', layout: 'specforge' },
    count: 4,
    bytes: 1,
    outputs: ['/stub/hidden'],
    note: '4 samples (pool)',
  }),
  checkExtractSpace: () => ({ neededBytes: 1, freeBytes: 1000, note: '1 B of 1000 B free' }),
  extractHiddenStates: (_s, i) => ({
    hidden: { dir: '/stub/hidden', layout: 'specforge' },
    count: 4,
    bytes: 1,
    outputs: ['/stub/hidden'],
    note: `4 samples${i.pass ? ` (${i.pass} pass)` : ''}`,
  }),
  extractOffline: () => ({
    hidden: { dir: '/stub/hidden', layout: 'specforge' },
    count: 4,
    bytes: 1,
    outputs: ['/stub/hidden'],
    note: '4 samples (offline)',
  }),
  extractTransformers: () => ({
    hidden: { dir: '/stub/hidden', layout: 'specforge' },
    count: 4,
    bytes: 1,
    outputs: ['/stub/hidden'],
    note: '4 samples (transformers)',
  }),
  trainDrafter: () => ({
    drafterDir: '/stub/drafter',
    launches: 1,
    argv: ['train'],
    outputs: ['/stub/drafter'],
    note: 'trained 2 epochs',
  }),
  acceptanceGate: () => ({
    acceptLength: 2.5,
    perRequest: [2.5],
    notes: [],
    warnings: [],
    gate: {
      acceptLength: 2.5,
      perRequest: [2.5],
      prompts: { kind: 'fixed', source: 'stub' },
      floor: 1.3,
      floorFrom: 'stub',
    },
  }),
  benchmarkSweep: () => ({ records: [], notes: [] }),
  storedSweep: (s, i) => ({
    records: [],
    missing: s.succeeded.some(
      (c) => c.name === 'benchmarkSweep' && (c.input as Input<'benchmarkSweep'>).variant === i.variant,
    )
      ? []
      : i.config.stages.benchmark.concurrencies,
  }),
  writeReport: () => ({
    markdown: '# report',
    table: '| level | speedup |',
    paths: ['/stub/bench/report.md'],
    host: 'local',
    dir: '/stub/bench',
  }),
};

/** Leases granted at once and renewed until the run cancels them: a run alone on its host. */
const STUB_LEASES: LeaseActivities = {
  acquireGpuLease: ({ config }) =>
    Promise.resolve({
      host: config.target.host,
      gpus: ['0'],
      ttlMs: 120_000,
      waitedMs: 0,
      note: `holding ${config.target.host} GPUs 0 (stub)`,
    }),
  holdGpuLease: () => untilCancelled(),
  releaseGpuLease: () => Promise.resolve(),
};

function describe(c: StubCall): string {
  const i = c.input as unknown as Record<string, unknown> & { launch?: ServerLaunch };
  const on = i.launch ? ` ${i.launch.launchId}` : '';
  switch (c.name) {
    case 'checkLedger':
    case 'writeLedger':
      return `${c.name} ${i.stage as string}`;
    case 'launchServer':
      return `launchServer ${i.role as string}${i.extractPass ? `/${i.extractPass as string}` : ''}`;
    case 'benchmarkSweep':
      return `benchmarkSweep ${i.variant as string}${on}`;
    case 'storedSweep':
      return `storedSweep ${i.variant as string}`;
    case 'generatePoolBatch':
      return `generatePoolBatch ${String(i.index)}${on}`;
    case 'extractHiddenStates':
      return `extractHiddenStates${i.pass ? `/${i.pass as string}` : ''}${i.batch !== undefined ? ` batch ${String(i.batch)}` : ''}${on}`;
    default:
      return `${c.name}${on}`;
  }
}
