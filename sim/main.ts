/**
 * aerie-sim: `aerie-sim sglang [--version X.Y.Z] <launch_server flags>`, `aerie-sim vllm <api_server flags>` or `aerie-sim train <trainer flags>`.
 * Each subcommand is imported only when used, so the server does not depend on the trainer.
 */

const USAGE =
  'usage: aerie-sim {sglang,vllm,train,specforge,prepare-hidden-states,make-target,nvidia-smi} [flags...]\n' +
  '  sglang [--version V]   an SGLang-compatible server (python -m sglang.launch_server flags) imitating SGLang V\n' +
  '                         (0.5.4, 0.5.9, 0.5.12 or 0.5.23; else AERIE_SIM_SGLANG_VERSION; default 0.5.23)\n' +
  '  vllm                   a vLLM-0.32.0-compatible OpenAI server (python -m vllm.entrypoints.openai.api_server flags)\n' +
  '  train                  SpecForge v0.2 scripts/train_eagle3.py\n' +
  '  specforge              the current SpecForge CLI: specforge train -c cfg.yaml k=v ..., specforge export --to sglang ...\n' +
  '  prepare-hidden-states  SpecForge v0.2 scripts/prepare_hidden_states.py\n' +
  "  make-target DIR        the simulator target's weights (DIR/model.safetensors) from DIR/config.json\n" +
  '  nvidia-smi             nvidia-smi query mode over the simulated GPUs (AERIE_SIM_GPU_DIR)\n';

interface TrainerModule {
  runTrainer(args: string[]): Promise<number>;
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'sglang': {
      const { runSglang } = await import('./sglang/server.js');
      return runSglang(rest);
    }
    case 'vllm': {
      const { runVllm } = await import('./vllm/server.js');
      return runVllm(rest);
    }
    case 'train': {
      // A specifier in a variable keeps the type check independent of the trainer's presence.
      const trainer = './train/main.js';
      const { runTrainer } = (await import(trainer)) as TrainerModule;
      return runTrainer(rest);
    }
    case 'specforge': {
      const { runSpecforge } = await import('./specforge/main.js');
      return runSpecforge(rest);
    }
    case 'prepare-hidden-states': {
      const { runPrepare } = await import('./specforge/prepare.js');
      return runPrepare(rest);
    }
    case 'make-target': {
      const { runMakeTarget } = await import('./make-target.js');
      return runMakeTarget(rest);
    }
    case 'nvidia-smi': {
      const { runNvidiaSmi } = await import('./gpu/nvidia-smi.js');
      const r = runNvidiaSmi(rest);
      process.stdout.write(r.stdout);
      process.stderr.write(r.stderr);
      return r.code;
    }
    case '-h':
    case '--help':
      process.stdout.write(USAGE);
      return 0;
    default:
      process.stderr.write(
        USAGE + `aerie-sim: error: unknown command ${command === undefined ? '(none)' : `'${command}'`}\n`,
      );
      return 2;
  }
}
