/**
 * The training hyperparameters the launch tests share (the schema's defaults for a small run),
 * so each test's launch literal names only what it is about: paths, save interval, overrides.
 */
export const TRAIN_HYPER = {
  chatTemplate: 'llama3',
  maxLength: 2048,
  numEpochs: 2,
  batchSize: 1,
  learningRate: 1e-4,
  tttLength: 7,
} as const;
