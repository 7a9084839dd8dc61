/**
 * What the capture tests share: a throw-away simulator target (config + the committed tokenizer
 * + make-target weights), a host folder staged the way aerie stages it (py/aerie_hs copied,
 * `python -m aerie_hs.sglang_hook plugin-dist`), and the host-side Python run for real
 * (tokens.py and selfcheck.py in .venv-specforge, the converter in plain python3).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BIN, MODEL, type Sim, tempDir } from './sim-sglang.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const PY = path.join(ROOT, 'py');
/** Has numpy, tokenizers and transformers (no torch): the demo's host-side Python. */
export const VENV_PY = path.join(ROOT, '.venv-specforge', 'bin', 'python');
export const DRAFT_IDS = [1, 7, 13];
/** The 0.5.23 launch aerie's extract stage makes (COMMON.md wave 3). */
export const CAPTURE_ARGS = [
  '--enable-return-aux-hidden-states',
  '--speculative-algorithm',
  'EAGLE3',
  '--return-aux-hidden-state-layer-ids',
  ...DRAFT_IDS.map(String),
  '--disable-radix-cache',
];

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function run(
  cmd: string,
  args: string[],
  opts: { env?: Record<string, string>; stdin?: string; cwd?: string } = {},
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: opts.cwd ?? ROOT,
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', HF_HUB_OFFLINE: '1', ...opts.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(opts.stdin ?? '');
  });
}

/** A target directory of our own: the example's config and tokenizer, weights from make-target. */
export async function makeTarget(): Promise<string> {
  const dir = await tempDir('aerie-sim-target-');
  for (const f of ['config.json', 'tokenizer.json', 'tokenizer_config.json'])
    await fs.copyFile(path.join(MODEL, f), path.join(dir, f));
  const r = await run(process.execPath, [BIN, 'make-target', dir]);
  if (r.code !== 0) throw new Error(`make-target failed: ${r.stderr}`);
  return dir;
}

/** The host folder aerie puts on the extraction launch's PYTHONPATH. */
export async function stagePlugin(): Promise<string> {
  const dir = await tempDir('aerie-py-');
  await fs.cp(path.join(PY, 'aerie_hs'), path.join(dir, 'aerie_hs'), {
    recursive: true,
    filter: (s) => !s.includes('__pycache__'),
  });
  const r = await run('python3', ['-m', 'aerie_hs.sglang_hook', 'plugin-dist', dir], { env: { PYTHONPATH: dir } });
  if (r.code !== 0) throw new Error(`plugin-dist failed: ${r.stderr}`);
  return dir;
}

export function captureEnv(
  pluginDir: string,
  dumpDir: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    PYTHONPATH: pluginDir,
    AERIE_HS_DUMP_DIR: dumpDir,
    AERIE_HS_AUX_LAYERS: JSON.stringify(DRAFT_IDS),
    ...extra,
  };
}

export interface IdsRow {
  id: string;
  input_ids: number[];
  loss_mask: number[];
}

export function jsonl(rows: unknown[]): string {
  return rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
}

export async function tokens(
  model: string,
  conversations: { id: string; conversations: unknown[] }[],
  maxLength = 512,
): Promise<IdsRow[]> {
  const r = await run(
    VENV_PY,
    ['-m', 'aerie_hs.tokens', '--model', model, '--chat-template', 'llama3', '--max-length', String(maxLength)],
    { env: { PYTHONPATH: PY }, stdin: jsonl(conversations) },
  );
  if (r.code !== 0) throw new Error(`tokens.py exited ${r.code}: ${r.stderr}`);
  return r.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as IdsRow);
}

export interface Verdict {
  ok: boolean;
  messages: string[];
  checks: Record<string, { ok: boolean; messages: string[]; figures?: Record<string, any> }>;
}

export async function selfcheck(
  model: string,
  dumps: string,
  ids: string,
  greedy: string,
): Promise<{ code: number | null; verdict: Verdict; stderr: string }> {
  const r = await run(
    VENV_PY,
    ['-m', 'aerie_hs.selfcheck', '--model', model, '--dumps', dumps, '--ids', ids, '--greedy', greedy],
    { env: { PYTHONPATH: PY } },
  );
  return { code: r.code, verdict: JSON.parse(r.stdout) as Verdict, stderr: r.stderr };
}

export async function convert(dumps: string, ids: string, out: string): Promise<Run & { lines: string[] }> {
  const r = await run(
    'python3',
    [
      '-m',
      'aerie_hs.ckpt',
      'convert',
      '--dumps',
      dumps,
      '--ids',
      ids,
      '--out',
      out,
      '--file-group-size',
      '4',
      '--hidden-size',
      '512',
    ],
    { env: { PYTHONPATH: PY } },
  );
  return { ...r, lines: r.stdout.trim().split('\n') };
}

export interface Turn {
  role: string;
  content: string;
}

export const PROMPTS = readFileSync(path.join(ROOT, 'examples', 'data', 'prompts.jsonl'), 'utf8')
  .trim()
  .split('\n')
  .slice(0, 6)
  .map((l) => JSON.parse(l) as { id: string; conversations: Turn[] });

/** The demo's regeneration: each assistant turn answered by the server at temperature 0.7. */
export async function regenerate(sim: Sim): Promise<{ id: string; conversations: Turn[] }[]> {
  const out = [];
  for (const p of PROMPTS) {
    const conv: Turn[] = [];
    for (const turn of p.conversations) {
      if (turn.role !== 'assistant') {
        conv.push(turn);
        continue;
      }
      const r = await sim.json('/v1/chat/completions', {
        model: 'x',
        messages: conv,
        temperature: 0.7,
        max_tokens: 96,
      });
      if (r.status !== 200) throw new Error(`chat completion: ${r.status} ${JSON.stringify(r.body)}`);
      conv.push({ role: 'assistant', content: r.body.choices[0].message.content as string });
    }
    out.push({ id: p.id, conversations: conv });
  }
  return out;
}

/** Extraction's requests: prefill by ids, rid = sample id, one greedy token. */
export async function prefill(sim: Sim, rows: IdsRow[]): Promise<{ id: string; greedy_next: number }[]> {
  const greedy = [];
  for (const row of rows) {
    const r = await sim.json('/generate', {
      input_ids: row.input_ids,
      rid: row.id,
      sampling_params: { max_new_tokens: 1, temperature: 0 },
    });
    if (r.status !== 200 || r.body.meta_info.prompt_tokens !== row.input_ids.length || r.body.output_ids.length !== 1) {
      throw new Error(`prefill of ${row.id}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
    }
    greedy.push({ id: row.id, greedy_next: r.body.output_ids[0] as number });
  }
  return greedy;
}
