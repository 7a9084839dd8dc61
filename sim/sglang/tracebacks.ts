/**
 * Python-shaped failure text: what SGLang and its dependencies print when they die.
 * aerie classifies failures from these lines, so the wording follows the real messages.
 */

const SITE = '/usr/local/lib/python3.12/dist-packages';

/** An error that ends the process with a Python traceback on stderr. */
export class PyError extends Error {
  constructor(
    readonly traceback: string,
    readonly exitCode = 1,
  ) {
    super(traceback.trim().split('\n').pop() ?? 'error');
  }
}

function frames(list: Array<[string, number, string, string]>): string {
  return list.map(([file, line, fn, code]) => `  File "${file}", line ${line}, in ${fn}\n    ${code}`).join('\n');
}

const LAUNCH_FRAMES: Array<[string, number, string, string]> = [
  [`${SITE}/sglang/launch_server.py`, 24, '<module>', 'server_args = prepare_server_args(sys.argv[1:])'],
  [`${SITE}/sglang/srt/server_args.py`, 3962, 'prepare_server_args', 'return ServerArgs.from_cli_args(raw_args)'],
  [
    `${SITE}/sglang/srt/server_args.py`,
    3531,
    'from_cli_args',
    'return cls(**{attr: getattr(args, attr) for attr in attrs})',
  ],
  ['<string>', 321, '__init__', ''],
  [`${SITE}/sglang/srt/server_args.py`, 612, '__post_init__', 'self._handle_gpu_memory_settings(gpu_mem)'],
];

/** An exception raised while the launcher builds ServerArgs (before any log line). */
export function launchTraceback(lastFrames: Array<[string, number, string, string]>, error: string): string {
  return [
    'Traceback (most recent call last):',
    '  File "<frozen runpy>", line 198, in _run_module_as_main',
    '  File "<frozen runpy>", line 88, in _run_code',
    frames([...LAUNCH_FRAMES.slice(0, 3), ...lastFrames]),
    error,
  ].join('\n');
}

export function configNotFound(path: string): string {
  return launchTraceback(
    [
      [`${SITE}/sglang/srt/server_args.py`, 3489, 'get_hf_config', 'hf_config = get_config('],
      [`${SITE}/transformers/configuration_utils.py`, 721, '_get_config_dict', 'raise OSError('],
    ],
    `OSError: Can't load the configuration of '${path}'. If you were trying to load it from ` +
      `'https://huggingface.co/models', make sure you don't have a local directory with the same name. ` +
      `Otherwise, make sure '${path}' is the correct path to a directory containing a config.json file`,
  );
}

export function configUnreadable(path: string, detail: string): string {
  return launchTraceback(
    [
      [`${SITE}/sglang/srt/server_args.py`, 3489, 'get_hf_config', 'hf_config = get_config('],
      [
        `${SITE}/transformers/configuration_utils.py`,
        745,
        '_get_config_dict',
        'config_dict = cls._dict_from_json_file(resolved_config_file)',
      ],
    ],
    `OSError: It looks like the config file at '${path}/config.json' is not a valid JSON file: ${detail}`,
  );
}

export function configMissingKey(path: string, key: string, arch: string): string {
  return launchTraceback(
    [[`${SITE}/sglang/srt/configs/model_config.py`, 210, '__init__', `self.${key} = self.hf_text_config.${key}`]],
    `AttributeError: '${arch.replace(/ForCausalLM.*$/, '')}Config' object has no attribute '${key}' (from ${path}/config.json)`,
  );
}

/** A ValueError from the 0.5.23 argument resolution (arg_groups/validation_hook.py). */
export function auxCaptureError(message: string): string {
  return launchTraceback(
    [[`${SITE}/sglang/srt/arg_groups/validation_hook.py`, 715, 'handle_aux_hidden_state_capture', 'raise ValueError(']],
    `ValueError: ${message}`,
  );
}

export function specParamsAssertion(): string {
  return launchTraceback(
    [[`${SITE}/sglang/srt/server_args.py`, 1820, '_handle_speculative_decoding', 'assert (']],
    'AssertionError',
  );
}

/** The scheduler subprocess dying: its traceback, then the launcher noticing. */
export function schedulerException(
  stamp: string,
  inner: Array<[string, number, string, string]>,
  error: string,
  entry = 'scheduler = Scheduler(',
): string {
  return [
    `${stamp} Scheduler hit an exception: Traceback (most recent call last):`,
    frames([[`${SITE}/sglang/srt/managers/scheduler.py`, 2931, 'run_scheduler_process', entry], ...inner]),
    error,
    '',
  ].join('\n');
}

export function draftConfigFrames(): Array<[string, number, string, string]> {
  return [
    [`${SITE}/sglang/srt/managers/scheduler.py`, 402, '__init__', 'self.draft_worker = DraftWorkerClass('],
    [`${SITE}/sglang/srt/speculative/eagle_worker.py`, 104, '__init__', 'super().__init__('],
    [`${SITE}/sglang/srt/managers/tp_worker.py`, 96, '__init__', 'self.model_config = ModelConfig.from_server_args('],
    [`${SITE}/transformers/configuration_utils.py`, 721, '_get_config_dict', 'raise OSError('],
  ];
}

export function draftNotFound(path: string | null): string {
  const shown = path ?? 'None';
  return (
    `OSError: Can't load the configuration of '${shown}'. If you were trying to load it from ` +
    `'https://huggingface.co/models', make sure you don't have a local directory with the same name. ` +
    `Otherwise, make sure '${shown}' is the correct path to a directory containing a config.json file`
  );
}

export function loadFrames(): Array<[string, number, string, string]> {
  return [
    [`${SITE}/sglang/srt/managers/scheduler.py`, 351, '__init__', 'self.tp_worker = TpWorkerClass('],
    [`${SITE}/sglang/srt/managers/tp_worker.py`, 125, '__init__', 'self.model_runner = ModelRunner('],
    [`${SITE}/sglang/srt/model_executor/model_runner.py`, 318, '__init__', 'self.initialize(min_per_gpu_memory)'],
    [`${SITE}/sglang/srt/model_executor/model_runner.py`, 402, 'initialize', 'self.load_model()'],
    [`${SITE}/sglang/srt/model_executor/model_runner.py`, 817, 'load_model', 'self.model = get_model('],
    [`${SITE}/sglang/srt/model_loader/loader.py`, 642, 'load_weights_and_postprocess', 'model.load_weights(weights)'],
  ];
}

export function oomError(tp: number): string {
  return (
    `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU ${tp} has a total capacity of ` +
    '79.10 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.07 GiB memory in use. ' +
    'Of the allocated memory 76.50 GiB is allocated by PyTorch, and 712.00 MiB is reserved by PyTorch but unallocated. ' +
    'If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid ' +
    'fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)'
  );
}

export function loadAbortError(): string {
  return 'safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer';
}

export function firstDecodeFrames(): Array<[string, number, string, string]> {
  return [
    [`${SITE}/sglang/srt/managers/scheduler.py`, 1104, 'event_loop_overlap', 'batch_result = self.run_batch(batch)'],
    [
      `${SITE}/sglang/srt/managers/scheduler.py`,
      2213,
      'run_batch',
      'batch_result = self.model_worker.forward_batch_generation(',
    ],
    [
      `${SITE}/sglang/srt/speculative/eagle_worker_v2.py`,
      611,
      'forward_batch_generation',
      'if batch.batch_size() > self.spec_disable_batch_threshold:',
    ],
  ];
}

export const FIRST_DECODE_ERROR =
  "AttributeError: 'EAGLEWorkerV2' object has no attribute 'spec_disable_batch_threshold'";

export const MISSING_MODULE =
  "/usr/bin/python3: Error while finding module specification for 'sglang.launch_server' (ModuleNotFoundError: No module named 'sglang')";

export function bindError(host: string, port: number): string {
  return `ERROR:    [Errno 98] error while attempting to bind on address ('${host}', ${port}): address already in use`;
}
