/**
 * SshHost against a real OpenSSH server on loopback: exec and quoting, files over SFTP and
 * through an exec prefix, the process protocol, port forwarding. No SSH mocks.
 */
import { existsSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { ExecTimeoutError } from '../../src/hosts/util/exec-errors.js';
import type { SshHost } from '../../src/hosts/ssh/ssh-host.js';
import { startFakeServer } from '../support/fake-server.js';
import { signalGroup } from '../support/processes.js';
import { useSshFixture, type SshFixture } from '../support/ssh-fixture.js';
import { groupMembers, isLive, startUnrelated, statOf, until } from './proc-helpers.js';

const ssh = useSshFixture();
let fx: SshFixture;
let host: SshHost;
let prefixed: SshHost;

beforeAll(() => {
  fx = ssh.fx;
  host = fx.host();
  // A real program that runs the rest of argv in a changed environment stands in for
  // `pct exec 129 --` / `docker exec NAME`: every command must go through it.
  prefixed = fx.host({ execPrefix: ['env', 'AERIE_IN_CONTAINER=1'] });
});

describe('exec', () => {
  it('runs argv with env, cwd and stdin, and reports exit codes like LocalHost', async () => {
    const r = await host.exec(['sh', '-c', 'printf "%s|" "$X" "$(pwd)"; cat; exit 3', 'sh'], {
      env: { X: 'x y' },
      cwd: '/tmp',
      stdin: 'input',
    });
    expect(r).toEqual({ code: 3, signal: null, stdout: 'x y|/tmp|input', stderr: '' });
    expect((await host.exec(['no-such-program-aerie'])).code).toBe(127);
    await expect(host.exec(['true'], { cwd: '/no/such/dir' })).rejects.toThrow(/working directory does not exist/);
  });

  it('passes a hostile model path through verbatim and runs nothing it contains', async () => {
    const marker = `${fx.dir}/injected`;
    const hostile = `/models/it's a "model" $(touch ${marker}) \`touch ${marker}\`; touch ${marker} & $HOME`;
    const r = await host.exec(['printf', '%s', hostile]);
    expect(r.stdout).toBe(hostile);
    // Files and detached launches take the same path through their own scripts.
    const dir = `${fx.dir}/work/${hostile.replace(/\//g, '_')}`;
    await host.mkdirp(dir);
    await host.writeFileAtomic(`${dir}/config.json`, '{}');
    expect((await host.stat(`${dir}/config.json`))?.size).toBe(2);
    expect((await host.list(dir)).map((f) => f.path)).toEqual([`${dir}/config.json`]);
    const { record } = await host.spawnDetached('inject-1', ['printf', '%s', hostile], {
      logPath: `${fx.dir}/work/inject.log`,
      env: { MODEL: hostile },
    });
    await until('the launch to end', async () => (await host.procStatus(record)).state === 'exited');
    expect((await host.readFile(`${fx.dir}/work/inject.log`)).toString()).toBe(hostile);
    expect(existsSync(marker)).toBe(false);
  });

  it('stops a command that outlives its timeout, with its whole process group', async () => {
    const started = Date.now();
    const pidFile = `${fx.dir}/timeout.pid`;
    const err = await host
      .exec(['sh', '-c', 'echo $$ > "$1"; sleep 60 & sleep 61; wait', 'sh', pidFile], { timeoutMs: 1000 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExecTimeoutError);
    expect(Date.now() - started).toBeLessThan(15_000);
    const pgid = Number((await host.readFile(pidFile)).toString().trim());
    expect(await groupMembers(pgid)).toEqual([]);
  });

  it('applies the exec prefix to every command', async () => {
    expect((await prefixed.exec(['sh', '-c', 'echo "$AERIE_IN_CONTAINER"'])).stdout).toBe('1\n');
    expect((await host.exec(['sh', '-c', 'echo "${AERIE_IN_CONTAINER:-none}"'])).stdout).toBe('none\n');
  });
});

describe.each([
  ['over SFTP', () => host],
  ['through the exec prefix', () => prefixed],
])('files %s', (_label, get) => {
  it('writes atomically, reads, stats, lists, tails, appends, renames and removes', async () => {
    const h = get();
    const dir = `${h.workdir}/files-${Math.random().toString(36).slice(2)}`;
    await h.mkdirp(`${dir}/sub`);
    await h.writeFileAtomic(`${dir}/a.txt`, 'héllo\n');
    expect((await h.readFile(`${dir}/a.txt`)).toString()).toBe('héllo\n');
    expect(await h.stat(`${dir}/a.txt`)).toMatchObject({ size: 7, isDirectory: false });
    expect(await h.stat(`${dir}/missing`)).toBeNull();
    await expect(h.readFile(`${dir}/missing`)).rejects.toMatchObject({ code: 'ENOENT' });
    expect((await h.list(dir)).map((f) => [f.path.slice(dir.length + 1), f.isDirectory])).toEqual([
      ['a.txt', false],
      ['sub', true],
    ]);
    // Offset 2 falls inside "é": the tail starts there and the next call continues.
    expect(await h.tailFrom(`${dir}/a.txt`, 1)).toEqual({ data: 'éllo\n', offset: 7 });
    expect(await h.tailFrom(`${dir}/nothing.log`, 0)).toEqual({ data: '', offset: 0 });
    await h.appendFile(`${dir}/a.txt`, 'more\n');
    expect((await h.readFile(`${dir}/a.txt`)).toString()).toBe('héllo\nmore\n');
    // Appends to one path at once land one after the other, none overwriting another.
    const lines = Array.from({ length: 12 }, (_, k) => `line ${k}\n`);
    await Promise.all(lines.map((l) => h.appendFile(`${dir}/many.txt`, l)));
    expect((await h.readFile(`${dir}/many.txt`)).toString()).toBe(lines.join(''));
    const binary = Buffer.from([0, 1, 2, 255, 10, 0]);
    await h.writeFileAtomic(`${dir}/b.bin`, binary);
    expect(Buffer.compare(await h.readFile(`${dir}/b.bin`), binary)).toBe(0);
    await h.rename(`${dir}/b.bin`, `${dir}/sub/c.bin`);
    expect(await h.stat(`${dir}/sub/c.bin`)).toMatchObject({ size: 6 });
    expect(await h.freeBytes(dir)).toBeGreaterThan(0);
    await h.remove(dir);
    expect(await h.stat(dir)).toBeNull();
  });
});

describe('process protocol', () => {
  it('launches detached, re-attaches by launch id, and stops only the recorded group while a same-named decoy survives', async () => {
    // The decoy: same program, same user, started by the test itself, not by aerie.
    const decoy = await startUnrelated(['sleep', '300']);
    try {
      const log = `${host.workdir}/sleeper.log`;
      const first = await host.spawnDetached('sleeper-1', ['sh', '-c', 'sleep 300 & sleep 300'], { logPath: log });
      expect(first.reattached).toBe(false);
      const again = await host.spawnDetached('sleeper-1', ['sh', '-c', 'sleep 300 & sleep 300'], { logPath: log });
      expect(again).toMatchObject({
        reattached: true,
        record: { pid: first.record.pid, startTime: first.record.startTime },
      });
      expect((await host.listLaunches()).map((r) => r.launchId)).toContain('sleeper-1');
      expect(await host.procStatus(first.record)).toEqual({ state: 'alive' });
      await until('the group to have its sleepers', async () => (await groupMembers(first.record.pgid)).length >= 3);

      const result = await host.killGroup(first.record, { graceMs: 2000 });
      expect(result).toEqual({ signals: ['TERM'], groupEmpty: true });
      expect(await groupMembers(first.record.pgid)).toEqual([]);
      expect((await host.procStatus(first.record)).state).not.toBe('alive');
      expect(await isLive(decoy.pid)).toBe(true);
    } finally {
      signalGroup(decoy.pgid, 'SIGKILL');
    }
  });

  it('names the holder of a port and reaches a loopback server through the forward', async () => {
    const server = await startFakeServer((_body, res) => res.end('through the tunnel'));
    const port = Number(new URL(server.baseUrl).port);
    try {
      const holder = await host.portHolder(port);
      expect(holder).toMatchObject({ listening: true, pid: process.pid });
      const base = await host.httpBase(port);
      expect(base).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(base).not.toBe(`http://127.0.0.1:${port}`);
      expect(await (await fetch(`${base}/`)).text()).toBe('through the tunnel');
    } finally {
      await server.close();
    }
    // Nothing listens any more: the forward refuses like a closed port would.
    await expect(fetch(`${await host.httpBase(port)}/`)).rejects.toThrow();
  });

  it('reports a host without nvidia-smi and passes', async () => {
    const inv = await host.gpuInventory();
    expect(inv).toMatchObject({ available: false, gpus: [], processes: [] });
    expect(inv.reason).toMatch(/nvidia-smi not found on gpu-test/);
    expect(await statOf(fx.sshd.pid)).not.toBeNull();
  });
});
