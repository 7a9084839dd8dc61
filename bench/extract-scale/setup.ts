/** bench/extract-scale.ts's set-up (not timed): the throw-away target, the input, and the counting relay in front of sshd. */
import { spawnSync } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { join, resolve } from 'node:path';
import { freePort } from '../../src/temporal/dev-server.js';

const ROOT = resolve(import.meta.dirname, '../..');
const BASE_MODEL = join(ROOT, 'examples/models/sim-llama-8b');

/** sim-llama-8b's config and tokenizer with hidden_size changed, weights from `aerie-sim make-target`. */
export async function makeTarget(dir: string, hidden: number): Promise<void> {
  await mkdir(dir, { recursive: true });
  const cfg = JSON.parse(await readFile(join(BASE_MODEL, 'config.json'), 'utf8')) as Record<string, unknown>;
  cfg.hidden_size = hidden;
  await writeFile(join(dir, 'config.json'), JSON.stringify(cfg, null, 2) + '\n');
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) await copyFile(join(BASE_MODEL, f), join(dir, f));
  const r = spawnSync(process.execPath, [join(ROOT, 'bin/aerie-sim.mjs'), 'make-target', dir], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`make-target failed: ${r.stderr}`);
}

/** examples/data/prompts.jsonl cycled to `samples` rows under new ids. */
export async function writeInput(path: string, samples: number): Promise<void> {
  const prompts = (await readFile(join(ROOT, 'examples/data/prompts.jsonl'), 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { id: string });
  const out = createWriteStream(path);
  for (let i = 0; i < samples; i++) {
    const p = prompts[i % prompts.length]!;
    if (!out.write(JSON.stringify({ ...p, id: `${p.id}-r${Math.floor(i / prompts.length)}` }) + '\n'))
      await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((r, j) => out.end((e?: Error | null) => (e ? j(e) : r())));
}

/** A TCP relay in front of sshd that counts what crosses it, both ways. */
export async function countingRelay(
  targetPort: number,
): Promise<{ port: number; bytes: { up: number; down: number }; close(): Promise<void> }> {
  const bytes = { up: 0, down: 0 };
  const socks = new Set<net.Socket>();
  const server = net.createServer((c) => {
    const u = net.connect(targetPort, '127.0.0.1');
    for (const s of [c, u]) {
      socks.add(s);
      s.on('close', () => socks.delete(s));
      s.on('error', () => (s === c ? u : c).destroy());
    }
    c.on('data', (d: Buffer) => (bytes.up += d.length));
    u.on('data', (d: Buffer) => (bytes.down += d.length));
    c.pipe(u);
    u.pipe(c);
  });
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return {
    port,
    bytes,
    async close() {
      for (const s of socks) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
