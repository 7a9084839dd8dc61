/**
 * vLLM's log as aerie reads it, golden against real vLLM 0.32.0 logs captured on this
 * machine's CPU (test/fixtures/real/vllm-0.32.0/, PROVENANCE.md there).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { classifyVllmFailure, readVllmPhase, stripVllmPrefix } from '../../src/engines/index.js';

const FX = join(import.meta.dirname, '../fixtures/real/vllm-0.32.0');
const log = (name: string) => readFileSync(join(FX, name), 'utf8');

describe('a real vLLM log, read', () => {
  it('strips the process, level, time and source prefix, keeping indentation', () => {
    expect(
      stripVllmPrefix(
        '(APIServer pid=8109) INFO 12-07 18:37:13 [entry.py:140] Starting vLLM server on http://127.0.0.1:1',
      ),
    ).toBe('Starting vLLM server on http://127.0.0.1:1');
    expect(stripVllmPrefix('(EngineCore pid=1) ERROR 12-07 18:45:17 [core.py:1512]     raise RuntimeError(')).toBe(
      '    raise RuntimeError(',
    );
    expect(stripVllmPrefix('INFO:     Application startup complete.')).toBe('Application startup complete.');
  });

  it('follows startup to ready, and stops where a failed load stopped', () => {
    expect(readVllmPhase(log('serve.log'))).toEqual({ phase: 'ready', detail: 'Application startup complete.' });
    expect(readVllmPhase(log('eagle3.log')).phase).toBe('ready');
    const partial = log('serve.log').split('Loading weights took')[0]!;
    expect(readVllmPhase(partial).phase).toBe('loading weights');
    expect(readVllmPhase(log('d2t-full-vocab.log')).phase).toBe('weights loaded');
  });

  it("names the root cause under vLLM's wrappers, and which causes a relaunch cannot cure", () => {
    expect(classifyVllmFailure(log('aux-collapse.log'))).toEqual({
      kind: 'crash',
      retryable: true,
      message: 'RuntimeError: mat1 and mat2 shapes cannot be multiplied (15x256 and 384x128)',
    });
    const d2t = classifyVllmFailure(log('d2t-full-vocab.log'));
    expect(d2t.retryable).toBe(false);
    expect(d2t.message).toMatch(/^ValueError: There is no module or parameter named 'draft_id_to_target_id'/);
    const eagle = classifyVllmFailure(log('eagle-method.log'));
    expect(eagle.retryable).toBe(false);
    expect(eagle.message).toMatch(
      /ValidationError.*Value error, Model architectures \['EagleLlamaForCausalLMEagle3'\] are not supported/,
    );
  });
});
