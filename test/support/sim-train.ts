/**
 * Shared by the aerie-sim train tests: run `node bin/aerie-sim.mjs train <v0.2 flags>` in its
 * own process group as aerie does, a tiny target/draft/data set, and a checkpoint reader that
 * checks what aerie's verifier checks.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseSafetensorsHeader, safetensorsHeaderLength, verifyDrafter } from '../../src/stages/train/drafter.js';
import { segmentBases, type SegmentListing } from '../../src/stages/train/v02-checkpoints.js';
import { type TrainLaunch } from '../../src/stages/train/launch.js';
import { makeWorkdir } from './workdir.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const BIN = path.join(ROOT, 'bin/aerie-sim.mjs');
const LAUNCHER = [process.execPath, BIN, 'train'];
const FAST = { AERIE_SIM_TIME_SCALE: '0.002' };

export interface Done {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

const live: ChildProcess[] = [];

export function start(argv: string[], env: Record<string, string> = {}): { child: ChildProcess; done: Promise<Done> } {
  const [cmd, ...rest] = argv;
  const child = spawn(cmd!, rest, {
    cwd: ROOT,
    env: { ...process.env, ...FAST, ...env },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const done = new Promise<Done>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })),
  );
  return { child, done };
}

export const run = (argv: string[], env: Record<string, string> = {}): Promise<Done> => start(argv, env).done;

export function killLive(): void {
  for (const c of live.splice(0)) {
    if (c.exitCode === null && c.signalCode === null && c.pid) {
      try {
        process.kill(-c.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
  }
}

export async function waitFor(cond: () => boolean | Promise<boolean>, what: string, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A checkpoint as aerie's verifier sees it: its files, config, drafter problems and whether the weights are whole. */
export async function readCheckpoint(
  dir: string,
): Promise<{ config: Record<string, unknown>; problems: string[]; files: string[]; whole: boolean }> {
  const files = (await fs.readdir(dir)).sort();
  const config = JSON.parse(await fs.readFile(path.join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  const fh = await fs.open(path.join(dir, 'model.safetensors'), 'r');
  try {
    const first8 = Buffer.alloc(8);
    await fh.read(first8, 0, 8, 0);
    const n = safetensorsHeaderLength(first8);
    const buf = Buffer.alloc(8 + n);
    await fh.read(buf, 0, 8 + n, 0);
    const parsed = parseSafetensorsHeader(buf);
    const ends = Object.entries(parsed.header)
      .filter(([k]) => k !== '__metadata__')
      .map(([, v]) => (v as { data_offsets: [number, number] }).data_offsets[1]);
    const whole = (await fh.stat()).size === 8 + n + Math.max(...ends);
    return { config, problems: verifyDrafter(config, parsed.header), files, whole };
  } finally {
    await fh.close();
  }
}

/** A scratch dir with a target config, a draft config and 10 rows of data. */
export async function makeFixture(): Promise<string> {
  const tmp = await makeWorkdir('aerie-train-');
  await fs.mkdir(path.join(tmp, 'target'));
  await fs.writeFile(
    path.join(tmp, 'target/config.json'),
    JSON.stringify({ architectures: ['LlamaForCausalLM'], hidden_size: 8, vocab_size: 64 }),
  );
  const draft = {
    architectures: ['LlamaForCausalLMEagle3'],
    model_type: 'llama',
    hidden_size: 8,
    intermediate_size: 16,
    num_attention_heads: 2,
    num_key_value_heads: 2,
    num_hidden_layers: 1,
    vocab_size: 64,
    draft_vocab_size: 16,
    max_position_embeddings: 512,
  };
  await fs.writeFile(path.join(tmp, 'draft.json'), JSON.stringify(draft));
  const rows = Array.from({ length: 10 }, (_, i) =>
    JSON.stringify({
      id: `s${i}`,
      conversations: [
        { role: 'user', content: `q${i}` },
        { role: 'assistant', content: `a${i}` },
      ],
    }),
  );
  await fs.writeFile(path.join(tmp, 'data.jsonl'), `${rows.join('\n')}\n`);
  return tmp;
}

/** 10 rows, batch 3: 4 steps an epoch, 8 in all. */
export function launch(tmp: string, outputDir: string, over: Partial<TrainLaunch> = {}): TrainLaunch {
  return {
    launcher: LAUNCHER,
    targetModelPath: path.join(tmp, 'target'),
    draftModelConfig: path.join(tmp, 'draft.json'),
    trainDataPath: path.join(tmp, 'data.jsonl'),
    outputDir,
    chatTemplate: 'llama3',
    maxLength: 512,
    numEpochs: 2,
    batchSize: 3,
    learningRate: 1e-4,
    tttLength: 7,
    tpSize: 1,
    saveInterval: 3,
    extraArgs: [],
    ...over,
  };
}

export async function listSegments(outputDir: string): Promise<SegmentListing[]> {
  const top = await fs.readdir(outputDir);
  const segs: SegmentListing[] = [{ dir: outputDir, baseStep: 0, entries: top }];
  for (const base of segmentBases(top)) {
    const dir = path.join(outputDir, `resume_step_${base}`);
    segs.push({ dir, baseStep: base, entries: await fs.readdir(dir) });
  }
  return segs;
}
