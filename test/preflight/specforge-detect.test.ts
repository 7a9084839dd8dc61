/**
 * Which SpecForge a host has: the rules over probe output and source text (pure), and
 * preflight running the probes on a LocalHost against a stand-in install and scripts.
 * The marker lines are the ones each revision's source carries (cited per rule).
 */
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { runPreflight } from '../../src/activities/preflight.js';
import { renderDoctorReport } from '../../src/cli/doctor.js';
import type { Config } from '../../src/config/schema.js';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import {
  detectFromCli,
  detectFromScript,
  parseCliProbe,
  parseRevParse,
  prepareAuxFlagIn,
  resolveRevision,
} from '../../src/stages/common/specforge-detect.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { demoConfig } from '../support/demo-config.js';
import { useLocalHost } from '../support/local-host.js';

// One line per fix, as each revision's train_eagle3.py has it.
const V020 =
  'parser.add_argument("--train-data-path", type=str, required=True)\nprint_on_rank0(f"Starting training from epoch {start_epoch}")\n';
const FINAL_SAVE = 'print_on_rank0(\n  f"Training completed at step {global_step}, saving final checkpoint..."\n)\n'; // SpecForge@03a3dedb:scripts/train_eagle3.py:868
const RESUME_FIX = 'draft_model_last_checkpoint, ckpt_info = get_last_checkpoint(args.output_dir)\n'; // SpecForge@961ca7c3:scripts/train_eagle3.py:401
const SCHEMA_HEAD =
  'target_backend: Literal["sglang"] = "sglang"\n"online training requires deployment.mode=disaggregated; "\n'; // SpecForge@a6b6b023:specforge/config/schema.py:54,708

describe('detection rules', () => {
  it('tells the three v0.2 revisions apart by the fixes in train_eagle3.py', () => {
    expect(detectFromScript('/s/train_eagle3.py', V020).profile).toBe('v0.2.0');
    expect(detectFromScript('/s/train_eagle3.py', V020 + FINAL_SAVE).profile).toBe('v0.2-final-save');
    expect(detectFromScript('/s/train_eagle3.py', V020 + FINAL_SAVE + RESUME_FIX).profile).toBe('v0.2-resume');
    expect(detectFromScript('/s/train_eagle3.py', V020 + RESUME_FIX).problem).toMatch(
      /no published SpecForge revision/,
    );
    expect(detectFromScript('/s/train.py', 'print(1)\n').problem).toMatch(
      /is not SpecForge's scripts\/train_eagle3.py/,
    );
  });

  it('a checkout at a known commit must agree with its source', () => {
    const at = (c: string) => detectFromScript('/s/train_eagle3.py', V020, c);
    expect(at('73e6f80896d8ac76473646acad2fb5df301312f8')).toMatchObject({
      profile: 'v0.2.0',
      evidence: expect.stringContaining('at 73e6f808'),
    });
    expect(at('961ca7c3bb9d1d0a7aaf44db35e76e1f227a7be0').problem).toMatch(/locally modified checkout/);
    expect(parseRevParse(0, '961ca7c3bb9d1d0a7aaf44db35e76e1f227a7be0\n')).toBe(
      '961ca7c3bb9d1d0a7aaf44db35e76e1f227a7be0',
    );
    expect(parseRevParse(128, 'fatal: not a git repository\n')).toBeUndefined();
  });

  it('reads the CLI probe and tells the server-only CLI from the July pre-release', () => {
    const probe = parseCliProbe(
      'some site hook noise\n{"python": "3.12.3", "version": "0.2.0", "package": "/v/specforge", "cli": "/v/specforge/cli.py", "schema": "/v/specforge/config/schema.py"}\n',
    );
    expect(probe).toMatchObject({ version: '0.2.0', package: '/v/specforge' });
    expect(detectFromCli(probe, SCHEMA_HEAD, '/v/bin/python')).toMatchObject({
      profile: 'cli',
      evidence: expect.stringMatching(
        /specforge 0\.2\.0 in \/v\/specforge: CLI, server-only runtime, target_backend sglang only → cli/,
      ),
    });
    expect(
      detectFromCli(probe, 'target_backend: Literal["sglang", "hf", "custom"] = "sglang"\n', '/v/bin/python').problem,
    ).toMatch(/pre-release specforge CLI .* install PyPI specforge==0\.2\.0/);
    expect(detectFromCli({ ...probe!, cli: null }, undefined, '/v/bin/python').problem).toMatch(
      /has no specforge CLI .* use driver specforge-v0\.2/,
    );
    expect(
      detectFromCli(
        parseCliProbe('{"package": null, "version": null, "cli": null, "schema": null}'),
        undefined,
        '/usr/bin/python3',
      ).problem,
    ).toBe('/usr/bin/python3 cannot import specforge');
    expect(detectFromCli(undefined, undefined, '/x/python').problem).toMatch(/could not run the SpecForge probe/);
  });

  it('reads the aux flag of a prepare_hidden_states.py', () => {
    expect(prepareAuxFlagIn('model_group.add_argument("--enable-aux-hidden-states", action="store_true")')).toBe(
      '--enable-aux-hidden-states',
    );
    expect(prepareAuxFlagIn('parser.add_argument(\n        "--draft-model-config",')).toBe('--draft-model-config');
    expect(prepareAuxFlagIn('parser.add_argument("--target-model-path")')).toBeNull();
  });

  it('checks a pin against the host: agreement, contradiction, unprobed, and the wrong driver', () => {
    const resume = detectFromScript('/s/train_eagle3.py', V020 + FINAL_SAVE + RESUME_FIX);
    expect(resolveRevision('specforge-v0.2', 'auto', resume)).toMatchObject({ profile: 'v0.2-resume', problems: [] });
    expect(resolveRevision('specforge-v0.2', 'v0.2-resume', resume).checks[0]).toMatch(/pinned and confirmed/);
    const wrong = resolveRevision('specforge-v0.2', 'v0.2.0', resume);
    expect(wrong.profile).toBeUndefined();
    expect(wrong.problems[0]).toMatch(
      /^stages\.train\.specforge-revision: pinned to v0\.2\.0, but the host has v0\.2-resume .*Fix: set stages\.train\.specforge-revision: v0\.2-resume/,
    );
    expect(resolveRevision('specforge-v0.2', 'v0.2-final-save', undefined)).toMatchObject({
      profile: 'v0.2-final-save',
      checks: [expect.stringMatching(/not verified on the host/)],
    });
    expect(resolveRevision('specforge-v0.2', 'auto', undefined)).toMatchObject({
      profile: 'v0.2.0',
      checks: [expect.stringMatching(/not probed .* assuming v0\.2\.0/)],
    });
    expect(resolveRevision('specforge', 'auto', undefined).profile).toBe('cli');
    const cli = detectFromCli(
      parseCliProbe('{"version": "0.2.0", "package": "/p", "cli": "/p/cli.py", "schema": "/p/config/schema.py"}'),
      SCHEMA_HEAD,
      'py',
    );
    expect(resolveRevision('specforge-v0.2', 'auto', cli).problems[0]).toMatch(
      /^stages\.train\.driver: the host has SpecForge CLI .*Fix: set stages\.train\.driver: specforge/,
    );
  });
});

describe('preflight probes the host', () => {
  const local = useLocalHost('aerie-sfdetect-');
  let work: string;
  beforeAll(() => {
    work = local.dir;
  });

  /** A specforge install behind its own interpreter (a wrapper putting it on PYTHONPATH). */
  async function fakeInstall(schema: string): Promise<string> {
    const site = join(work, 'site');
    await mkdir(join(site, 'specforge', 'config'), { recursive: true });
    await writeFile(join(site, 'specforge', '__init__.py'), '');
    await writeFile(join(site, 'specforge', 'cli.py'), 'def main():\n    return 0\n');
    await writeFile(join(site, 'specforge', 'config', '__init__.py'), '');
    await writeFile(join(site, 'specforge', 'config', 'schema.py'), schema);
    const py = join(work, 'python');
    await writeFile(py, `#!/bin/sh\nPYTHONPATH=${site} exec python3 "$@"\n`);
    await chmod(py, 0o755);
    return py;
  }

  const cliConfig = async (py: string, pin: 'auto' | 'cli', tweak: (c: Config) => void = () => undefined) =>
    demoConfig(join(work, 'wd'), await freePort(), (c) => {
      if (c.stages.train.driver !== 'specforge') throw new Error('the demo trains with the CLI');
      c.stages.train.launcher = [py, '-m', 'specforge.cli'];
      c.stages.train['specforge-revision'] = pin;
      tweak(c);
    });

  it("finds the CLI through the launcher's interpreter and doctor prints what follows from it", async () => {
    const py = await fakeInstall(SCHEMA_HEAD);
    const report = await runPreflight(local.hostAt('wd'), await cliConfig(py, 'auto'), 'sf-1');
    expect(report.problems).toEqual([]);
    expect(report.specforge).toMatchObject({ profile: 'cli' });
    expect(report.checks.join('\n')).toMatch(
      /SpecForge revision cli detected: specforge from a source tree \(no package metadata\) in .*\/site\/specforge: CLI, server-only runtime/,
    );
    const text = renderDoctorReport(report);
    expect(text).toMatch(/SpecForge on local: SpecForge CLI \(a6b6b023 \/ PyPI specforge 0\.2\.0\) \[cli\]/);
    expect(text).toContain('  resume: training.resume_from=<newest complete <run>-step<N>> at the same world size');
  });

  it('a pre-release CLI on the host is a preflight problem, whatever the pin', async () => {
    const py = await fakeInstall(
      'class ModelConfig:\n    target_backend: Literal["sglang", "hf", "custom"] = "sglang"\n',
    );
    const report = await runPreflight(local.hostAt('wd'), await cliConfig(py, 'cli'), 'sf-2');
    expect(report.problems.join('\n')).toMatch(
      /stages\.train\.launcher: .* is a pre-release specforge CLI .*install PyPI specforge==0\.2\.0/,
    );
    expect(report.specforge).toBeUndefined();
  });

  it('reads the v0.2 script the launcher names and refuses a pin it contradicts', async () => {
    const script = join(work, 'train_eagle3.py');
    await writeFile(script, V020 + FINAL_SAVE);
    const config = demoConfig(join(work, 'wd'), await freePort(), (c) => {
      (c.stages as { train: unknown }).train = {
        driver: 'specforge-v0.2',
        'specforge-revision': 'v0.2-resume',
        launcher: ['python3', script],
        'draft-model-config': (c.stages.train as { 'draft-model-config': string })['draft-model-config'],
        env: {},
        'crash-retries': 3,
        'chat-template': 'llama3',
        'num-epochs': 1,
        'batch-size': 1,
        'learning-rate': 1e-4,
        'max-length': 2048,
        'ttt-length': 7,
        'save-interval': 10,
        'tp-size': 1,
        'extra-args': [],
      };
    });
    const report = await runPreflight(local.hostAt('wd'), config, 'sf-3');
    expect(report.problems.filter((p) => p.includes('specforge-revision'))).toEqual([
      expect.stringMatching(
        /^stages\.train\.specforge-revision: pinned to v0\.2-resume, but the host has v0\.2-final-save \(.*train_eagle3\.py: final save, no --resume fix → v0\.2-final-save\)/,
      ),
    ]);
  });
});
