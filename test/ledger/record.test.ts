import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import {
  canonicalJson,
  inputsHash,
  judgeLedger,
  parseLedgerRecord,
  type LedgerRecord,
} from '../../src/ledger/record.js';

const yaml = (extra = '') => `
hosts: { gpu: { kind: local, workdir: /srv/aerie } }
target: { model-path: /models/llama, host: gpu }
stages:
  generate: { input: /data/prompts.jsonl, temperature: 0.7${extra} }
  extract: { chat-template: llama3 }
  train: { draft-model-config: /cfg/draft.json }
`;

const record = (over: Partial<LedgerRecord> = {}): LedgerRecord => ({
  stage: 'generate',
  inputsHash: 'h1',
  outputs: [
    { path: '/r/data/train.jsonl', bytes: 100, sha256: 'abc' },
    { path: '/r/hidden', bytes: 5000, count: 10 },
  ],
  result: {},
  note: '',
  finishedAt: '2026-01-01T00:00:00Z',
  runId: 'r',
  ...over,
});

describe('stage ledger', () => {
  it('canonical JSON does not depend on key order', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { z: 1, y: 2 }], c: null } })).toBe(
      '{"a":{"c":null,"d":[1,{"y":2,"z":1}]},"b":1}',
    );
    expect(canonicalJson({ a: 1, b: undefined })).toBe('{"a":1}');
  });

  it('hashes what decides the output, not how the work is carried out', () => {
    const base = parseConfigText(yaml(), 't', {});
    const h = inputsHash(base, 'generate', []);
    expect(inputsHash(parseConfigText(yaml(', concurrency: 200'), 't', {}), 'generate', [])).toBe(h);
    expect(inputsHash(parseConfigText(yaml(', shard-size: 64, request-retries: 9'), 't', {}), 'generate', [])).toBe(h);
    expect(inputsHash(parseConfigText(yaml(', max-tokens: 17'), 't', {}), 'generate', [])).not.toBe(h);
    expect(inputsHash(base, 'extract', ['x'])).not.toBe(inputsHash(base, 'extract', ['y']));
  });

  it('is a hit only when the record matches and every output is whole', () => {
    const ok = new Map([
      ['/r/data/train.jsonl', { bytes: 100 }],
      ['/r/hidden', { bytes: 5000, count: 10 }],
    ]);
    expect(judgeLedger(record(), 'h1', ok)).toEqual({ valid: true });
    expect(judgeLedger(null, 'h1', ok)).toEqual({ valid: false, reason: 'not done yet' });
    expect(judgeLedger(record(), 'h2', ok)).toEqual({
      valid: false,
      reason: 'config or upstream changed since it was done',
    });
  });

  it('treats a deleted, truncated or thinned output as not done', () => {
    const missing = new Map([['/r/hidden', { bytes: 5000, count: 10 }]]);
    expect(judgeLedger(record(), 'h1', missing)).toEqual({
      valid: false,
      reason: 'output /r/data/train.jsonl is missing',
    });
    const truncated = new Map([
      ['/r/data/train.jsonl', { bytes: 60 }],
      ['/r/hidden', { bytes: 5000, count: 10 }],
    ]);
    expect(judgeLedger(record(), 'h1', truncated)).toMatchObject({
      valid: false,
      reason: expect.stringContaining('60 bytes, recorded 100'),
    });
    const fewer = new Map([
      ['/r/data/train.jsonl', { bytes: 100 }],
      ['/r/hidden', { bytes: 5000, count: 9 }],
    ]);
    expect(judgeLedger(record(), 'h1', fewer)).toMatchObject({
      valid: false,
      reason: expect.stringContaining('holds 9 files, recorded 10'),
    });
  });

  it('reads back a record and refuses garbage', () => {
    expect(parseLedgerRecord(JSON.stringify(record()))).toEqual(record());
    expect(parseLedgerRecord('{"stage":"generate"')).toBeNull();
    expect(parseLedgerRecord('{"stage":"generate"}')).toBeNull();
  });
});
