/**
 * The tracebacks vLLM 0.32.0 prints when it fails, shortened to the frames that carry the
 * story, in the shapes of test/fixtures/real/vllm-0.32.0/: eagle-method.log (a ValidationError
 * while the API server builds its config), d2t-full-vocab.log (a worker dies loading weights:
 * the worker's traceback, "EngineCore failed to start.", the API server's RuntimeError) and
 * aux-collapse.log (the engine dies at run time: worker, engine core, output handler).
 */
import type { VllmLog } from './log.js';

const SITE = '/usr/local/lib/python3.11/site-packages';
const V = `${SITE}/vllm`;

/** The two DeprecationWarnings `python -m vllm.entrypoints.openai.api_server` prints at import (vllm==0.32.0:vllm/entrypoints/openai/api_server.py:24,51). */
export const DEPRECATION = [
  `${V}/entrypoints/openai/api_server.py:24: DeprecationWarning: \`vllm.entrypoints.openai.api_server\` is deprecated and will likely beunsupported in a future version. Use the corresponding function from \`vllm.entrypoints.launchers\` instead.`,
  '  warnings.warn(',
  `${V}/entrypoints/openai/api_server.py:51: DeprecationWarning: The \`python -m vllm.entrypoints.openai.api_server\` command is deprecated and may be removed in a future release. Please use \`vllm server\` instead.`,
  '  warnings.warn(',
].join('\n');

/** The interpreter without vLLM (the SGLang simulator's missing-module fault, in vLLM's module). */
export const MISSING_MODULE =
  "/usr/bin/python3: Error while finding module specification for 'vllm.entrypoints.openai.api_server' (ModuleNotFoundError: No module named 'vllm')";

const MAIN_FRAMES = [
  'Traceback (most recent call last):',
  '  File "<frozen runpy>", line 198, in _run_module_as_main',
  '  File "<frozen runpy>", line 88, in _run_code',
  `  File "${V}/entrypoints/openai/api_server.py", line 59, in <module>`,
  '    main()',
  `  File "${V}/entrypoints/launchers/api_server/entry.py", line 232, in main`,
  '    uvloop.run(run_server(args))',
  `  File "${V}/entrypoints/launchers/api_server/entry.py", line 177, in run_server`,
  '    await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)',
  `  File "${V}/entrypoints/launchers/api_server/entry.py", line 195, in run_server_worker`,
  '    async with build_async_engine_client(',
];

/** SpeculativeConfig refused (eagle-method.log): the API server's traceback, exit 1. */
export function validationTraceback(detail: string): string {
  return [
    ...MAIN_FRAMES,
    `  File "${V}/entrypoints/launchers/api_server/entry.py", line 83, in build_async_engine_client_from_engine_args`,
    '    vllm_config = engine_args.create_engine_config(usage_context=usage_context)',
    `  File "${V}/engine/arg_utils.py", line 2594, in create_engine_config`,
    '    speculative_config = self.create_speculative_config(',
    `  File "${V}/engine/arg_utils.py", line 2099, in create_speculative_config`,
    '    return SpeculativeConfig(**self.speculative_config)',
    `  File "${SITE}/pydantic/_internal/_dataclasses.py", line 121, in __init__`,
    '    s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)',
    'pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig',
    detail,
    '    For further information visit https://errors.pydantic.dev/2.14/v/value_error',
  ].join('\n');
}

/** The port taken: create_server_socket's bind (vllm==0.32.0:vllm/entrypoints/launchers/launcher.py:335-349), before any engine. */
export function bindTraceback(host: string, port: number): string {
  return (
    [
      ...MAIN_FRAMES.slice(0, 7),
      `  File "${V}/entrypoints/launchers/api_server/entry.py", line 170, in run_server`,
      '    listen_address, sock = setup_server(args)',
      `  File "${V}/entrypoints/launchers/launcher.py", line 398, in setup_server`,
      '    sock = create_server_socket(sock_addr)',
      `  File "${V}/entrypoints/launchers/launcher.py", line 347, in create_server_socket`,
      '    sock.bind(addr)',
      `OSError: [Errno 98] Address already in use`,
    ].join('\n') + (host ? '' : '')
  );
}

/**
 * A worker that dies while the engine starts (d2t-full-vocab.log): its traceback, the engine
 * core's "EngineCore failed to start.", the engine process's own traceback, then the API server's
 * RuntimeError (vllm==0.32.0:vllm/v1/engine/utils.py:1431-1440). Exit 1.
 */
export function engineStartFailure(log: VllmLog, where: 'weights' | 'drafter', error: string): void {
  const worker = [
    'WorkerProc failed to start.',
    'Traceback (most recent call last):',
    `  File "${V}/v1/executor/multiproc_executor.py", line 920, in worker_main`,
    '    worker = WorkerProc(*args, **kwargs)',
    `  File "${V}/v1/executor/multiproc_executor.py", line 687, in __init__`,
    '    self.worker.load_model()',
    `  File "${V}/v1/worker/gpu_worker.py", line 594, in load_model`,
    '    self.model_runner.load_model(load_dummy_weights=load_dummy_weights)',
    ...(where === 'drafter'
      ? [
          `  File "${V}/v1/worker/gpu_model_runner.py", line 5072, in load_model`,
          '    self.drafter.load_model(self.model)',
          `  File "${V}/v1/spec_decode/llm_base_proposer.py", line 1327, in load_model`,
          '    self.model = self._get_model()',
          `  File "${V}/model_executor/model_loader/default_loader.py", line 498, in load_weights`,
          '    loaded_weights = model.load_weights(self.get_all_weights(model_config, model))',
          `  File "${V}/model_executor/models/llama_eagle3.py", line 467, in load_weights`,
          '    loader.load_weights(',
          `  File "${V}/model_executor/models/utils.py", line 448, in _load_module`,
          '    raise ValueError(msg)',
        ]
      : [
          `  File "${V}/model_executor/model_loader/default_loader.py", line 498, in load_weights`,
          '    loaded_weights = model.load_weights(self.get_all_weights(model_config, model))',
          `  File "${V}/model_executor/model_loader/weight_utils.py", line 742, in safetensors_weights_iterator`,
          '    with safe_open(st_file, framework="pt") as f:',
        ]),
    error,
  ].join('\n');
  log.error('Worker', 'multiproc_executor.py:953', worker);
  log.info('EngineCore', 'multiproc_executor.py:479', '[shutdown] Executor: waiting for worker exit count=1');
  log.info('EngineCore', 'multiproc_executor.py:486', '[shutdown] Executor: all workers exited gracefully');
  const core = [
    'EngineCore failed to start.',
    'Traceback (most recent call last):',
    `  File "${V}/v1/engine/core.py", line 1482, in run_engine_core`,
    '    engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)',
    `  File "${V}/v1/executor/multiproc_executor.py", line 215, in _init_executor`,
    '    self.workers = WorkerProc.wait_for_ready(unready_workers)',
    `  File "${V}/v1/executor/multiproc_executor.py", line 815, in wait_for_ready`,
    '    raise e from None',
    'Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.',
  ].join('\n');
  log.error('EngineCore', 'core.py:1510', core);
  log.raw(
    [
      'Process EngineCore:',
      'Traceback (most recent call last):',
      `  File "${V}/v1/engine/core.py", line 1514, in run_engine_core`,
      '    raise e',
      'Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.',
      ...MAIN_FRAMES,
      `  File "${V}/v1/engine/core_client.py", line 682, in __init__`,
      '    with launch_core_engines(',
      `  File "${V}/v1/engine/utils.py", line 1351, in launch_core_engines`,
      '    wait_for_engine_startup(',
      `  File "${V}/v1/engine/utils.py", line 1431, in wait_for_engine_startup`,
      '    raise RuntimeError(',
      "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore': 1}",
    ].join('\n'),
  );
}

/**
 * The engine dying at run time (aux-collapse.log): the worker's exception, the engine core's
 * input dump and fatal error (vllm==0.32.0:vllm/v1/engine/core.py:1511-1513), the output handler's
 * EngineDeadError (v1/engine/async_llm.py:905-907, v1/engine/exceptions.py:12-18).
 */
export function engineDeath(log: VllmLog, error: string, model: string, promptTokens: number): void {
  const frames = [
    'Traceback (most recent call last):',
    `  File "${V}/v1/executor/multiproc_executor.py", line 1058, in worker_busy_loop`,
    '    output = func(*args, **kwargs)',
    `  File "${V}/v1/worker/gpu_model_runner.py", line 4410, in sample_tokens`,
    '    propose_draft_token_ids(sampled_token_ids)',
    `  File "${V}/v1/spec_decode/llm_base_proposer.py", line 402, in propose`,
    '    target_hidden_states = self.model.combine_hidden_states(',
    `  File "${V}/model_executor/models/llama_eagle3.py", line 506, in combine_hidden_states`,
    '    return self.model.fc(hidden_states)',
    error,
  ];
  log.error('Worker', 'multiproc_executor.py:1063', ['WorkerProc hit an exception.', ...frames, ''].join('\n'));
  log.error(
    'EngineCore',
    'dump_input.py:72',
    `Dumping input data for V1 LLM engine (v0.32.0) with config: model='${model}', speculative_config=..., `,
  );
  log.error(
    'EngineCore',
    'dump_input.py:79',
    `Dumping scheduler output for model execution: SchedulerOutput(scheduled_new_reqs=[NewRequestData(req_id=cmpl-0,prompt_token_ids_len=${promptTokens},...)], ...)`,
  );
  log.error(
    'EngineCore',
    'dump_input.py:81',
    'Dumping scheduler stats: SchedulerStats(num_running_reqs=1, num_waiting_reqs=0, ...)',
  );
  const inner = error.replace(/^RuntimeError: /, '');
  log.error(
    'EngineCore',
    'core.py:1512',
    [
      'EngineCore encountered a fatal error.',
      'Traceback (most recent call last):',
      `  File "${V}/v1/engine/core.py", line 1496, in run_engine_core`,
      '    engine_core.run_busy_loop()',
      `  File "${V}/v1/engine/core.py", line 676, in step`,
      '    model_output = self.model_executor.sample_tokens(grammar_output)',
      `  File "${V}/v1/executor/multiproc_executor.py", line 444, in get_response`,
      '    raise RuntimeError(',
      `RuntimeError: Worker failed with error '${inner}', please check the stack trace above for the root cause`,
    ].join('\n'),
  );
  log.info('EngineCore', 'multiproc_executor.py:479', '[shutdown] Executor: waiting for worker exit count=1');
  log.error(
    'APIServer',
    'async_llm.py:906',
    [
      'AsyncLLM output_handler failed.',
      'Traceback (most recent call last):',
      `  File "${V}/v1/engine/async_llm.py", line 849, in output_handler`,
      '    outputs = await engine_core.get_output_async()',
      `  File "${V}/v1/engine/core_client.py", line 1235, in get_output_async`,
      '    raise self._format_exception(outputs) from None',
      'vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.',
    ].join('\n'),
  );
}

/** The body every request gets once the engine is dead (vllm==0.32.0:vllm/entrypoints/serve/exception_handling/handlers/vllm_error.py:18-66). */
export const ENGINE_DEAD_BODY = {
  error: {
    message: 'EngineCore encountered an issue. See stack trace (above) for the root cause.',
    type: 'InternalServerError',
    param: null,
    code: 500,
  },
};
