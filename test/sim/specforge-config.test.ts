/**
 * The simulated `specforge train` config rules refuse what SpecForge@a6b6b023's
 * specforge/config/schema.py refuses, with its messages: the simulator passes a config only
 * where the real schema does (test/real judges aerie's configs with the real one).
 */
import { describe, expect, it } from 'vitest';
import { ConfigValidationError, loadRunConfig } from '../../sim/specforge/config.js';

const offline = 'model: {target_model_path: /m}\ndata: {hidden_states_path: /h}\n';
const refused = (yaml: string, overrides: string[] = []): string => {
  try {
    loadRunConfig(yaml, overrides);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigValidationError);
    return (e as Error).message;
  }
  throw new Error('expected the config to be refused');
};

describe('aerie-sim specforge config rules', () => {
  it('accepts what aerie renders: offline features, a resume override', () => {
    const c = loadRunConfig(offline + 'deployment: {trainer: {nproc_per_node: 8}}\n', [
      'training.resume_from=/o/x-step4',
      'training.num_epochs=2',
    ]);
    expect(c.training).toMatchObject({ resume_from: '/o/x-step4', num_epochs: 2, role: 'all' });
    expect(c['deployment.trainer']).toMatchObject({ nproc_per_node: 8 });
  });

  it('online training without deployment.mode=disaggregated (schema.py:706-710)', () => {
    expect(refused('model: {target_model_path: /m}\ndata: {train_data_path: /d}\n')).toMatch(
      /1 validation error for Config\n {2}Value error, online training requires deployment.mode=disaggregated; colocated online training is no longer supported/,
    );
  });

  it('target_backend other than sglang (schema.py:54)', () => {
    expect(refused('model: {target_model_path: /m, target_backend: hf}\ndata: {hidden_states_path: /h}\n')).toMatch(
      /model\.target_backend\n {2}Input should be 'sglang'/,
    );
  });

  it('exactly one data source (schema.py:152-165) and unknown keys (extra="forbid", :33-34)', () => {
    expect(refused('model: {target_model_path: /m}\ndata: {train_data_path: /d, hidden_states_path: /h}\n')).toMatch(
      /^data\n {2}Value error, set exactly one of/m,
    );
    expect(refused(offline + 'training: {epochs: 2}\n')).toMatch(
      /training\.epochs\n {2}Extra inputs are not permitted/,
    );
  });

  it('deployment shape: disaggregated needs its section, the section needs the mode, and online disaggregated needs mooncake (:493-504, :764-773)', () => {
    expect(refused(offline + 'deployment: {mode: disaggregated}\n')).toMatch(
      /deployment\n {2}Value error, deployment.disaggregated is required when deployment.mode=disaggregated/,
    );
    expect(refused(offline + 'deployment: {disaggregated: {control_dir: /c, backend: mooncake}}\n')).toMatch(
      /deployment.disaggregated requires deployment.mode=disaggregated/,
    );
    expect(
      refused(
        'model: {target_model_path: /m}\ndata: {train_data_path: /d}\ndeployment: {mode: disaggregated, disaggregated: {control_dir: /c, backend: shared_dir}}\n',
      ),
    ).toMatch(/online disaggregated training requires deployment.disaggregated.backend=mooncake/);
  });

  it('training.role against the deployment (:716-725) and offline tp_size (:882-887)', () => {
    expect(refused(offline + 'training: {role: auto}\n')).toMatch(
      /training.role=auto\/producer\/consumer requires deployment.mode=disaggregated/,
    );
    expect(refused(offline + 'training: {tp_size: 2}\n')).toMatch(
      /offline feature consumers do not implement trainer tensor parallelism/,
    );
  });

  it('the file is validated first, then each override must name a field the dumped config has (:926-963)', () => {
    expect(refused(offline, ['training.epochs=2'])).toBe("ValueError: override path 'training.epochs' does not exist");
    // deployment.disaggregated is None in the dump: nothing below it exists, so online cannot come in this way.
    expect(refused(offline, ['deployment.disaggregated.backend=mooncake'])).toBe(
      "ValueError: override path 'deployment.disaggregated.backend' does not exist",
    );
    expect(refused(offline, ['training.num_epochs'])).toBe(
      "ValueError: override 'training.num_epochs' is not of the form path=value",
    );
    expect(refused(offline, ['training.num_epochs=two'])).toMatch(
      /training\.num_epochs\n {2}Input should be a valid integer/,
    );
    // An invalid file fails on its own, before any override could repair it.
    expect(refused('model: {target_model_path: /m}\ndata: {}\n', ['data.hidden_states_path=/h'])).toMatch(
      /set exactly one of/,
    );
  });
});
