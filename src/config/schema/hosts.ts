/** hosts.<name>: where the GPU work runs, this machine or one reached over SSH. */
import { z } from 'zod';
import { argv, nonEmpty, port } from './fields.js';

const workdir = nonEmpty.describe('Absolute directory on the host for run folders, process records and ledgers.');

const gpus = z
  .array(z.number().int().min(0))
  .min(1)
  .refine((a) => new Set(a).size === a.length, 'lists a GPU twice')
  .optional()
  .describe(
    "GPU indices (nvidia-smi's) this run may use on the host; default all. Every launch gets them as CUDA_VISIBLE_DEVICES, and preflight refuses foreign GPU processes only on these GPUs (others are reported and left alone).",
  );

const nvidiaSmi = argv
  .optional()
  .describe(
    "argv of nvidia-smi on the host (for the GPU inventory); default [nvidia-smi]. The demo points it at the simulator's.",
  );

/**
 * Temporal's own rule is only "non-empty"; a queue typed on a command line must survive the
 * shell and read the same in the Web UI, so names are one word.
 */
export const TASK_QUEUE_NAME = /^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}$/;
export const TASK_QUEUE_RULE = 'letters, digits and . _ : @ / - (no spaces), at most 200 characters, e.g. gpu-site-b';

const taskQueue = z
  .string()
  .regex(
    TASK_QUEUE_NAME,
    `a task queue name: ${TASK_QUEUE_RULE}. Fix: rename the queue, and start the site worker with the same name`,
  )
  .optional()
  .describe(
    "Activities that touch this host run only on workers polling this queue, e.g. `aerie worker --task-queue gpu-site-b` on a machine that reaches the host (its SSH, or for a local host the machine itself). Default: the pipeline's queue, which `aerie run`'s and `aerie worker`'s workers poll. The workflow and the GPU lease's renewals stay on the pipeline's queue.",
  );

const sharesFilesWith = nonEmpty
  .optional()
  .describe(
    "The name of the host (in hosts) whose run folders this host sees at the same path, e.g. over NFS: an extraction pool's server here writes its SpecForge files straight onto that host's disk. Preflight writes a file on one and reads it on the other. Needs the same workdir.",
  );

export const localHostSchema = z.strictObject({
  kind: z.literal('local').describe('Where the GPU work runs. "local": this machine; "ssh": a remote host over SSH.'),
  workdir,
  gpus,
  'nvidia-smi': nvidiaSmi,
  'task-queue': taskQueue,
  'shares-files-with': sharesFilesWith,
});

export const sshTargetSchema = z.strictObject({
  host: nonEmpty.describe(
    'An alias from the ssh config file (HostName, User, Port, IdentityFile, ProxyJump apply) or a hostname.',
  ),
  user: nonEmpty.optional().describe('Login name; default: User from the ssh config, else the local user.'),
  port: port.optional().describe('Default: Port from the ssh config, else 22.'),
  'identity-file': nonEmpty
    .optional()
    .describe(
      'Private key file (~ allowed). Default: IdentityFile from the ssh config, else ~/.ssh/id_*; ssh-agent (SSH_AUTH_SOCK) is tried first.',
    ),
  'proxy-jump': nonEmpty
    .optional()
    .describe('Jump hosts, as ssh -J takes them: [user@]host[:port][,...]. Default: ProxyJump from the ssh config.'),
  'config-file': nonEmpty.optional().describe('ssh config file to read aliases from. Default: ~/.ssh/config.'),
  'strict-host-key-checking': z
    .enum(['yes', 'accept-new'])
    .default('yes')
    .describe(
      '"yes": the host key must already be in known_hosts. "accept-new": trust and record a host seen for the first time; a changed key is refused either way.',
    ),
  'known-hosts-file': nonEmpty
    .optional()
    .describe('known_hosts file. Default: UserKnownHostsFile from the ssh config, else ~/.ssh/known_hosts.'),
});

export const sshHostSchema = z.strictObject({
  kind: z.literal('ssh'),
  ssh: sshTargetSchema,
  'exec-prefix': z
    .array(nonEmpty)
    .optional()
    .describe(
      'argv put before every command, for hosts reached through a container runtime, e.g. [pct, exec, "129", "--"] or [docker, exec, -i, NAME]. Files are then read and written through commands too.',
    ),
  'http-address': nonEmpty
    .default('127.0.0.1')
    .describe(
      "Where the SSH host reaches the model server's port: the worker's HTTP is forwarded there through the SSH connection. Default 127.0.0.1. For a container with its own network namespace (behind exec-prefix), the container's address, with server.listen-host set so the server listens on it.",
    ),
  workdir,
  gpus,
  'nvidia-smi': nvidiaSmi,
  'task-queue': taskQueue,
  'shares-files-with': sharesFilesWith,
});

export const hostSchema = z.discriminatedUnion('kind', [localHostSchema, sshHostSchema]);
