/**
 * Every failure type aerie raises, what happens after it, and what a researcher does about it.
 * Activities raise them as ApplicationFailure types (`fatal` / `transient` in
 * src/activities/context.ts take only these names); lower layers name them on JobFailure and
 * in their classifiers (sglang/readiness.ts, stages/train/run.ts). An error an activity lets
 * escape unmapped (an SSH drop, an exec timeout) reaches Temporal with its class name as the
 * type and is retried like `retry: 'temporal'`, because no policy lists it.
 *
 * Imports nothing: the workflow bundles it (WORKFLOW_VALUE_IMPORTS in eslint.config.mjs).
 */

export interface FailureKind {
  /** 'temporal': raised retryable, Temporal retries the activity per its policy; 'never': the first one fails the stage (or the launch). */
  retry: 'temporal' | 'never';
  /** The workflow stops the server group and launches the same command again (Servers.start, three launches in all). */
  relaunch: boolean;
  /**
   * Only a person can fix the cause: with run.on-failure: wait the run waits for `aerie retry`
   * at once. False where retries or relaunches come first; when they are spent the run waits too.
   */
  operator: boolean;
  /**
   * Named in the activities' nonRetryableErrorTypes (NON_RETRYABLE): not retried even when raised
   * retryable, e.g. the ConfigError class escaping an activity. The other 'never' types are
   * raised non-retryable, which is the same thing; the list stays as it was because every
   * scheduled activity's retry policy in a run's history carries it.
   */
  inRetryPolicy?: true;
  /** Raised by no activity: why it is declared. */
  notRaised?: string;
  /** What to do, in a researcher's words. */
  fix: string;
}

/**
 * The first ten entries, in this order, are NON_RETRYABLE: do not reorder or rename them
 * (recorded histories replay against these names and this order).
 */
export const FAILURES = {
  ConfigError: {
    retry: 'never',
    relaunch: false,
    operator: true,
    inRetryPolicy: true,
    fix: 'change the config field the message names (or set what it says is missing on the worker), then aerie retry',
  },
  PreflightFailed: {
    retry: 'never',
    relaunch: false,
    operator: true,
    inRetryPolicy: true,
    fix: 'fix each problem preflight lists (aerie doctor shows them without starting a run), then aerie retry',
  },
  MissingDependencyError: {
    retry: 'never',
    relaunch: false,
    operator: true,
    inRetryPolicy: true,
    fix: 'install the missing module or point the launcher / stages.*.python at an interpreter that has it',
  },
  PortInUseError: {
    retry: 'never',
    relaunch: false,
    operator: true,
    inRetryPolicy: true,
    fix: 'stop the process holding the port (aerie never stops what it did not start) or set server.port',
  },
  DrafterRejectedError: {
    retry: 'never',
    relaunch: false,
    operator: true,
    inRetryPolicy: true,
    fix: 'train longer or on more data, or lower stages.deploy.acceptance-threshold; the message says which check refused the drafter',
  },
  OutOfMemoryError: {
    retry: 'never',
    relaunch: false,
    operator: true,
    inRetryPolicy: true,
    fix: 'ask for less memory (server.mem-fraction-static, stages.extract.batch-size, stages.train.max-length) or give the job more GPUs',
  },
  DataIncomplete: {
    retry: 'never',
    relaunch: false,
    operator: true,
    inRetryPolicy: true,
    notRaised:
      'kept in NON_RETRYABLE only: recorded retry policies carry it; the workflow decision tests raise it from a stub',
    fix: 'raise stages.generate.max-tokens or the sample count until the data the message counts comes back',
  },
  ServerNotReady: {
    retry: 'never',
    relaunch: false,
    operator: true,
    inRetryPolicy: true,
    fix: 'read the server log the message names; raise server.readiness.budget if it was only slow',
  },
  ServerMismatch: {
    retry: 'never',
    relaunch: false,
    operator: true,
    inRetryPolicy: true,
    fix: 'another server answers on the port: stop it or set server.port',
  },
  ServerStartFailed: {
    retry: 'never',
    relaunch: false,
    operator: true,
    inRetryPolicy: true,
    fix: 'read the log tail in the failure details: the server refused its command line or model',
  },

  ServerCrashed: {
    retry: 'never',
    relaunch: true,
    operator: false,
    fix: 'none at first: aerie relaunches it; after three launches read the log tail in the details',
  },
  SmokeTestFailed: {
    retry: 'never',
    relaunch: true,
    operator: false,
    fix: 'none at first: aerie relaunches it; after three launches check the model and the server log',
  },
  InsufficientSpace: {
    retry: 'never',
    relaunch: false,
    operator: true,
    fix: 'free the space the message names or point the output at a larger disk',
  },
  DiskFull: {
    retry: 'temporal',
    relaunch: false,
    operator: false,
    fix: 'free space on the disk the message names within about 8 minutes; the stage resumes from its saved shards',
  },
  ExtractSelfCheckFailed: {
    retry: 'never',
    relaunch: false,
    operator: true,
    fix: 'the captured hidden states disagree with the target model: check stages.extract (model, aux layers) against the server',
  },
  ExtractFirstSamplesFailed: {
    retry: 'never',
    relaunch: false,
    operator: true,
    fix: 'the first samples failed on the extraction server: read the errors the message quotes',
  },
  TokensDisagree: {
    retry: 'never',
    relaunch: false,
    operator: true,
    fix: 'the host and the server tokenize differently: use the same tokenizer and chat template for both',
  },
  AeriePyFailed: {
    retry: 'never',
    relaunch: false,
    operator: true,
    fix: "aerie's own Python on the host failed: check stages.extract.python and the message's output",
  },
  ExtractFailed: {
    retry: 'never',
    relaunch: false,
    operator: true,
    fix: 'prepare_hidden_states.py failed in a way a rerun will not fix: read the log tail in the details',
  },
  ExtractCrashed: {
    retry: 'never',
    relaunch: false,
    operator: true,
    fix: 'the extraction crashed crash-retries times: read the log tail, then aerie retry',
  },
  ExtractFilesBad: {
    retry: 'never',
    relaunch: false,
    operator: true,
    fix: 'prepare_hidden_states.py keeps writing bad files: check the disk and the message file',
  },
  ExtractFilesMissing: {
    retry: 'never',
    relaunch: false,
    operator: true,
    fix: 'give each data-parallel rank at least --batch-size rows, or lower stages.extract.batch-size',
  },
  ExtractVerifyFailed: {
    retry: 'never',
    relaunch: false,
    operator: true,
    fix: 'the hidden-state check could not run on the host: check stages.extract.python',
  },
  TrainerFailed: {
    retry: 'never',
    relaunch: false,
    operator: true,
    fix: 'the trainer failed in a way a rerun will not fix: read the log tail in the details',
  },
  TrainerCrashed: {
    retry: 'never',
    relaunch: false,
    operator: true,
    fix: 'the trainer crashed crash-retries times: read the log tail, then aerie retry',
  },
  TrainerOutputMissing: {
    retry: 'never',
    relaunch: false,
    operator: true,
    fix: 'the trainer exited 0 without the checkpoints it owed: read its log, then aerie retry --stage train',
  },
  ExportFailed: {
    retry: 'never',
    relaunch: false,
    operator: true,
    fix: 'specforge export failed: read the log tail in the details',
  },

  // The workflow's own: it ends the run with this (src/workflows/pipeline.ts), the activity's failure as its cause.
  StageFailed: {
    retry: 'never',
    relaunch: false,
    operator: false,
    fix: "the cause's fix: the message quotes the activity's failure",
  },
} as const satisfies Record<string, FailureKind>;

export type FailureType = keyof typeof FAILURES;

type Where<P extends Partial<FailureKind>> = {
  [T in FailureType]: (typeof FAILURES)[T] extends P ? T : never;
}[FailureType];

/** Raised non-retryable (`fatal`). */
export type FatalType = Where<{ retry: 'never' }>;
/** Raised retryable (`transient`). */
export type TransientType = Where<{ retry: 'temporal' }>;

const types = Object.keys(FAILURES) as FailureType[];

/** The activities' nonRetryableErrorTypes (src/workflows/activities.ts). */
export const NON_RETRYABLE: string[] = types.filter((t) => (FAILURES[t] as FailureKind).inRetryPolicy);

/** Failure types of a dead or broken server that a fresh launch of the same command may fix. */
export const SERVER_RELAUNCHABLE: readonly FailureType[] = types.filter((t) => FAILURES[t].relaunch);
