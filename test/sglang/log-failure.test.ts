import { describe, expect, it } from 'vitest';
import { classifyServerFailure, exceptionLine, logLines } from '../../src/sglang/log-phase.js';

const lines = (...l: string[]) => l.join('\n') + '\n';

describe('classifyServerFailure: missing module (incident 1)', () => {
  it('names the interpreter from "No module named sglang.launch_server"', () => {
    const f = classifyServerFailure(lines('/usr/bin/python3: No module named sglang.launch_server'));
    expect(f).toMatchObject({ kind: 'missing-module', retryable: false, interpreter: '/usr/bin/python3' });
    expect(f.message).toMatch(/^\/usr\/bin\/python3 has no module sglang\.launch_server/);
    expect(f.message).toMatch(/server\.launcher/);
  });

  it('names the interpreter and the missing package from a module-specification error', () => {
    const f = classifyServerFailure(
      lines(
        "/usr/bin/python3: Error while finding module specification for 'sglang.launch_server' (ModuleNotFoundError: No module named 'sglang')",
      ),
    );
    expect(f).toMatchObject({ kind: 'missing-module', retryable: false, interpreter: '/usr/bin/python3' });
    expect(f.message).toContain("cannot run sglang.launch_server (No module named 'sglang')");
  });

  it('reports a dependency missing inside a traceback, without an interpreter', () => {
    const f = classifyServerFailure(
      lines(
        'Traceback (most recent call last):',
        '  File "<frozen runpy>", line 198, in _run_module_as_main',
        '  File "/opt/sglang/.venv/lib/python3.11/site-packages/sglang/launch_server.py", line 7, in <module>',
        '    from sglang.srt.entrypoints.http_server import launch_server',
        '  File "/opt/sglang/.venv/lib/python3.11/site-packages/sglang/srt/layers/activation.py", line 44, in <module>',
        '    from sgl_kernel import gelu_and_mul, gelu_tanh_and_mul, silu_and_mul',
        "ModuleNotFoundError: No module named 'sgl_kernel'",
      ),
    );
    expect(f).toMatchObject({ kind: 'missing-module', retryable: false });
    expect(f.interpreter).toBeUndefined();
    expect(f.message).toContain("ModuleNotFoundError: No module named 'sgl_kernel'");
  });

  it('does not mistake SGLang skipping an optional model file for a missing module', () => {
    const f = classifyServerFailure(
      lines(
        "[2025-07-01 10:00:12 TP0] Ignore import error when loading sglang.srt.models.mindspore: No module named 'mindspore'",
        "[2025-07-01 10:00:12 TP0] Ignore import error when loading sglang.srt.models.glmasr: cannot import name 'GlmAsrConfig' from 'transformers'",
        '[2025-07-01 10:00:13 TP0] Load weight begin. avail mem=78.21 GB',
        'Killed',
      ),
    );
    expect(f.kind).toBe('crash');
  });
});

describe('classifyServerFailure: out of memory', () => {
  it('advises lowering --mem-fraction-static and checking foreign GPU processes on a CUDA OOM', () => {
    const f = classifyServerFailure(
      lines(
        "[2025-07-01 10:00:12 TP3] Ignore import error when loading sglang.srt.models.mindspore: No module named 'mindspore'",
        '[2025-07-01 10:04:40 TP3] Scheduler hit an exception: Traceback (most recent call last):',
        '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2650, in run_scheduler_process',
        '    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)',
        '  File "/opt/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 402, in capture',
        '    out = run_once()',
        'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 3 has a total capacity of 79.10 GiB of which 1.02 GiB is free. Process 48211 has 78.07 GiB memory in use.',
        '',
        '[2025-07-01 10:04:40] Received sigquit from a child process. It usually means the child failed.',
        'Killed',
      ),
    );
    expect(f).toMatchObject({ kind: 'out-of-memory', retryable: false });
    expect(f.message).toContain('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB.');
    expect(f.message).toMatch(/Lower --mem-fraction-static/);
    expect(f.message).toMatch(/GPU processes that are not ours/);
  });

  it('advises raising --mem-fraction-static when the KV cache does not fit', () => {
    const f = classifyServerFailure(
      lines(
        '[2025-07-01 10:04:31 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=1.20 GB',
        '[2025-07-01 10:04:31 TP0] Scheduler hit an exception: Traceback (most recent call last):',
        '  File "/opt/sglang/python/sglang/srt/model_executor/model_runner.py", line 1321, in init_memory_pool',
        '    raise RuntimeError(',
        'RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.6',
      ),
    );
    expect(f).toMatchObject({ kind: 'out-of-memory', retryable: false });
    expect(f.message).toMatch(/Raise --mem-fraction-static/);
  });

  it('points at foreign GPU processes when memory is unbalanced across GPUs', () => {
    const f = classifyServerFailure(
      lines('ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes.'),
    );
    expect(f).toMatchObject({ kind: 'out-of-memory', retryable: false });
    expect(f.message).toMatch(/foreign GPU processes/);
  });
});

describe('classifyServerFailure: port in use', () => {
  it("names the address from uvicorn's bind error", () => {
    const f = classifyServerFailure(
      lines(
        '[2025-07-01 10:05:33] INFO:     Started server process [48211]',
        '[2025-07-01 10:05:33] INFO:     Waiting for application startup.',
        '[2025-07-01 10:05:33] INFO:     Application startup complete.',
        "[2025-07-01 10:05:33] ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use",
        '[2025-07-01 10:05:33] INFO:     Waiting for application shutdown.',
      ),
    );
    expect(f).toMatchObject({ kind: 'port-in-use', retryable: false });
    expect(f.message).toMatch(/^127\.0\.0\.1:30000 is already in use/);
  });

  it('recognises a bare "Address already in use"', () => {
    const f = classifyServerFailure(lines("zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:30001')"));
    expect(f.kind).toBe('port-in-use');
  });
});

describe('classifyServerFailure: warmup failed', () => {
  it("reports the warmup request's exception, retryable", () => {
    const f = classifyServerFailure(
      lines(
        '[2025-07-01 10:05:33] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)',
        '[2025-07-01 10:05:36] Initialization failed. warmup error: Traceback (most recent call last):',
        '  File "/opt/sglang/python/sglang/srt/entrypoints/http_server.py", line 1201, in _execute_server_warmup',
        '    assert res.status_code == 200, f"{res}"',
        '           ^^^^^^^^^^^^^^^^^^^^^^',
        'AssertionError: <Response [500]>',
        '',
      ),
    );
    expect(f).toEqual({
      kind: 'warmup-failed',
      retryable: true,
      message: 'the server loaded but its warmup generation failed: AssertionError: <Response [500]>',
    });
  });

  it('recognises a proxy answering the warmup request and says how to bypass it', () => {
    const f = classifyServerFailure(
      lines(
        '[2024-12-13 01:45:02] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)',
        '[2024-12-13 01:47:34] Initialization failed. warmup error: Traceback (most recent call last):',
        '  File "/home/sglang/python/sglang/srt/server.py", line 621, in _wait_and_warmup',
        '    assert res.status_code == 200, f"{res=}, {res.text=}"',
        "AssertionError: res=<Response [502]>, res.text=''",
        '',
        'Killed',
      ),
    );
    expect(f).toMatchObject({ kind: 'warmup-failed', retryable: false });
    expect(f.message).toContain("AssertionError: res=<Response [502]>, res.text=''");
    expect(f.message).toMatch(/no_proxy=127\.0\.0\.1,localhost/);
  });
});

describe('classifyServerFailure: crash', () => {
  it('reports the exception line of a crash on first decode (incident 2)', () => {
    const f = classifyServerFailure(
      lines(
        '[2025-07-01 10:20:11 TP0] Decode batch. #running-req: 1, #token: 40, token usage: 0.00, accept len: 1.00, gen throughput (token/s): 0.93, #queue-req: 0',
        '[2025-07-01 10:20:11 TP0] Scheduler hit an exception: Traceback (most recent call last):',
        '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2671, in run_scheduler_process',
        '    scheduler.event_loop_overlap()',
        '  File "/opt/sglang/.venv/lib/python3.11/site-packages/torch/utils/_contextlib.py", line 116, in decorate_context',
        '    return func(*args, **kwargs)',
        '           ^^^^^^^^^^^^^^^^^^^^^',
        '  File "/opt/sglang/python/sglang/srt/speculative/eagle_worker_v2.py", line 312, in forward_batch_generation',
        '    if batch.batch_size() > self.spec_disable_batch_threshold:',
        '                            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^',
        "AttributeError: 'EAGLEWorkerV2' object has no attribute 'spec_disable_batch_threshold'",
        '',
        '[2025-07-01 10:20:11] Received sigquit from a child process. It usually means the child failed.',
      ),
    );
    expect(f).toEqual({
      kind: 'crash',
      retryable: true,
      message: "AttributeError: 'EAGLEWorkerV2' object has no attribute 'spec_disable_batch_threshold'",
    });
  });

  it('reports the last exception of a chained traceback', () => {
    const f = classifyServerFailure(
      lines(
        'Traceback (most recent call last):',
        '  File "/opt/sglang/python/sglang/srt/distributed/parallel_state.py", line 310, in all_reduce',
        '    torch.distributed.all_reduce(input_, group=self.device_group)',
        'torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled cuda error',
        '',
        'During handling of the above exception, another exception occurred:',
        '',
        'Traceback (most recent call last):',
        '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2680, in run_scheduler_process',
        '    raise RuntimeError("scheduler died") from e',
        'RuntimeError: scheduler died',
      ),
    );
    expect(f).toEqual({ kind: 'crash', retryable: true, message: 'RuntimeError: scheduler died' });
  });

  it('falls back to the last log line when there is no traceback', () => {
    expect(
      classifyServerFailure(lines('[2025-07-01 10:04:31 TP0] Load weight begin. avail mem=78.21 GB', 'Killed')),
    ).toEqual({
      kind: 'crash',
      retryable: true,
      message: 'the server exited without a Python traceback; last log line: Killed',
    });
  });

  it('says so when the log is empty', () => {
    expect(classifyServerFailure('')).toEqual({
      kind: 'crash',
      retryable: true,
      message: 'the server exited and its log is empty',
    });
  });
});

describe('exceptionLine', () => {
  it('is undefined without a traceback', () => {
    expect(exceptionLine(logLines('just a line\nanother'))).toBeUndefined();
  });
});

describe('classifyServerFailure: precedence', () => {
  it('does not blame an import error that an earlier traceback survived', () => {
    const f = classifyServerFailure(
      lines(
        'Traceback (most recent call last):',
        '  File "/opt/sglang/python/sglang/srt/models/registry.py", line 88, in import_model_classes',
        '    module = importlib.import_module(name)',
        "ModuleNotFoundError: No module named 'mindspore'",
        '[2025-07-01 10:20:11 TP0] Scheduler hit an exception: Traceback (most recent call last):',
        '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2671, in run_scheduler_process',
        '    scheduler.event_loop_overlap()',
        'RuntimeError: CUDA error: an illegal memory access was encountered',
      ),
    );
    expect(f).toEqual({
      kind: 'crash',
      retryable: true,
      message: 'RuntimeError: CUDA error: an illegal memory access was encountered',
    });
  });
});
