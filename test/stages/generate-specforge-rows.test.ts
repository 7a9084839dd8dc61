/**
 * conformance.md D12: the generate stage's rows carry SpecForge's own tags, so SpecForge's
 * validator (SpecForge@a6b6b023:scripts/validate_regenerated_data.py) accepts aerie's
 * train.jsonl, and shards a run left before the change are rewritten when a resume merges them.
 *
 * The validator's field rules are stated one by one below with the lines they come from; the
 * rows are aerie's real output from runGenerate against a small in-process chat server.
 */
import { readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { specforgeRowText } from '../../src/stages/generate/plan.js';
import { runGenerate, type GenerateJob } from '../../src/stages/generate/regenerate.js';
import { useFakeServer } from '../support/fake-server.js';
import { useLocalHost } from '../support/local-host.js';

type Row = Record<string, unknown>;
type Message = Record<string, unknown>;

/** SpecForge@a6b6b023:scripts/conversation_validation.py validate_conversation, rule by rule. */
function conversationRules(messages: unknown): [string, boolean][] {
  const list = Array.isArray(messages) ? (messages as Message[]) : [];
  const firstUser = list.findIndex((m) => m?.role === 'user');
  // After dropping the system messages before the first user (:38-39), roles alternate from user (:44-55).
  const ordered = list.filter((m, i) => !(m?.role === 'system' && (firstUser < 0 || i < firstUser)));
  return [
    ['conversation_validation.py:16-19 conversations is a non-empty list', list.length > 0],
    [
      'conversation_validation.py:24-27 every message is an object',
      list.every((m) => typeof m === 'object' && m !== null && !Array.isArray(m)),
    ],
    [
      'conversation_validation.py:28-36 every content is a non-empty string',
      list.every((m) => typeof m.content === 'string' && m.content.trim() !== ''),
    ],
    [
      'conversation_validation.py:38-43 system only before the first user; otherwise user or assistant',
      ordered.every((m) => m.role === 'user' || m.role === 'assistant'),
    ],
    [
      'conversation_validation.py:44-55 roles alternate user, assistant, user, …',
      ordered.every((m, i) => m.role === (i % 2 === 0 ? 'user' : 'assistant')),
    ],
    ['conversation_validation.py:57-60 at least one user message', firstUser >= 0],
  ];
}

/** SpecForge@a6b6b023:scripts/validate_regenerated_data.py validate_row (default flags), rule by rule. */
function validatorRules(row: Row): [string, boolean][] {
  const messages = row.conversations;
  const list = Array.isArray(messages) ? (messages as Message[]) : [];
  const assistants = list.filter((m) => m?.role === 'assistant');
  return [
    ['validate_regenerated_data.py:69-71 id is a non-empty string', typeof row.id === 'string' && row.id.trim() !== ''],
    ['validate_regenerated_data.py:72-73 status is "success"', row.status === 'success'],
    ...conversationRules(messages),
    [
      'validate_regenerated_data.py:88-92 reasoning_content is a string or null',
      assistants.every(
        (m) =>
          m.reasoning_content === undefined || m.reasoning_content === null || typeof m.reasoning_content === 'string',
      ),
    ],
    ['validate_regenerated_data.py:112-113 at least one assistant message', assistants.length > 0],
    [
      'validate_regenerated_data.py:114-115 the last message is the assistant’s',
      list.length > 0 && list[list.length - 1]!.role === 'assistant',
    ],
  ];
}

function broken(row: Row): string[] {
  return validatorRules(row)
    .filter(([, ok]) => !ok)
    .map(([rule]) => rule);
}

let answering = true;
let requests = 0;

const chat = useFakeServer((body, res) => {
  requests++;
  if (!answering) {
    res.writeHead(400, { 'content-type': 'application/json' });
    return res.end(JSON.stringify({ error: { message: 'this run must not ask' } }));
  }
  const msgs = (JSON.parse(body) as { messages: { content: string }[] }).messages;
  const last = msgs[msgs.length - 1]!.content;
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(
    JSON.stringify({
      choices: [{ message: { role: 'assistant', content: last === 'say nothing' ? '' : `answer:${last}` } }],
    }),
  );
});

const fx = useLocalHost('aerie-gen-sf-', { each: true });
let dir: string;
let host: LocalHost;

beforeEach(async () => {
  ({ dir, host } = fx);
  answering = true;
  requests = 0;
});

function job(): GenerateJob {
  return {
    host,
    baseUrl: chat.baseUrl,
    model: 'm',
    inputPath: join(dir, 'in.jsonl'),
    outDir: join(dir, 'out'),
    temperature: 0,
    maxTokens: 16,
    concurrency: 2,
    retries: 0,
    shardSize: 2,
    flushMs: 20,
  };
}

const u = (content: string) => ({ role: 'user', content });
const a = (content: string) => ({ role: 'assistant', content });

const INPUT = [
  { id: 'single', conversations: [u('q'), a('old')] },
  { id: 'multi', conversations: [u('q1'), a('old'), u('q2'), a('old')] },
  { id: 'system', conversations: [{ role: 'system', content: 'be brief' }, u('q'), a('old')] },
  { id: 'trailing-user', conversations: [u('q1'), a('old'), u('q2')] },
  { id: 'leading-assistant', conversations: [a('hello'), u('q'), a('old')] },
  {
    id: 'sharegpt',
    conversations: [
      { from: 'human', value: 'q' },
      { from: 'gpt', value: 'old' },
    ],
  },
  { id: 'nouser', conversations: [{ role: 'system', content: 's' }] },
  { id: 'empty-answer', conversations: [u('say nothing'), a('old')] },
  { id: '../unsafe', conversations: [u('q'), a('old')] },
];

async function rows(name: string): Promise<Row[]> {
  const text = await readFile(join(dir, 'out', name), 'utf8');
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Row);
}

async function expectSpecforgeShaped(): Promise<void> {
  const train = await rows('train.jsonl');
  expect(train.map((r) => r.id)).toEqual([
    'single',
    'multi',
    'system',
    'trailing-user',
    'leading-assistant',
    'sharegpt',
  ]);
  for (const r of train) expect(broken(r), `row ${String(r.id)} breaks SpecForge's validator`).toEqual([]);
  // Skipped and failed rows as SpecForge writes them: status and `error` (regenerate_train_data.py:67-72, 266-267).
  const skipped = await rows('train_skipped.jsonl');
  expect(skipped.map((r) => [r.id, r.status, typeof r.error, 'reason' in r])).toEqual([
    ['nouser', 'skipped', 'string', false],
    ['empty-answer', 'skipped', 'string', false],
  ]);
  const errors = await rows('train_error.jsonl');
  expect(errors.map((r) => [r.id, r.status, r.error])).toEqual([
    ['../unsafe', 'error', 'unsafe id: contains a path separator'],
  ]);
}

describe("generate's rows pass SpecForge's validator field rules", () => {
  it('train.jsonl rows are success rows SpecForge accepts; skipped and error rows say why in `error`', async () => {
    await writeFile(join(dir, 'in.jsonl'), INPUT.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const summary = await runGenerate(job());
    expect(summary.counts).toEqual({ input: 9, ok: 6, error: 1, skipped: 2, rejected: 0 });
    await expectSpecforgeShaped();
    expect((await rows('train_skipped.jsonl'))[1]!.error).toMatch(/answer at turn 2 is empty/);
  });

  it('the rules catch what the validator rejects (the judge can fail)', () => {
    expect(broken({ id: 'x', status: 'ok', conversations: [u('q'), a('r')] })).toEqual([
      'validate_regenerated_data.py:72-73 status is "success"',
    ]);
    expect(broken({ id: 'x', status: 'success', conversations: [u('q'), a('')] })).toEqual([
      'conversation_validation.py:28-36 every content is a non-empty string',
    ]);
    expect(broken({ id: 'x', status: 'success', conversations: [u('q'), u('q2'), a('r')] })).toEqual([
      'conversation_validation.py:44-55 roles alternate user, assistant, user, …',
    ]);
    expect(broken({ id: ' ', status: 'success', conversations: [u('q')] })).toEqual([
      'validate_regenerated_data.py:69-71 id is a non-empty string',
      'validate_regenerated_data.py:112-113 at least one assistant message',
      'validate_regenerated_data.py:114-115 the last message is the assistant’s',
    ]);
  });

  it('a resume over shards written with the old tags (status "ok", skipped `reason`) writes SpecForge tags, asking nothing', async () => {
    await writeFile(join(dir, 'in.jsonl'), INPUT.map((r) => JSON.stringify(r)).join('\n') + '\n');
    await runGenerate(job());
    const shardDir = join(dir, 'out', 'shards');
    // Make the shards what an older aerie wrote; the index would vouch for other bytes, so it goes
    // (a shard without an index line is re-vouched from its content, as after a lost append).
    for (const name of await readdir(shardDir)) {
      if (!/^(ok|skipped)-\d+\.jsonl$/.test(name)) continue;
      const text = await readFile(join(shardDir, name), 'utf8');
      const old = text
        .split('\n')
        .filter(Boolean)
        .map((l) => {
          const r = JSON.parse(l) as Row;
          if (r.status === 'success') r.status = 'ok';
          if (r.status === 'skipped') [r.reason, r.error] = [r.error, undefined];
          return JSON.stringify(r);
        });
      await writeFile(join(shardDir, name), old.join('\n') + '\n');
    }
    await rm(join(shardDir, 'index.jsonl'));
    for (const f of [
      'train.jsonl',
      'train_skipped.jsonl',
      'train_error.jsonl',
      'train_rejected.jsonl',
      'manifest.json',
    ])
      await rm(join(dir, 'out', f));
    expect(
      await readFile(
        join(
          shardDir,
          (await readdir(shardDir)).find((n) => n.startsWith('ok-'))!,
        ),
        'utf8',
      ),
    ).toContain('"status":"ok"');
    answering = false;
    requests = 0;
    const again = await runGenerate(job());
    expect(requests).toBe(0);
    expect(again.resumed).toBe(9);
    await expectSpecforgeShaped();
  });
});

describe('specforgeRowText', () => {
  it('rewrites old tags and leaves SpecForge-tagged rows byte for byte', () => {
    expect(specforgeRowText('{"id":"a","conversations":[],"status":"ok"}')).toBe(
      '{"id":"a","conversations":[],"status":"success"}',
    );
    expect(JSON.parse(specforgeRowText('{"id":"a","status":"ok","conversations":[]}'))).toEqual({
      id: 'a',
      status: 'success',
      conversations: [],
    });
    expect(
      JSON.parse(specforgeRowText('{"id":"a","conversations":[],"status":"skipped","reason":"no user turn"}')),
    ).toEqual({ id: 'a', conversations: [], status: 'skipped', error: 'no user turn' });
    for (const text of [
      '{"id":"a","conversations":[],"status":"success"}',
      '{"id":"a","conversations":[],"status":"skipped","error":"no user turn"}',
      '{"id":"a","conversations":[{"role":"user","content":"say \\"reason\\": or \\"status\\":\\"ok\\""}],"status":"success"}',
    ]) {
      expect(specforgeRowText(text)).toBe(text);
    }
  });
});
