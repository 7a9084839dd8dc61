/**
 * Preflight and `aerie doctor`: every problem at once, each with its fix, against a
 * LocalHost and against a real sshd; the disk estimate from the generate input.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { estimateDisk, launcherScript, moduleLaunch, runPreflight } from '../../src/activities/preflight.js';
import { doctorCommand } from '../../src/cli/doctor.js';
import { AERIE_HOME } from '../../src/config/load.js';
import { HostPool } from '../../src/hosts/index.js';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { demoConfig } from '../support/demo-config.js';
import { startFakeServer } from '../support/fake-server.js';
import { useLocalHost } from '../support/local-host.js';
import { useSshFixture, type SshFixture } from '../support/ssh-fixture.js';

const local = useLocalHost('aerie-preflight-');
const ssh = useSshFixture();
let work: string;
let fx: SshFixture;

beforeAll(() => {
  work = local.dir;
  fx = ssh.fx;
});

describe('launcher analysis and the disk estimate', () => {
  it('tells module launchers from script launchers', () => {
    expect(moduleLaunch(['/opt/venv/bin/python', '-m', 'sglang.launch_server'])).toEqual({
      interpreter: '/opt/venv/bin/python',
      module: 'sglang.launch_server',
    });
    expect(launcherScript(['torchrun', '--standalone', '--nproc_per_node', '8', 'scripts/train_eagle3.py'])).toBe(
      'scripts/train_eagle3.py',
    );
    expect(launcherScript(['python3', '{run_dir}/train.py'])).toBeNull();
    expect(launcherScript(['specforge'])).toBeNull();
  });

  it('estimates hidden states as tokens × 8 × hidden bytes, tokens from the input size', () => {
    // 4 MB of JSONL ≈ 1M tokens; Llama-3.1-8B (H 4096) keeps 32 KiB per token.
    const e = estimateDisk({
      inputBytes: 4_000_000,
      inputLines: 1000,
      maxLength: 2048,
      hiddenSize: 4096,
      extractConcurrency: 8,
    });
    expect(e.tokens).toBe(1_000_000);
    expect(e.hiddenBytes).toBe(1_000_000 * 32 * 1024);
    // The capture's dump holds aux 3H + final H in bf16: 8·H bytes a token, max-length tokens each.
    expect(e.dumpBytes).toBe(8 * 2048 * 8 * 4096);
    // num-samples takes a share of the file; max-length caps each sample.
    expect(
      estimateDisk({
        inputBytes: 4_000_000,
        inputLines: 1000,
        numSamples: 100,
        maxLength: 2048,
        hiddenSize: 4096,
        extractConcurrency: 1,
      }).tokens,
    ).toBe(100_000);
    expect(
      estimateDisk({ inputBytes: 4_000_000, inputLines: 1000, maxLength: 16, hiddenSize: 4096, extractConcurrency: 1 })
        .tokens,
    ).toBe(16_000);
  });
});

describe('preflight on a LocalHost', () => {
  it('passes the demo config', async () => {
    const config = demoConfig(join(work, 'ok'), await freePort());
    const report = await runPreflight(local.hostAt('ok'), config, 'pf-ok');
    expect(report.problems).toEqual([]);
    expect(report.checks.join('\n')).toMatch(/disk: .* free in .*, about .* needed/);
  });

  it('reports every problem at once, each with a fix', async () => {
    // A listener of this process holds the port: preflight must name this pid as its holder.
    const busy = await startFakeServer((_body, res) => res.end());
    const port = Number(new URL(busy.baseUrl).port);
    try {
      const config = demoConfig(join(work, 'bad'), port, (c) => {
        c.server.launcher = ['python3', '-m', 'sglang.launch_server'];
        c.stages.train.launcher = ['torchrun', '--nproc_per_node', '8', 'scripts/train_eagle3.py'];
        c.target['model-path'] = join(work, 'no-such-model');
        c.stages.deploy['speculative-algorithm'] = 'EAGLE';
        c.stages.deploy['draft-model-path'] = join(AERIE_HOME, 'test', 'fixtures', 'eagle3-drafter');
        (c.stages.extract as { 'hidden-size'?: number })['hidden-size'] = 1_000_000_000;
      });
      const report = await runPreflight(local.hostAt('bad'), config, 'pf-bad');
      const text = report.problems.join('\n');
      expect(text).toMatch(/server\.launcher: .*python3 cannot import sglang\.launch_server .*Fix:/);
      expect(text).toMatch(
        /stages\.train\.launcher: "torchrun" is not an executable|stages\.train\.launcher: the entry point scripts\/train_eagle3\.py does not exist/,
      );
      expect(text).toMatch(/target\.model-path: .*no-such-model\/config\.json does not exist.*Fix:/);
      expect(text).toMatch(/stages\.deploy\.speculative-algorithm: .*EAGLE3/);
      expect(text).toMatch(new RegExp(`server\\.port: ${port} on local is held by pid ${process.pid}.*Fix:`));
      expect(text).toMatch(/disk: the run needs about .*hidden states ≈ \d+ tokens × 8 × hidden 1000000000.*Fix:/);
      expect(report.problems.length).toBeGreaterThanOrEqual(6);
      for (const p of report.problems) expect(p).toMatch(/Fix:|fix:|EAGLE3/);
    } finally {
      await busy.close();
    }
  });
});

describe('preflight and doctor over SSH', () => {
  function sshConfigDoc(workdir: string, port: number, knownHosts = fx.knownHosts) {
    const c = demoConfig(workdir, port) as unknown as Record<string, any>;
    c.hosts = {
      gpu: {
        kind: 'ssh',
        ssh: { host: fx.alias, 'config-file': fx.sshConfig, 'known-hosts-file': knownHosts },
        workdir,
      },
    };
    c.target.host = 'gpu';
    return c;
  }

  it('names the SSH endpoint and the verified host key', async () => {
    const hosts = new HostPool();
    try {
      const doc = sshConfigDoc(join(work, 'ssh-ok'), await freePort());
      const report = await runPreflight(hosts.get(doc as never), doc as never, 'pf-ssh');
      expect(report.problems).toEqual([]);
      expect(report.checks[0]).toContain(`reachable over SSH: root@127.0.0.1:${fx.sshd.port}`);
      expect(report.checks[0]).toContain(fx.sshd.hostKey.fingerprint);
    } finally {
      await hosts.closeAll();
    }
  });

  it('aerie doctor prints the checks and exits 0, or exits 1 naming the unknown host key', async () => {
    const good = join(work, 'doctor-ok.yaml');
    await writeFile(good, stringify(sshConfigDoc(join(work, 'doctor-ok'), await freePort())));
    let out = '';
    expect(await doctorCommand(good, (s) => (out += s))).toBe(0);
    expect(out).toMatch(/ok {7}host gpu reachable over SSH/);
    expect(out).toMatch(/no problems found/);

    const emptyKnown = join(work, 'empty_known_hosts');
    await writeFile(emptyKnown, '');
    const bad = join(work, 'doctor-bad.yaml');
    await writeFile(bad, stringify(sshConfigDoc(join(work, 'doctor-bad'), await freePort(), emptyKnown)));
    out = '';
    expect(await doctorCommand(bad, (s) => (out += s))).toBe(1);
    expect(out).toContain('PROBLEM  hosts.gpu.ssh:');
    expect(out).toContain(fx.sshd.hostKey.fingerprint);
    expect(out).toMatch(/1 problem found/);
  });
});
