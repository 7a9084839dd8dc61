import { describe, expect, it } from 'vitest';
import { lastLines, readPhase, serverWarnings, stripLogPrefix } from '../../src/sglang/log-phase.js';

// An 8-GPU EAGLE3 startup, cut into the stretches a poll loop would see. Shaped like SGLang's
// real output: no level names, rank prefixes from scheduler processes, tqdm bars rewritten with \r.
const SERVER_ARGS = [
  "[2025-07-01 10:00:00] server_args=ServerArgs(model_path='/models/Kimi-K2-Instruct', tokenizer_path='/models/Kimi-K2-Instruct', host='127.0.0.1', port=30000, tp_size=8, speculative_algorithm='EAGLE3', speculative_draft_model_path='/runs/r1/drafter', speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4, decode_log_interval=40)",
  '[2025-07-01 10:00:00] Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.',
  '[2025-07-01 10:00:00] speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1',
  '/opt/sglang/.venv/lib/python3.11/site-packages/torch/cuda/__init__.py:63: FutureWarning: The pynvml package is deprecated. Please install nvidia-ml-py instead.',
  '[2025-07-01 10:00:09 TP0] Init torch distributed begin.',
  '[2025-07-01 10:00:09 TP3] Init torch distributed begin.',
  '[2025-07-01 10:00:11 TP0] Init torch distributed ends. mem usage=0.53 GB',
  "[2025-07-01 10:00:12 TP0] Ignore import error when loading sglang.srt.models.mindspore: No module named 'mindspore'",
].join('\n');

const LOADING = [
  '[2025-07-01 10:00:13 TP0] Load weight begin. avail mem=78.21 GB',
  '[2025-07-01 10:00:13 TP5] Load weight begin. avail mem=78.21 GB',
  'Loading safetensors checkpoint shards:   0% Completed | 0/64 [00:00<?, ?it/s]\r' +
    'Loading safetensors checkpoint shards:  25% Completed | 16/64 [01:05<03:15,  4.07s/it]\r' +
    'Loading safetensors checkpoint shards:  50% Completed | 32/64 [02:11<02:11,  4.10s/it]',
].join('\n');

const LOADED = [
  '[2025-07-01 10:04:31 TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=9.87 GB, mem usage=68.34 GB.',
  '[2025-07-01 10:04:35 TP0] KV Cache is allocated. #tokens: 452312, KV size: 29.61 GB',
  '[2025-07-01 10:04:35 TP0] Memory pool end. avail mem=7.12 GB',
  // A slow rank reports its start after rank 0 finished: the phase must not go back.
  '[2025-07-01 10:04:35 TP6] Load weight begin. avail mem=78.21 GB',
].join('\n');

const CAPTURING = [
  '[2025-07-01 10:04:36 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=7.02 GB',
  '[2025-07-01 10:04:36 TP0] Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32, 40, 48]',
  'Capturing batches (bs=48 avail_mem=6.91 GB):   0%|          | 0/9 [00:00<?, ?it/s]\r' +
    'Capturing batches (bs=16 avail_mem=6.41 GB):  56%|█████▌    | 5/9 [00:03<00:02,  1.49it/s]',
].join('\n');

const DRAFT = [
  '[2025-07-01 10:04:49 TP0] Capture cuda graph end. Time elapsed: 13.21 s. mem usage=0.71 GB. avail mem=6.31 GB.',
  '[2025-07-01 10:04:50 TP0] Load weight begin. avail mem=6.30 GB',
  '[2025-07-01 10:04:51 TP0] Load weight end. type=LlamaForCausalLMEagle3, dtype=torch.bfloat16, avail mem=5.91 GB, mem usage=0.39 GB.',
  '[2025-07-01 10:04:51 TP0] Capture draft cuda graph begin. This can take up to several minutes. avail mem=5.62 GB',
].join('\n');

const WARMING = [
  '[2025-07-01 10:05:20 TP0] Capture draft cuda graph end. Time elapsed: 29.10 s. mem usage=0.34 GB. avail mem=5.28 GB.',
  '[2025-07-01 10:05:20 TP0] Capture draft extend cuda graph begin. This can take up to several minutes. avail mem=5.28 GB',
  '[2025-07-01 10:05:31 TP0] Capture draft extend cuda graph end. Time elapsed: 11.02 s. mem usage=0.12 GB. avail mem=5.16 GB.',
  '[2025-07-01 10:05:32 TP0] max_total_num_tokens=452312, chunked_prefill_size=16384, max_prefill_tokens=16384, max_running_requests=48, context_len=131072, available_gpu_mem=5.16 GB',
].join('\n');

const UVICORN = [
  '[2025-07-01 10:05:33] INFO:     Started server process [48211]',
  '[2025-07-01 10:05:33] INFO:     Waiting for application startup.',
  '[2025-07-01 10:05:33] INFO:     Application startup complete.',
  '[2025-07-01 10:05:33] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)',
  '[2025-07-01 10:05:34] INFO:     127.0.0.1:51234 - "GET /get_model_info HTTP/1.1" 200 OK',
  '[2025-07-01 10:05:34 TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0',
].join('\n');

const READY = [
  '[2025-07-01 10:05:36] INFO:     127.0.0.1:51240 - "POST /generate HTTP/1.1" 200 OK',
  '[2025-07-01 10:05:36] The server is fired up and ready to roll!',
  '[2025-07-01 10:06:10 TP0] Decode batch. #running-req: 1, #token: 512, token usage: 0.00, accept len: 3.12, cuda graph: True, gen throughput (token/s): 98.71, #queue-req: 0',
  '[2025-07-01 10:06:12] WARNING:  Invalid HTTP request received.',
  '',
].join('\n');

const upTo = (...parts: string[]) => parts.join('\n') + '\n';

describe('readPhase', () => {
  it('is starting before any weights load, and for an empty log', () => {
    expect(readPhase('')).toEqual({ phase: 'starting' });
    expect(readPhase(upTo(SERVER_ARGS))).toEqual({ phase: 'starting' });
  });

  it('is loading weights, with the shard progress as detail', () => {
    expect(readPhase(upTo(SERVER_ARGS, LOADING))).toEqual({
      phase: 'loading weights',
      detail: 'Loading safetensors checkpoint shards: 50% (32/64)',
    });
  });

  it('is weights loaded, and a slow rank starting late does not move it back', () => {
    expect(readPhase(upTo(SERVER_ARGS, LOADING, LOADED))).toEqual({
      phase: 'weights loaded',
      detail: 'Memory pool end. avail mem=7.12 GB',
    });
  });

  it('is capturing cuda graphs, with the batch progress as detail', () => {
    expect(readPhase(upTo(SERVER_ARGS, LOADING, LOADED, CAPTURING))).toEqual({
      phase: 'capturing cuda graphs',
      detail: 'Capturing batches (bs=16 avail_mem=6.41 GB): 56% (5/9)',
    });
  });

  it('stays capturing while the drafter loads, and names the draft capture', () => {
    expect(readPhase(upTo(SERVER_ARGS, LOADING, LOADED, CAPTURING, DRAFT))).toEqual({
      phase: 'capturing cuda graphs',
      detail: 'Capture draft cuda graph begin. This can take up to several minutes. avail mem=5.62 GB',
    });
  });

  it('is warming up once max_total_num_tokens is logged', () => {
    expect(readPhase(upTo(SERVER_ARGS, LOADING, LOADED, CAPTURING, DRAFT, WARMING))).toEqual({
      phase: 'warming up',
      detail:
        'max_total_num_tokens=452312, chunked_prefill_size=16384, max_prefill_tokens=16384, max_running_requests=48, context_len=131072, available_gpu_mem=5.16 GB',
    });
  });

  it('is warming up with Uvicorn running as detail', () => {
    expect(readPhase(upTo(SERVER_ARGS, LOADING, LOADED, CAPTURING, DRAFT, WARMING, UVICORN))).toEqual({
      phase: 'warming up',
      detail: 'Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)',
    });
  });

  it('is warming up on Uvicorn running alone', () => {
    expect(
      readPhase('[2025-07-01 10:05:33] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)\n')
        .phase,
    ).toBe('warming up');
  });

  it('is ready after the fired-up line, and stays ready while serving', () => {
    expect(readPhase(upTo(SERVER_ARGS, LOADING, LOADED, CAPTURING, DRAFT, WARMING, UVICORN, READY))).toEqual({
      phase: 'ready',
      detail: 'The server is fired up and ready to roll!',
    });
  });

  it('goes from weights loaded to warming up when CUDA graphs are disabled (extraction)', () => {
    const log = [
      '[2025-07-01 11:00:05 TP0] Load weight begin. avail mem=78.21 GB',
      '[2025-07-01 11:03:05 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.72 GB',
      '[2025-07-01 11:03:05 TP0] Memory pool end. avail mem=8.34 GB',
    ];
    expect(readPhase(log.join('\n')).phase).toBe('weights loaded');
    log.push(
      '[2025-07-01 11:03:06 TP0] max_total_num_tokens=444500, max_prefill_tokens=16384, max_running_requests=2049, context_len=131072',
    );
    expect(readPhase(log.join('\n')).phase).toBe('warming up');
  });

  it('reads the time-only prefix of older versions', () => {
    expect(readPhase('[10:00:13 TP0] Load weight begin. avail mem=78.21 GB\n')).toEqual({
      phase: 'loading weights',
      detail: 'Load weight begin. avail mem=78.21 GB',
    });
  });
});

describe('stripLogPrefix', () => {
  it('removes timestamp, rank and uvicorn level prefixes', () => {
    expect(stripLogPrefix('[2025-07-01 10:00:00] Max running requests is reset to 48')).toBe(
      'Max running requests is reset to 48',
    );
    expect(stripLogPrefix('[2025-07-01 10:00:00 TP0] Load weight begin.')).toBe('Load weight begin.');
    expect(stripLogPrefix('[2025-07-01 10:00:00 DP1 TP3 EP3] Load weight begin.')).toBe('Load weight begin.');
    expect(stripLogPrefix('[2025-07-01 10:05:33] INFO:     Uvicorn running on http://x')).toBe(
      'Uvicorn running on http://x',
    );
    expect(stripLogPrefix('Loading safetensors checkpoint shards: 100%')).toBe(
      'Loading safetensors checkpoint shards: 100%',
    );
  });
});

describe('serverWarnings on the spec lines each release prints at info level', () => {
  it('keeps the spec v1 fallback (0.5.12), synchronous spec v2 (0.5.23) and mixed-chunk lines', () => {
    const log = [
      '[2026-12-01 10:00:00] Spec v1 is used for eagle/eagle3/standalone speculative decoding because overlap schedule is disabled.',
      '[2026-12-01 10:00:00] Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding.',
      '[2026-12-01 10:00:00] Mixed chunked prefill is disabled because of using eagle speculative decoding.',
      '[2026-12-01 10:00:00] Load weight end.',
    ].join('\n');
    expect(serverWarnings(log)).toEqual([
      'Spec v1 is used for eagle/eagle3/standalone speculative decoding because overlap schedule is disabled.',
      'Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding.',
      'Mixed chunked prefill is disabled because of using eagle speculative decoding.',
    ]);
  });
});

describe('serverWarnings', () => {
  it('collects SGLang warnings (which carry no level word) and library warnings, each once', () => {
    const twice =
      '[2025-07-01 10:00:09 TP1] /opt/sglang/.venv/lib/python3.11/site-packages/torch/cuda/__init__.py:63: FutureWarning: The pynvml package is deprecated. Please install nvidia-ml-py instead.';
    const log = upTo(SERVER_ARGS, twice, LOADING, LOADED, CAPTURING, DRAFT, WARMING, UVICORN, READY);
    expect(serverWarnings(log)).toEqual([
      'Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.',
      'speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1',
      '/opt/sglang/.venv/lib/python3.11/site-packages/torch/cuda/__init__.py:63: FutureWarning: The pynvml package is deprecated. Please install nvidia-ml-py instead.',
      'Invalid HTTP request received.',
    ]);
  });

  it('is empty for a log without warnings', () => {
    expect(serverWarnings(upTo(LOADING, LOADED))).toEqual([]);
  });
});

describe('lastLines', () => {
  it('returns the last n lines, ignoring the final newline', () => {
    expect(lastLines('a\nb\nc\n', 2)).toBe('b\nc');
    expect(lastLines('a\nb\nc', 5)).toBe('a\nb\nc');
    expect(lastLines('a\r\nb\r\n', 1)).toBe('b');
  });

  it('returns nothing for n <= 0 or empty text', () => {
    expect(lastLines('a\nb', 0)).toBe('');
    expect(lastLines('', 3)).toBe('');
  });
});
