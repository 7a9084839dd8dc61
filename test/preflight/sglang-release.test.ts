/**
 * Preflight resolves the host's SGLang release once for the run (server.sglang-version: a pin
 * as given, auto through the launcher's interpreter) and renders every server line for it:
 * what that release refuses is a problem before anything loads. A stand-in interpreter on a
 * LocalHost answers the version probe.
 */
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { checkRelease, type CaptureReport } from '../../src/activities/preflight-capture.js';
import { launchRelease } from '../../src/activities/server-launches.js';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { resolveSglangVersion } from '../../src/stages/extract/capture-launch.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { demoConfig } from '../support/demo-config.js';
import { useLocalHost } from '../support/local-host.js';

const local = useLocalHost('aerie-release-');
let work: string;
let host: LocalHost;

/** An interpreter whose `-c` probe prints `out` and exits `code`, and records its argv. */
async function fakePython(name: string, out: string, code = 0): Promise<string> {
  const path = join(work, name);
  await writeFile(path, `#!/bin/sh\nprintf '%s\\n' "$@" > "${path}.argv"\nprintf '%s\\n' '${out}'\nexit ${code}\n`);
  await chmod(path, 0o755);
  return path;
}

beforeAll(() => {
  ({ dir: work, host } = local);
});

describe('resolving server.sglang-version', () => {
  it('a pin is used as given, without asking the host', async () => {
    expect(await resolveSglangVersion(host, ['/nowhere/python', '-m', 'sglang.launch_server'], '0.5.9')).toEqual({
      version: '0.5.9',
      how: 'server.sglang-version',
    });
  });

  it("auto asks importlib.metadata through the launcher's interpreter; a local build renders as its release", async () => {
    const py = await fakePython('py-12', '0.5.12');
    expect(await resolveSglangVersion(host, [py, '-m', 'sglang.launch_server'], 'auto')).toEqual({
      version: '0.5.12',
      how: `${py} (importlib.metadata)`,
    });
    // The distribution's metadata, not `import sglang` (which pulls in torch on a GPU host).
    expect((await readFile(`${py}.argv`, 'utf8')).split('\n').slice(0, 2)).toEqual([
      '-c',
      'import importlib.metadata as m; print(m.version("sglang"))',
    ]);
    const dev = await fakePython('py-dev', '0.5.23.post1+cu129');
    expect(await resolveSglangVersion(host, [dev, '-m', 'sglang.launch_server'], 'auto')).toEqual({
      version: '0.5.23',
      how: `${dev} (importlib.metadata): 0.5.23.post1+cu129`,
    });
  });

  it('auto with a launcher that is not [python, -m, sglang.launch_server] names server.sglang-version and the fix', async () => {
    const v = await resolveSglangVersion(host, ['/opt/bin/aerie-sim.mjs', 'sglang'], 'auto');
    expect(v.version).toBeUndefined();
    expect(v.problem).toMatch(
      /^server\.sglang-version is auto, but aerie reads SGLang's release through a launcher of the form \[python, -m, sglang\.launch_server\].*Fix: pin server\.sglang-version/,
    );
  });

  it("each launch takes preflight's answer when the workflow passes it on, and still checks the target", async () => {
    const c = demoConfig(join(work, 'passed'), await freePort(), (x) => {
      x.server.launcher = ['/nowhere/python', '-m', 'sglang.launch_server'];
      x.server['sglang-version'] = 'auto';
    });
    expect(await launchRelease(host, c, 'EAGLE3', { version: '0.5.12', how: 'preflight' })).toEqual({
      version: '0.5.12',
      how: 'preflight',
    });
    // Without it the launch reads the release itself, the way preflight does.
    expect(await launchRelease(host, c, 'EAGLE3')).toEqual({
      problem: expect.stringMatching(
        /^server\.launcher: \/nowhere\/python on local has no installed sglang distribution/,
      ),
    });
  });

  it('an interpreter without sglang names server.launcher and the fix', async () => {
    const py = await fakePython('py-none', "ModuleNotFoundError: No module named 'sglang'", 1);
    const v = await resolveSglangVersion(host, [py, '-m', 'sglang.launch_server'], 'auto');
    expect(v.problem).toMatch(
      /^server\.launcher: .*py-none on local has no installed sglang distribution .*Fix: point server\.launcher at SGLang's interpreter, or pin server\.sglang-version/,
    );
  });
});

describe('preflight renders every server line for the release', () => {
  const report = (): CaptureReport => ({ checks: [], problems: [] });

  it('the demo (pinned 0.5.23) passes, and says every launch follows it', async () => {
    const out = report();
    expect(await checkRelease(host, demoConfig(join(work, 'demo'), await freePort()), out)).toEqual({
      version: '0.5.23',
      how: 'server.sglang-version',
    });
    expect(out.problems).toEqual([]);
    expect(out.checks).toContain(
      'SGLang 0.5.23 (server.sglang-version): every server launch is rendered for it, and each ready server must report it',
    );
    expect(out.checks.join('\n')).toMatch(/spec v2: always on from SGLang 0\.5\.15/);
  });

  it('refuses EAGLE3 on a Kimi-K2.5 target (config.json architectures) on 0.5.9, and passes it on 0.5.12', async () => {
    const model = join(work, 'kimi');
    await mkdir(model, { recursive: true });
    await writeFile(
      join(model, 'config.json'),
      JSON.stringify({ architectures: ['KimiK25ForConditionalGeneration'], text_config: { num_hidden_layers: 61 } }),
    );
    const at = async (v: string) => {
      const out = report();
      const py = await fakePython(`py-${v}`, v);
      const c = demoConfig(join(work, `kimi-${v}`), await freePort(), (x) => {
        x.target['model-path'] = model;
        x.server.launcher = [py, '-m', 'sglang.launch_server'];
        x.server['sglang-version'] = 'auto';
      });
      await checkRelease(host, c, out);
      return out;
    };
    const old = await at('0.5.9');
    expect(old.problems).toEqual([
      expect.stringMatching(
        /^stages\.deploy\.speculative-algorithm: EAGLE3 needs SGLang 0\.5\.11 or later for a KimiK25ForConditionalGeneration target .*the host runs 0\.5\.9\. Fix:/,
      ),
    ]);
    const ok = await at('0.5.12');
    expect(ok.problems).toEqual([]);
    expect(ok.checks[0]).toMatch(/^SGLang 0\.5\.12 \(.*py-0\.5\.12 \(importlib\.metadata\)\)/);
  });

  it('lists what the release cannot take: a removed env var, spec-v2 off, a spelling it predates', async () => {
    const out = report();
    const c = demoConfig(join(work, 'bad'), await freePort(), (x) => {
      x.server.env = { ...x.server.env, SGLANG_ENABLE_SPEC_V2: 'True' };
    });
    await checkRelease(host, c, out);
    expect(out.problems).toEqual([
      expect.stringMatching(
        /server\.env sets SGLANG_ENABLE_SPEC_V2, which SGLang 0\.5\.23 no longer reads.*Fix: remove it from server\.env/,
      ),
    ]);

    const out2 = report();
    await checkRelease(
      host,
      demoConfig(join(work, 'bad2'), await freePort(), (x) => {
        x.server['sglang-version'] = '0.5.12';
        x.server['extra-args'] = ['--incremental-streaming-output'];
        x.stages.deploy['spec-v2'] = 'on';
      }),
      out2,
    );
    expect(out2.problems).toEqual([]);
    const out3 = report();
    await checkRelease(
      host,
      demoConfig(join(work, 'bad3'), await freePort(), (x) => {
        x.server['sglang-version'] = '0.5.9';
        x.server['extra-args'] = ['--incremental-streaming-output'];
      }),
      out3,
    );
    // One problem, though both the generate and the deploy line carry it.
    expect(out3.problems).toEqual([
      expect.stringMatching(
        /server\.extra-args sets --incremental-streaming-output, which SGLang 0\.5\.9 does not have.*Fix: write --stream-output instead/,
      ),
    ]);
  });

  it("auto with the simulator's launcher is a problem naming server.sglang-version", async () => {
    const out = report();
    await checkRelease(
      host,
      demoConfig(join(work, 'sim'), await freePort(), (x) => (x.server['sglang-version'] = 'auto')),
      out,
    );
    expect(out.problems).toEqual([
      expect.stringMatching(/^server\.sglang-version is auto, .*Fix: pin server\.sglang-version/),
    ]);
  });
});
