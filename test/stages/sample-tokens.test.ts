/**
 * Reading tokens.py's output lines and summary (src/stages/common/sample-tokens.ts). The lines here are exactly as
 * tokens.py's json.dumps writes them; test/py/tokens.test.ts parses the script's live output.
 */
import { describe, expect, it } from 'vitest';
import { parseTokensLine, parseTokensSummary } from '../../src/stages/common/sample-tokens.js';

describe('parseTokensLine', () => {
  it('reads the three shapes tokens.py writes', () => {
    expect(parseTokensLine('{"id": "s1", "input_ids": [0, 2, 88, 3], "loss_mask": [0, 0, 1, 1]}')).toEqual({
      kind: 'tokens',
      tokens: { id: 's1', inputIds: [0, 2, 88, 3], lossMask: [0, 0, 1, 1] },
    });
    expect(parseTokensLine('{"id": "empty", "error": "no turns (empty conversation)"}')).toEqual({
      kind: 'error',
      id: 'empty',
      error: 'no turns (empty conversation)',
    });
    expect(
      parseTokensLine('{"id": null, "line": 2, "error": "bad JSON: Expecting value: line 1 column 1 (char 0)"}'),
    ).toEqual({
      kind: 'malformed',
      line: 2,
      error: 'bad JSON: Expecting value: line 1 column 1 (char 0)',
    });
  });

  it.each([
    ['not json', 'not JSON: not json'],
    ['[1, 2]', 'not a JSON object'],
    ['{"id": null, "error": "x"}', 'a line without an id has no line number and error'],
    ['{"id": 7, "input_ids": [1], "loss_mask": [0]}', 'id is not a non-empty string (7)'],
    ['{"id": "a", "input_ids": [1, 2], "loss_mask": [0]}', 'sample a: 1 loss_mask entries for 2 input_ids'],
    ['{"id": "a", "input_ids": [1, -2], "loss_mask": [0, 0]}', 'sample a: input_ids[1] is not a token id (-2)'],
    ['{"id": "a", "input_ids": [1, 2.5], "loss_mask": [0, 0]}', 'sample a: input_ids[1] is not a token id (2.5)'],
    ['{"id": "a", "input_ids": [1, 2], "loss_mask": [0, 2]}', 'sample a: loss_mask[1] is 2, not 0 or 1'],
    ['{"id": "a", "input_ids": [], "loss_mask": []}', 'sample a: no input_ids'],
    ['{"id": "a", "loss_mask": [0]}', 'sample a: input_ids is not a list'],
  ])('refuses %s', (line, reason) => {
    expect(parseTokensLine(line)).toEqual({ kind: 'invalid', reason });
  });
});

describe('parseTokensSummary', () => {
  it("reads the last stderr line and ignores transformers' chatter before it", () => {
    const stderr =
      "[transformers] PyTorch was not found. Models won't be available.\n" +
      '{"aerie_tokens": {"lines": 8, "ok": 2, "errors": 2, "malformed": 4, "method": "aerie+specforge", "chat_template": "llama3", "max_length": 2048}}\n';
    expect(parseTokensSummary(stderr)).toEqual({
      lines: 8,
      ok: 2,
      errors: 2,
      malformed: 4,
      method: 'aerie+specforge',
      chatTemplate: 'llama3',
      maxLength: 2048,
    });
  });
  it('is null when the script ended without one (a traceback, a kill)', () => {
    expect(parseTokensSummary('Traceback (most recent call last):\n  ...\nKeyError: x\n')).toBeNull();
    expect(
      parseTokensSummary(
        '{"aerie_tokens": {"lines": 1, "ok": 1, "errors": 0, "malformed": 0, "method": "guess", "chat_template": "llama3", "max_length": 9}}',
      ),
    ).toBeNull();
  });
});
