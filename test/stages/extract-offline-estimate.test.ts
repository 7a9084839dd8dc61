import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { estimateOfflineTokens, offlineBytesNeeded } from '../../src/stages/extract/offline-estimate.js';
import { useLocalHost } from '../support/local-host.js';

const fx = useLocalHost('aerie-est-', { sub: 'host' });
let dir: string;
let host: LocalHost;
let data: string;
beforeAll(async () => {
  ({ dir, host } = fx);
  data = join(dir, 'train.jsonl');
  await writeFile(
    data,
    [
      JSON.stringify({
        id: 'a',
        conversations: [
          { role: 'user', content: 'one two three' },
          { role: 'assistant', content: 'four five' },
        ],
      }),
      'not json',
      JSON.stringify({
        id: 'c',
        conversations: [
          { role: 'user', content: 'x '.repeat(500) },
          { role: 'assistant', content: 'y' },
        ],
      }),
    ].join('\n') + '\n',
  );
});

describe('the offline extraction disk estimate (conformance.md D8)', () => {
  it('without a tokenizer: words as tokens, one row per line (a malformed line still counts), capped at max-length', async () => {
    const est = await estimateOfflineTokens(host, data, 64);
    expect(est.how).toBe('whitespace words as tokens');
    expect(est.tokens).toHaveLength(3);
    expect(est.tokens[1]).toBe(1);
    expect(est.tokens[2]).toBe(64);
  });

  it('a host interpreter that cannot tokenize: the words stand in, and the note says why', async () => {
    const est = await estimateOfflineTokens(host, data, 64, {
      python: join(dir, 'no-such-python'),
      modelPath: dir,
      chatTemplate: 'llama3',
    });
    expect(est.how).toMatch(/^whitespace words as tokens \(tokenizing on local failed: /);
    expect(est.tokens).toHaveLength(3);
  });

  it('prices the rows left as the longest ones, padded to their batch, with every stored tensor', () => {
    // rows 10, 50, 20, 40; two left → the two longest (50, 40); batch 2 pads both to 50
    expect(offlineBytesNeeded([10, 50, 20, 40], 2, 2, 8)).toEqual({ tokens: 100, bytes: 100 * (8 * 8 + 16) });
    expect(offlineBytesNeeded([10, 50], 0, 4, 8)).toEqual({ tokens: 0, bytes: 0 });
  });
});
