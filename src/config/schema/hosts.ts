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

export const localHostSchema = z.strictObject({
  kind: z.literal('local').describe('Where the GPU work runs. "local": this machine; "ssh": a remote host over SSH.'),
  workdir,
  gpus,
  'nvidia-smi': nvidiaSmi,
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
});

export const hostSchema = z.discriminatedUnion('kind', [localHostSchema, sshHostSchema]);
