import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { ProcRecord } from '../../src/hosts/host.js';
import {
  argvHash,
  assertLaunchId,
  newLaunchToken,
  launchIdOfRecordFile,
  launchPaths,
  parseExitFile,
  parsePidFile,
  parseProcRecord,
  procsDir,
  renderProcRecord,
} from '../../src/hosts/protocol/records.js';

const record: ProcRecord = {
  launchId: 'run-20240501.server.0',
  pid: 4242,
  pgid: 4242,
  startTime: '123456',
  argvHash: 'abc',
  argv: ['python3', '-m', 'sglang.launch_server'],
  logPath: '/w/runs/r/server.log',
  exitPath: '/w/.aerie/procs/run-20240501.server.0.exit',
  startedAt: '2024-05-01T00:00:00.000Z',
  host: 'local',
};

describe('launch ids', () => {
  it.each(['run-1.server.0', 'a', 'R_2.train.3', 'x'.repeat(200)])('accepts %s', (id) => {
    expect(() => assertLaunchId(id)).not.toThrow();
  });
  it.each(['', '..', '../etc/passwd', 'a/b', '.hidden', 'a b', "a'b", '$(x)', 'a\nb', '-rf', 'x'.repeat(201)])(
    'rejects %j',
    (id) => {
      expect(() => assertLaunchId(id)).toThrow(/invalid launch id/);
    },
  );
});

describe('paths', () => {
  it('lays out one launch under <workdir>/.aerie/procs', () => {
    expect(procsDir('/w/')).toBe('/w/.aerie/procs');
    expect(launchPaths('/w', 'r.server.0')).toEqual({
      dir: '/w/.aerie/procs',
      record: '/w/.aerie/procs/r.server.0.json',
      script: '/w/.aerie/procs/r.server.0.sh',
      pid: '/w/.aerie/procs/r.server.0.pid',
      exit: '/w/.aerie/procs/r.server.0.exit',
    });
  });
  it('validates the id before building a path', () => {
    expect(() => launchPaths('/w', '../x')).toThrow();
  });
  it('recognises record files only', () => {
    expect(launchIdOfRecordFile('r.server.0.json')).toBe('r.server.0');
    expect(launchIdOfRecordFile('.r.server.0.json.123.abcd.tmp')).toBeNull();
    expect(launchIdOfRecordFile('r.server.0.pid')).toBeNull();
  });
});

describe('file contents', () => {
  it('hashes argv as sha256 of its JSON', () => {
    expect(argvHash(['a', 'b c'])).toBe(createHash('sha256').update('["a","b c"]').digest('hex'));
  });
  it('parses the pid file with and without a start time', () => {
    expect(parsePidFile('4242 99887766\n')).toEqual({ pid: 4242, startTime: '99887766' });
    expect(parsePidFile('4242 \n')).toEqual({ pid: 4242, startTime: '' });
    expect(parsePidFile('')).toBeNull();
    expect(parsePidFile('1 5\n')).toBeNull();
    expect(parsePidFile('abc')).toBeNull();
  });
  it('reads the token a marking wrapper adds to the pid file (also without a start time)', () => {
    expect(parsePidFile('4242 99887766 r.train.0-00ff00ff00ff00ff\n')).toEqual({
      pid: 4242,
      startTime: '99887766',
      token: 'r.train.0-00ff00ff00ff00ff',
    });
    expect(parsePidFile('4242  0abc-1\n')).toEqual({ pid: 4242, startTime: '', token: '0abc-1' });
  });
  it('makes a fresh token per launch, of the launch id and 64 random bits', () => {
    const a = newLaunchToken('r.train.0');
    expect(a).toMatch(/^r\.train\.0-[0-9a-f]{16}$/);
    expect(newLaunchToken('r.train.0')).not.toBe(a);
  });
  it('parses exit codes', () => {
    expect(parseExitFile('0\n')).toBe(0);
    expect(parseExitFile('143\n')).toBe(143);
    expect(parseExitFile('')).toBeNull();
    expect(parseExitFile('x')).toBeNull();
  });
  it('round-trips a record', () => {
    expect(parseProcRecord(renderProcRecord(record))).toEqual(record);
    const marked = { ...record, token: 'r.server.0-0123456789abcdef' };
    expect(parseProcRecord(renderProcRecord(marked))).toEqual(marked);
  });
  it('loads a record written before launches were marked without inventing a token', () => {
    expect('token' in parseProcRecord(renderProcRecord(record))).toBe(false);
  });
  it('refuses a token that could become shell or grep syntax', () => {
    for (const token of ['a b', '$(x)', '', '-e', 5]) {
      expect(() => parseProcRecord(JSON.stringify({ ...record, token }))).toThrow(/token/);
    }
  });
  it('refuses a record that would signal pid 0, 1 or a bogus group', () => {
    for (const pgid of [0, 1, -1, 1.5]) {
      expect(() => parseProcRecord(JSON.stringify({ ...record, pgid }))).toThrow(/pgid/);
    }
    expect(() => parseProcRecord(JSON.stringify({ ...record, pid: '4242' }))).toThrow(/pid/);
    expect(() => parseProcRecord(JSON.stringify({ ...record, argv: 'python3' }))).toThrow(/argv/);
    expect(() => parseProcRecord(JSON.stringify({ ...record, launchId: '../x' }))).toThrow(/launch id/);
  });
});
