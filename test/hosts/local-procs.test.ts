import { readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ProcRecord } from '../../src/hosts/host.js';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { argvHash, launchPaths, parseProcRecord } from '../../src/hosts/protocol/records.js';
import { groupMembers, isLive, processesMentioning, startUnrelated, statOf, stopAll, until } from './proc-helpers.js';
import { useLocalHost } from '../support/local-host.js';

const fx = useLocalHost('aerie-procs-', { each: true });
let dir: string;
let host: LocalHost;
/** Processes started outside aerie's records, stopped by their pgid after each test. */
let unrelated: ProcRecord[];

beforeEach(async () => {
  ({ dir, host } = fx);
  unrelated = [];
});

afterEach(async () => {
  await stopAll(host, await host.listLaunches());
  await stopAll(host, unrelated);
});

const tree = ['sh', '-c', 'echo started; echo to-stderr >&2; sleep 60 & sleep 60 & wait'];

async function logContains(logPath: string, text: string): Promise<boolean> {
  return (await readFile(logPath, 'utf8').catch(() => '')).includes(text);
}

describe('spawnDetached', () => {
  it('starts a process tree in its own group and records it', async () => {
    const logPath = join(dir, 'logs', 'server.log');
    const before = Date.now();
    const { record, reattached } = await host.spawnDetached('r.server.0', tree, { logPath });
    expect(reattached).toBe(false);

    const leader = await statOf(record.pid);
    expect(leader).toMatchObject({ pgrp: record.pid, session: record.pid, startTime: record.startTime });
    expect(record).toMatchObject({
      launchId: 'r.server.0',
      pgid: record.pid,
      argvHash: argvHash(tree),
      argv: tree,
      logPath,
      exitPath: launchPaths(dir, 'r.server.0').exit,
      host: 'local',
    });
    expect(Date.parse(record.startedAt)).toBeGreaterThanOrEqual(before - 1000);
    const onDisk = parseProcRecord(await readFile(join(dir, '.aerie/procs/r.server.0.json'), 'utf8'));
    expect(onDisk).toEqual(record);
    expect((await stat(launchPaths(dir, 'r.server.0').script)).mode & 0o777).toBe(0o600);

    await until('the tree (wrapper, sh, 2 sleeps)', async () => (await groupMembers(record.pgid)).length === 4);
    await until(
      'stdout and stderr in the log',
      async () => (await logContains(logPath, 'started')) && logContains(logPath, 'to-stderr'),
    );
    expect(await host.procStatus(record)).toEqual({ state: 'alive' });
  });

  it('passes env and cwd without letting them inject anything', async () => {
    const logPath = join(dir, 'env.log');
    const value = `it's $(touch ${dir}/pwned) \`x\``;
    const { record } = await host.spawnDetached('r.env.0', ['sh', '-c', 'printf "%s|" "$AERIE_T"; pwd'], {
      logPath,
      env: { AERIE_T: value },
      cwd: dir,
    });
    await until('exit', async () => (await host.procStatus(record)).state === 'exited');
    expect(await readFile(logPath, 'utf8')).toBe(`${value}|${dir}\n`);
    await expect(stat(join(dir, 'pwned'))).rejects.toThrow();
  });

  it('records the exit code of a short process', async () => {
    const { record } = await host.spawnDetached('r.short.0', ['sh', '-c', 'exit 3'], { logPath: join(dir, 's.log') });
    expect(record.startTime).toMatch(/^\d+$/);
    const status = await until('exited', async () => {
      const s = await host.procStatus(record);
      return s.state === 'exited' ? s : null;
    });
    expect(status).toEqual({ state: 'exited', code: 3 });
  });

  it('reports a program that cannot run as exited 127 with the reason in the log', async () => {
    const logPath = join(dir, 'missing.log');
    const { record } = await host.spawnDetached('r.missing.0', ['/nonexistent/python3', '-m', 'x'], { logPath });
    expect(
      await until('exited', async () => {
        const s = await host.procStatus(record);
        return s.state === 'exited' ? s : null;
      }),
    ).toEqual({ state: 'exited', code: 127 });
    expect(await readFile(logPath, 'utf8')).toMatch(/nonexistent\/python3/);
  });

  it('re-attaches by launchId and starts nothing new', async () => {
    const logPath = join(dir, 'a.log');
    const first = await host.spawnDetached('r.server.1', tree, { logPath });
    await until('the tree', async () => (await groupMembers(first.record.pgid)).length === 4);
    const script = launchPaths(dir, 'r.server.1').script;
    expect(await processesMentioning(script)).toEqual([first.record.pid]);

    const again = await host.spawnDetached('r.server.1', tree, { logPath });
    expect(again).toEqual({ record: first.record, reattached: true });
    expect(await groupMembers(first.record.pgid)).toHaveLength(4);
    expect(await processesMentioning(script)).toEqual([first.record.pid]);
  });

  it('re-attaches to an exited launch without relaunching it', async () => {
    const first = await host.spawnDetached('r.done.0', ['sh', '-c', 'echo once'], { logPath: join(dir, 'd.log') });
    await until('exited', async () => (await host.procStatus(first.record)).state === 'exited');
    const again = await host.spawnDetached('r.done.0', ['sh', '-c', 'echo once'], { logPath: join(dir, 'd.log') });
    expect(again).toEqual({ record: first.record, reattached: true });
    expect(await host.procStatus(again.record)).toEqual({ state: 'exited', code: 0 });
    expect(await readFile(join(dir, 'd.log'), 'utf8')).toBe('once\n');
  });

  it('starts one process for two concurrent launches with one launchId', async () => {
    const opts = { logPath: join(dir, 'c.log') };
    const [a, b] = await Promise.all([
      host.spawnDetached('r.c.0', tree, opts),
      host.spawnDetached('r.c.0', tree, opts),
    ]);
    expect(a.record).toEqual(b.record);
    expect([a.reattached, b.reattached].sort()).toEqual([false, true]);
    await until('the tree', async () => (await groupMembers(a.record.pgid)).length === 4);
    expect(await processesMentioning(launchPaths(dir, 'r.c.0').script)).toEqual([a.record.pid]);
  });

  it('recovers the record from the pid file when the launcher died before writing it', async () => {
    const first = await host.spawnDetached('r.server.2', tree, { logPath: join(dir, 'b.log') });
    await until('the tree', async () => (await groupMembers(first.record.pgid)).length === 4);
    await rm(launchPaths(dir, 'r.server.2').record); // as if the worker died right after the launch

    const fresh = fx.hostAt(''); // a new worker process: a second LocalHost on the same workdir
    const recovered = await fresh.spawnDetached('r.server.2', tree, { logPath: join(dir, 'b.log') });
    expect(recovered.reattached).toBe(true);
    expect(recovered.record).toMatchObject({
      pid: first.record.pid,
      pgid: first.record.pgid,
      startTime: first.record.startTime,
    });
    // The wrapper's pid file carries the launch's token, so the adopted record still finds escaped processes.
    expect(first.record.token).toMatch(/^r\.server\.2-[0-9a-f]{16}$/);
    expect(recovered.record.token).toBe(first.record.token);
    expect(await fresh.findLaunch('r.server.2')).toEqual(recovered.record);
    expect(await fresh.procStatus(recovered.record)).toEqual({ state: 'alive' });
    expect(await processesMentioning(launchPaths(dir, 'r.server.2').script)).toEqual([first.record.pid]);
  });

  it('refuses unsafe launch ids before touching anything', async () => {
    for (const id of ['../escape', 'a/b', '', 'a b']) {
      await expect(host.spawnDetached(id, ['true'], { logPath: join(dir, 'x.log') })).rejects.toThrow(
        /invalid launch id/,
      );
    }
    expect(await host.listLaunches()).toEqual([]);
  });

  it('lists and finds launches', async () => {
    const a = await host.spawnDetached('r.a.0', ['sh', '-c', 'exit 0'], { logPath: join(dir, 'a.log') });
    const b = await host.spawnDetached('r.b.0', ['sh', '-c', 'exit 0'], { logPath: join(dir, 'b.log') });
    expect(await host.listLaunches()).toEqual([a.record, b.record]);
    expect(await host.findLaunch('r.b.0')).toEqual(b.record);
    expect(await host.findLaunch('r.none.0')).toBeNull();
  });
});

describe('procStatus identity', () => {
  it('says gone for a recycled identity (same pid, other start time)', async () => {
    const { record } = await host.spawnDetached('r.id.0', ['sleep', '60'], { logPath: join(dir, 'i.log') });
    // The record of an earlier launch whose leader pid the live one now holds: another start time, another token.
    const impostor: ProcRecord = {
      ...record,
      startTime: String(Number(record.startTime) + 1),
      exitPath: join(dir, 'no-exit'),
      token: 'r.id.0-0123456789abcdef',
    };
    expect(await host.procStatus(impostor)).toEqual({ state: 'gone' });
    // and killGroup refuses to touch the live process behind that pid
    expect(await host.killGroup(impostor, { graceMs: 200 })).toEqual({ signals: [], groupEmpty: true });
    expect(await isLive(record.pid)).toBe(true);
    expect(await host.procStatus(record)).toEqual({ state: 'alive' });
  });
});

describe('killGroup', () => {
  it('stops the wrapper and all children with TERM; the exit code is recorded', async () => {
    const { record } = await host.spawnDetached('r.k.0', tree, { logPath: join(dir, 'k.log') });
    await until('the tree', async () => (await groupMembers(record.pgid)).length === 4);
    const result = await host.killGroup(record, { graceMs: 5000 });
    expect(result).toEqual({ signals: ['TERM'], groupEmpty: true });
    expect(await groupMembers(record.pgid)).toEqual([]);
    expect(
      await until('exit status', async () => {
        const s = await host.procStatus(record);
        return s.state === 'exited' ? s : null;
      }),
    ).toEqual({ state: 'exited', code: 143 });
  });

  it('uses KILL for a child that ignores TERM, and spares a process outside the group', async () => {
    const bystander = await startUnrelated(['sleep', '60']);
    unrelated.push(bystander);
    const stubborn = ['sh', '-c', `trap '' TERM; sleep 60 & echo ready; wait`];
    const logPath = join(dir, 'stubborn.log');
    const { record } = await host.spawnDetached('r.k.1', stubborn, { logPath });
    await until('ready', () => logContains(logPath, 'ready'));

    const result = await host.killGroup(record, { graceMs: 400 });
    expect(result).toEqual({ signals: ['TERM', 'KILL'], groupEmpty: true });
    expect(await groupMembers(record.pgid)).toEqual([]);
    expect((await host.procStatus(record)).state).not.toBe('alive');

    expect(await isLive(bystander.pid)).toBe(true);
    expect(await host.killGroup(bystander, { graceMs: 2000 })).toEqual({ signals: ['TERM'], groupEmpty: true });
  });

  it('stops children that outlive their leader', async () => {
    const logPath = join(dir, 'orphans.log');
    // The command backgrounds a sleep and exits; the wrapper then writes the exit file and ends.
    const { record } = await host.spawnDetached('r.k.2', ['sh', '-c', 'sleep 60 & echo $!'], { logPath });
    // Not 'exited' while the sleep runs: the launch still has a process (in its group, so not escaped).
    expect(
      await until('leader exit', async () => {
        const s = await host.procStatus(record);
        // The wrapper writes the exit file a moment after the command ends: wait for it too.
        return s.state === 'orphans' && s.code !== null ? s : null;
      }),
    ).toEqual({ state: 'orphans', code: 0, processes: 1, escaped: 0 });
    const orphan = Number((await readFile(logPath, 'utf8')).trim());
    expect((await statOf(orphan))?.pgrp).toBe(record.pgid);

    expect(await host.killGroup(record, { graceMs: 2000 })).toEqual({ signals: ['TERM'], groupEmpty: true });
    expect(await isLive(orphan)).toBe(false);
    expect(await host.procStatus(record)).toEqual({ state: 'exited', code: 0 });
  });

  it('an unmarked record (written before launches carried a token) is stopped by its group alone, as before', async () => {
    const logPath = join(dir, 'old.log');
    const { record } = await host.spawnDetached('r.k.4', ['sh', '-c', 'sleep 60 & echo $!'], { logPath });
    const { token: _token, ...old } = record;
    await until('leader exit', async () => (await host.procStatus(old)).state === 'exited');
    expect(await host.killGroup(old, { graceMs: 2000 })).toEqual({ signals: ['TERM'], groupEmpty: true });
    expect(await host.procStatus(old)).toEqual({ state: 'exited', code: 0 });
  });

  it('sends nothing to a group that is already empty', async () => {
    const { record } = await host.spawnDetached('r.k.3', ['sh', '-c', 'exit 0'], { logPath: join(dir, 'e.log') });
    await until('exit', async () => (await host.procStatus(record)).state === 'exited');
    await until('group empty', async () => (await groupMembers(record.pgid)).length === 0);
    expect(await host.killGroup(record)).toEqual({ signals: [], groupEmpty: true });
  });
});
