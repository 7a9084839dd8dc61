import { describe, expect, it } from 'vitest';
import { classifyTrainFailure } from '../../src/stages/common/train-failure.js';

const CHILD_FAILED =
  'torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n' +
  '============================================================\n' +
  'scripts/train_eagle3.py FAILED\n' +
  '  exitcode  : 1 (pid: 4243)\n';

describe('classifyTrainFailure', () => {
  it('an OOM is not retryable and says to set expandable_segments', () => {
    const tail =
      '\rTraining Epoch 1:  62%|██████▎   | 60/96 [00:30<00:18,  2.00it/s, loss=4.10, acc=0.40, time=0.50s]\n' +
      '[rank0]: Traceback (most recent call last):\n' +
      '[rank0]:   File "scripts/train_eagle3.py", line 781, in main\n' +
      '[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU 0 has a total capacity of 79.19 GiB\n' +
      CHILD_FAILED;
    const f = classifyTrainFailure(tail);
    expect([f.kind, f.retryable]).toEqual(['oom', false]);
    expect(f.advice).toContain('PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True');
    expect(f.evidence).toMatch(/^torch\.OutOfMemoryError: CUDA out of memory/);
  });

  it("a crash is retryable and names the root cause, not torchrun's wrapper", () => {
    const tail =
      '[rank0]: Traceback (most recent call last):\n' +
      '[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n' +
      '[rank0]: For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n' +
      'Traceback (most recent call last):\n' +
      '  File "/usr/local/bin/torchrun", line 8, in <module>\n' +
      CHILD_FAILED;
    const f = classifyTrainFailure(tail);
    expect([f.kind, f.retryable, f.evidence]).toEqual([
      'crash',
      true,
      'RuntimeError: CUDA error: an illegal memory access was encountered',
    ]);
    expect(f.advice).toMatch(/relaunches it from the newest complete checkpoint/);
  });

  it('a collective timeout is a retryable crash with --dist-timeout advice', () => {
    const f = classifyTrainFailure(
      '[rank3]:[E1203 10:00:00 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 1200000 milliseconds before timing out.\n' +
        'torch.distributed.DistBackendError: NCCL communicator was aborted on rank 3.\n',
    );
    expect([f.kind, f.retryable]).toEqual(['crash', true]);
    expect(f.advice).toContain('--dist-timeout');
  });

  it('a wrong interpreter is a missing module, not retryable', () => {
    for (const tail of [
      'Traceback (most recent call last):\n  File "scripts/train_eagle3.py", line 10, in <module>\nModuleNotFoundError: No module named \'specforge\'\n',
      '/usr/bin/python3: No module named torch.distributed.run\n',
      "/usr/bin/python3: can't open file '/opt/SpecForge/scripts/train_eagle3.py': [Errno 2] No such file or directory\n",
      'bash: line 1: torchrun: command not found\n',
    ]) {
      const f = classifyTrainFailure(tail);
      expect([f.kind, f.retryable], tail).toEqual(['missing-module', false]);
      expect(f.advice).toContain('stages.train.launcher');
    }
  });

  it('argparse refusals, missing inputs and a full disk are not retryable', () => {
    const usage = classifyTrainFailure(
      'usage: train_eagle3.py [-h] --target-model-path TARGET_MODEL_PATH\ntrain_eagle3.py: error: unrecognized arguments: --bogus 1\n',
    );
    expect([usage.kind, usage.retryable]).toEqual(['usage', false]);
    expect(usage.advice).toContain('unrecognized arguments: --bogus 1');
    const missing = classifyTrainFailure(
      "[rank0]: FileNotFoundError: Unable to find '/runs/r1/regen.jsonl'\n" + CHILD_FAILED,
    );
    expect([missing.kind, missing.retryable]).toEqual(['missing-file', false]);
    const disk = classifyTrainFailure('[rank0]: OSError: [Errno 28] No space left on device\n' + CHILD_FAILED);
    expect([disk.kind, disk.retryable]).toEqual(['disk-full', false]);
  });

  it('an empty or unrecognisable tail is still a retryable crash', () => {
    expect(classifyTrainFailure('')).toMatchObject({ kind: 'crash', retryable: true, evidence: undefined });
  });
});
