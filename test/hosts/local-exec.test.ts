import { realpath, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { ExecAbortedError, ExecTimeoutError } from '../../src/hosts/util/exec-errors.js';
import { execLocal } from '../../src/hosts/local/exec.js';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { TailBuffer } from '../../src/hosts/util/tail-buffer.js';
import { isLive, recordOf, statOf, until } from './proc-helpers.js';
import { useLocalHost } from '../support/local-host.js';

const fx = useLocalHost('aerie-exec-', { each: true, realpath: true });
let dir: string;
let host: LocalHost;
beforeEach(async () => {
  ({ dir, host } = fx);
});

/** A command tree that prints "<its pgid> <its start time> <grandchild pid>" and then waits on the grandchild. */
const treeThatPrintsItself = ['sh', '-c', `read -r s < /proc/$$/stat; set -- $s; sleep 60 & echo "$$ \${22} $!"; wait`];

describe('exec', () => {
  it('returns code, stdout and stderr without a shell in between', async () => {
    const r = await host.exec(['sh', '-c', 'echo out; echo err >&2; exit 4']);
    expect(r).toEqual({ code: 4, signal: null, stdout: 'out\n', stderr: 'err\n' });
    const literal = await host.exec(['printf', '%s', '$(echo no) *']);
    expect(literal.stdout).toBe('$(echo no) *');
  });

  it('merges env over the worker environment and runs in cwd', async () => {
    const r = await host.exec(['sh', '-c', 'echo "$AERIE_X"; pwd; command -v sh >/dev/null && echo path-kept'], {
      env: { AERIE_X: 'x y' },
      cwd: dir,
    });
    expect(r.stdout).toBe(`x y\n${dir}\npath-kept\n`);
  });

  it('feeds stdin', async () => {
    expect((await host.exec(['cat'], { stdin: 'line 1\nline 2\n' })).stdout).toBe('line 1\nline 2\n');
  });

  it('answers 127 for a missing program, like a shell would over SSH', async () => {
    const r = await host.exec(['aerie-no-such-program-xyz']);
    expect(r.code).toBe(127);
    expect(r.stderr).toMatch(/not found/);
  });

  it('rejects a missing working directory with a clear message', async () => {
    await expect(host.exec(['true'], { cwd: join(dir, 'nope') })).rejects.toThrow(/working directory does not exist/);
  });

  it('on timeout stops the whole process group, grandchildren included', async () => {
    const err = await host.exec(treeThatPrintsItself, { timeoutMs: 300 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExecTimeoutError);
    const [pgid, startTime, grandchild] = (err as ExecTimeoutError).stdout.trim().split(' ');
    try {
      await until('grandchild gone', async () => !(await isLive(Number(grandchild))), 5000);
    } finally {
      await host.killGroup(recordOf(Number(pgid), startTime), { graceMs: 300 });
    }
  });

  it('on abort stops the whole process group', async () => {
    const ac = new AbortController();
    const ready = join(dir, 'ready');
    const argv = [
      'sh',
      '-c',
      `read -r s < /proc/$$/stat; set -- $s; sleep 60 & echo "$$ \${22} $!"; touch ${ready}; wait`,
    ];
    const pending = host.exec(argv, { signal: ac.signal });
    await until('the tree to start', () =>
      stat(ready).then(
        () => true,
        () => false,
      ),
    );
    ac.abort();
    const err = await pending.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ExecAbortedError);
    const [pgid, startTime, grandchild] = (err as ExecAbortedError).stdout.trim().split(' ');
    try {
      await until('grandchild gone', async () => !(await isLive(Number(grandchild))), 5000);
    } finally {
      await host.killGroup(recordOf(Number(pgid), startTime), { graceMs: 300 });
    }
  });

  it('rejects at once when already aborted', async () => {
    const ac = new AbortController();
    ac.abort();
    await expect(host.exec(['true'], { signal: ac.signal })).rejects.toBeInstanceOf(ExecAbortedError);
  });

  it('keeps only the last bytes of a large output', async () => {
    const r = await execLocal(
      ['sh', '-c', 'i=0; while [ $i -lt 300 ]; do echo "line $i"; i=$((i+1)); done'],
      {},
      { outputCap: 100 },
    );
    expect(r.stdout).toHaveLength(100);
    expect(r.stdout.endsWith('line 299\n')).toBe(true);
  });

  it('caps at 4 MiB by default', async () => {
    const r = await host.exec(['sh', '-c', 'head -c 5000000 /dev/zero | tr "\\0" a; printf END']);
    expect(r.stdout).toHaveLength(4 * 1024 * 1024);
    expect(r.stdout.endsWith('aEND')).toBe(true);
  });

  it('does not block the event loop while a command runs', async () => {
    let ticks = 0;
    const t = setInterval(() => ticks++, 10);
    await host.exec(['sleep', '0.3']);
    clearInterval(t);
    expect(ticks).toBeGreaterThanOrEqual(5);
  });
});

describe('TailBuffer', () => {
  it('drops from the front across and within chunks', () => {
    const b = new TailBuffer(5);
    b.push(Buffer.from('abc'));
    b.push(Buffer.from('def'));
    expect(b.text()).toBe('bcdef');
    b.push(Buffer.from('0123456789'));
    expect(b.text()).toBe('56789');
    expect(b.dropped).toBe(11);
  });
});

describe('process helpers used by these tests', () => {
  it('read this process', async () => {
    expect((await statOf(process.pid))?.pid).toBe(process.pid);
  });
});
