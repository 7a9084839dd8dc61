import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  PROC_STAT_SCAN,
  renderDetachedLaunch,
  renderGroupSignal,
  renderLaunchScript,
  wrapperArgv,
  type LaunchSpec,
} from '../../src/hosts/protocol/launch-script.js';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { parseProcStats } from '../../src/hosts/protocol/proc-stat.js';
import { launchPaths, parseExitFile, parsePidFile } from '../../src/hosts/protocol/records.js';
import { recordOf, until } from './proc-helpers.js';
import { useLocalHost } from '../support/local-host.js';
import { run } from '../support/processes.js';

const spec: LaunchSpec = {
  launchId: 'r1.server.0',
  argv: [
    'python3',
    '-m',
    'sglang.launch_server',
    '--model-path',
    "/models/it's here",
    '--served-model-name',
    '$(reboot)',
  ],
  env: { SGLANG_HS_DUMP_DIR: '/dev/shm/sglang_hs', HF_TOKEN: 'hf_`x`' },
  cwd: '/work dir',
  logPath: '/w/runs/r1/server.log',
  paths: launchPaths('/w', 'r1.server.0'),
};

describe('renderLaunchScript golden', () => {
  it('renders the wrapper with every value quoted', () => {
    expect(renderLaunchScript(spec)).toBe(
      [
        '# aerie launch r1.server.0',
        'trap : TERM INT HUP',
        'set -f',
        'mkdir -p /w/.aerie/procs /w/runs/r1 || exit 125',
        'aerie_stat=; read -r aerie_stat < /proc/$$/stat',
        'set -- $aerie_stat',
        `printf '%s %s\\n' "$$" "\${22:-}" > /w/.aerie/procs/r1.server.0.pid.tmp && mv -f /w/.aerie/procs/r1.server.0.pid.tmp /w/.aerie/procs/r1.server.0.pid || exit 125`,
        `{ cd '/work dir' && HF_TOKEN='hf_\`x\`' SGLANG_HS_DUMP_DIR='/dev/shm/sglang_hs' python3 -m sglang.launch_server --model-path '/models/it'\\''s here' --served-model-name '$(reboot)'; } < /dev/null >> /w/runs/r1/server.log 2>&1`,
        'aerie_code=$?',
        `printf '%s\\n' "$aerie_code" > /w/.aerie/procs/r1.server.0.exit.tmp && mv -f /w/.aerie/procs/r1.server.0.exit.tmp /w/.aerie/procs/r1.server.0.exit`,
        'exit "$aerie_code"',
        '',
      ].join('\n'),
    );
  });
  it('a marked launch: the token goes into the pid file and is exported to the command', () => {
    const lines = renderLaunchScript({ ...spec, token: 'r1.server.0-0123456789abcdef' }).split('\n');
    expect(lines[6]).toBe(
      `printf '%s %s %s\\n' "$$" "\${22:-}" r1.server.0-0123456789abcdef > /w/.aerie/procs/r1.server.0.pid.tmp && mv -f /w/.aerie/procs/r1.server.0.pid.tmp /w/.aerie/procs/r1.server.0.pid || exit 125`,
    );
    expect(lines[7]).toBe('AERIE_LAUNCH=r1.server.0-0123456789abcdef; export AERIE_LAUNCH');
    expect(lines[8]).toMatch(/^\{ cd '\/work dir' && HF_TOKEN=/);
  });
  it('refuses an env that sets AERIE_LAUNCH itself, and a token that is not one', () => {
    expect(() => renderLaunchScript({ ...spec, token: 't-1', env: { AERIE_LAUNCH: 'x' } })).toThrow(
      /env sets AERIE_LAUNCH.*remove it/,
    );
    expect(() => renderLaunchScript({ ...spec, token: '$(x)' })).toThrow(/invalid launch token/);
  });
  it('runs in the wrapper directory when no cwd is given', () => {
    expect(renderLaunchScript({ ...spec, cwd: undefined, env: undefined })).toContain(
      `{ python3 -m sglang.launch_server --model-path '/models/it'\\''s here' --served-model-name '$(reboot)'; } < /dev/null >>`,
    );
  });
  it('refuses relative paths, empty argv and bad env names', () => {
    expect(() => renderLaunchScript({ ...spec, logPath: 'server.log' })).toThrow(/logPath must be absolute/);
    expect(() => renderLaunchScript({ ...spec, cwd: 'rel' })).toThrow(/cwd must be absolute/);
    expect(() => renderLaunchScript({ ...spec, argv: [] })).toThrow(/empty argv/);
    expect(() => renderLaunchScript({ ...spec, env: { 'X;Y': '1' } })).toThrow(/environment variable name/);
  });
});

describe('shell commands for remote hosts (golden)', () => {
  it('starts the written wrapper under setsid, detached from the caller', () => {
    expect(wrapperArgv(spec.paths)).toEqual(['/bin/sh', '/w/.aerie/procs/r1.server.0.sh']);
    expect(renderDetachedLaunch(spec.paths)).toBe(
      'setsid /bin/sh /w/.aerie/procs/r1.server.0.sh < /dev/null > /dev/null 2>&1 &',
    );
    expect(renderDetachedLaunch(launchPaths('/my work', 'a'))).toBe(
      "setsid /bin/sh '/my work/.aerie/procs/a.sh' < /dev/null > /dev/null 2>&1 &",
    );
  });
  it('signals a group, never 0, 1 or a negative number', () => {
    expect(renderGroupSignal(4242, 'TERM')).toBe('kill -s TERM -- -4242');
    expect(renderGroupSignal(4242, 'KILL')).toBe('kill -s KILL -- -4242');
    for (const bad of [0, 1, -4242, 1.5, Number.NaN]) expect(() => renderGroupSignal(bad, 'KILL')).toThrow(/refusing/);
  });
});

// The wrapper is started by hand (sh -c renderDetachedLaunch), as SshHost starts it: that launch is the subject.
describe('the wrapper started the way SshHost starts it', () => {
  const fx = useLocalHost('aerie-wrap-', { each: true, name: 'test' });
  let dir: string;
  let host: LocalHost;
  beforeEach(() => {
    ({ dir, host } = fx);
  });

  it('writes pid and start time, logs output, records the exit code, and executes no injected text', async () => {
    const marker = join(dir, 'pwned');
    const paths = launchPaths(dir, 'w.1');
    const logPath = join(dir, 'logs', 'out.log');
    const argv = ['sh', '-c', 'echo "out:$1:$AERIE_V"; echo err >&2; exit 7', 'sh', `$(touch ${marker})`];
    const env = { AERIE_V: `'; touch ${marker}; '` };
    await mkdir(paths.dir, { recursive: true });
    await writeFile(paths.script, renderLaunchScript({ launchId: 'w.1', argv, env, logPath, paths }), { mode: 0o600 });

    await run('/bin/sh', ['-c', renderDetachedLaunch(paths)]);
    const pidInfo = await until('pid file', async () =>
      parsePidFile(await readFile(paths.pid, 'utf8').catch(() => '')),
    );
    try {
      const code = await until('exit file', async () => {
        const t = await readFile(paths.exit, 'utf8').catch(() => null);
        return t === null ? null : { code: parseExitFile(t) };
      });
      expect(code).toEqual({ code: 7 });
      expect(await readFile(logPath, 'utf8')).toBe(`out:$(touch ${marker}):'; touch ${marker}; '\nerr\n`);
      expect(pidInfo.startTime).toMatch(/^\d+$/);
      expect((await readdir(dir)).sort()).toEqual(['.aerie', 'logs']);
      expect((await readdir(paths.dir)).sort()).toEqual(['w.1.exit', 'w.1.pid', 'w.1.sh']);
    } finally {
      // The wrapper has normally ended by now; if not, stop its group by the recorded pid.
      await host.killGroup(recordOf(pidInfo.pid, pidInfo.startTime), { graceMs: 300 });
    }
  });

  it('leads its own session and process group while it runs', async () => {
    const paths = launchPaths(dir, 'w.2');
    await mkdir(paths.dir, { recursive: true });
    await writeFile(
      paths.script,
      renderLaunchScript({ launchId: 'w.2', argv: ['sleep', '60'], logPath: join(dir, 'l'), paths }),
    );
    await run('/bin/sh', ['-c', renderDetachedLaunch(paths)]);
    const { pid, startTime } = await until('pid file', async () =>
      parsePidFile(await readFile(paths.pid, 'utf8').catch(() => '')),
    );
    const record = recordOf(pid, startTime);
    try {
      const { stdout } = await run('/bin/sh', ['-c', PROC_STAT_SCAN]);
      const leader = parseProcStats(stdout).find((s) => s.pid === pid);
      expect(leader).toMatchObject({ pgrp: pid, session: pid, startTime });
    } finally {
      expect((await host.killGroup(record, { graceMs: 2000 })).groupEmpty).toBe(true);
    }
    expect(parseExitFile(await until('exit file', () => readFile(paths.exit, 'utf8').catch(() => null)))).toBe(143);
  });
});
