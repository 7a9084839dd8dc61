import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { assertEnvName, shAssignments, shJoin, shQuote } from '../../src/hosts/util/shell-quote.js';
import { run } from '../support/processes.js';
import { useWorkdir } from '../support/workdir.js';

describe('shQuote golden', () => {
  const cases: [string, string][] = [
    ['python3', 'python3'],
    ['/models/Llama-3.1-8B', '/models/Llama-3.1-8B'],
    ['--port=30000', "'--port=30000'"],
    ['', "''"],
    ['two words', "'two words'"],
    ["it's", "'it'\\''s'"],
    ['$(touch /tmp/x)', "'$(touch /tmp/x)'"],
    ['`touch /tmp/x`', "'`touch /tmp/x`'"],
    ['a; rm -rf ~', "'a; rm -rf ~'"],
    ['line1\nline2', "'line1\nline2'"],
    ['"double"', `'"double"'`],
    ['*', "'*'"],
    ['~', "'~'"],
    ['FOO=bar', "'FOO=bar'"],
    ['back\\slash', "'back\\slash'"],
    ["''", "''\\'''\\'''"],
  ];
  it.each(cases)('quotes %j as %s', (word, quoted) => {
    expect(shQuote(word)).toBe(quoted);
  });

  it('refuses NUL, which no shell word can carry', () => {
    expect(() => shQuote('a\0b')).toThrow(/NUL/);
  });

  it('joins argv with every element quoted', () => {
    expect(shJoin(['python3', '-c', 'print("hi")', '$HOME'])).toBe(`python3 -c 'print("hi")' '$HOME'`);
  });
});

describe('shAssignments', () => {
  it('renders sorted NAME=value words with values always quoted', () => {
    expect(shAssignments({ ZED: 'z', CUDA_VISIBLE_DEVICES: '0,1', TOKEN: "a'b $(x)" })).toEqual([
      "CUDA_VISIBLE_DEVICES='0,1'",
      "TOKEN='a'\\''b $(x)'",
      "ZED='z'",
    ]);
  });
  it('refuses names that are not environment variable names', () => {
    expect(() => shAssignments({ 'A;B': 'x' })).toThrow(/not an environment variable name/);
    expect(() => assertEnvName('1ABC')).toThrow();
    expect(() => assertEnvName('$(x)')).toThrow();
    expect(() => assertEnvName('_OK_1')).not.toThrow();
  });
});

describe('quoted words in a real shell', () => {
  const tmp = useWorkdir('aerie-quote-', { each: true });
  let dir: string;
  beforeEach(() => {
    dir = tmp.path;
  });

  it('reach the program unchanged and execute nothing', async () => {
    const marker = join(dir, 'pwned');
    const words = [
      `$(touch ${marker})`,
      `\`touch ${marker}\``,
      `; touch ${marker}`,
      `| touch ${marker}`,
      `&& touch ${marker} &`,
      `> ${marker}`,
      'it\'s "quoted"',
      'new\nline',
      '  spaces  ',
      '*',
      '$HOME ${HOME} \\n',
      'FOO=bar',
      '',
    ];
    const { stdout } = await run('/bin/sh', ['-c', `printf '%s\\0' ${shJoin(words)}`], { cwd: dir });
    expect(stdout.split('\0').slice(0, -1)).toEqual(words);
    expect(await readdir(dir)).toEqual([]);
  });

  it('pass env values unchanged and execute nothing', async () => {
    const marker = join(dir, 'pwned');
    const value = `$(touch ${marker})'; touch ${marker}; '\n`;
    const { stdout } = await run('/bin/sh', ['-c', `${shAssignments({ AERIE_V: value }).join(' ')} printenv AERIE_V`], {
      cwd: dir,
    });
    expect(stdout).toBe(`${value}\n`);
    expect(await readdir(dir)).toEqual([]);
  });
});
