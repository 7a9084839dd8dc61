/**
 * Where an `ssh` host entry actually points: the aerie config's fields over the user's
 * ~/.ssh/config (parsed by the ssh-config package), the way OpenSSH resolves them —
 * HostName, User, Port, IdentityFile, IdentitiesOnly, IdentityAgent, HostKeyAlias,
 * UserKnownHostsFile and ProxyJump (each jump host resolved through the same file).
 * Pure: the config text, home directory and environment come in as arguments.
 */
import SSHConfig from 'ssh-config';

export interface SshTarget {
  host: string;
  user?: string;
  port?: number;
  'identity-file'?: string;
  'proxy-jump'?: string;
  'known-hosts-file'?: string;
}

export interface SshEndpoint {
  /** What the config named (an alias or a hostname), for messages. */
  alias: string;
  hostname: string;
  port: number;
  user: string;
  /** Absolute private key paths to try, in order (missing files are skipped at connect time). */
  identityFiles: string[];
  /** Only the identity files, not every key the agent holds (IdentitiesOnly yes). */
  identitiesOnly: boolean;
  /** ssh-agent socket, or null for none (IdentityAgent none / no SSH_AUTH_SOCK). */
  agent: string | null;
  /** The name looked up in known_hosts: HostKeyAlias, else the HostName. */
  hostKeyName: string;
  knownHostsFiles: string[];
  /** Jump hosts, first hop first. */
  jumps: SshEndpoint[];
}

export interface ResolveContext {
  /** The ssh config file's text (Include already inlined), or null when there is none. */
  sshConfigText: string | null;
  home: string;
  localUser: string;
  env: Record<string, string | undefined>;
}

export class SshConfigProblem extends Error {
  override readonly name = 'SshConfigProblem';
}

const DEFAULT_IDENTITIES = ['id_ed25519', 'id_ecdsa', 'id_rsa'];
const MAX_JUMP_DEPTH = 8;

type Computed = Record<string, string | string[]>;

function one(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

function many(v: string | string[] | undefined): string[] {
  if (v === undefined) return [];
  return (Array.isArray(v) ? v : [v]).flatMap((s) => s.split(/\s+/)).filter(Boolean);
}

/** OpenSSH's %-tokens, ~ and ${VAR} in file names (IdentityFile, UserKnownHostsFile, IdentityAgent). */
export function expandPath(
  path: string,
  tokens: Record<string, string>,
  home: string,
  env: Record<string, string | undefined>,
): string {
  let out = path.replace(/%(.)/g, (m, t: string) => (t === '%' ? '%' : (tokens[t] ?? m)));
  out = out.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (m, name: string) => env[name] ?? m);
  if (out === '~') return home;
  if (out.startsWith('~/')) return `${home}${out.slice(1)}`;
  if (!out.startsWith('/')) return `${home}/.ssh/${out}`;
  return out;
}

/** `[user@]host[:port]`, `[user@][v6addr]:port` or `ssh://[user@]host[:port]`. */
export function parseJumpSpec(spec: string): { user?: string; host: string; port?: number } {
  let s = spec.trim().replace(/^ssh:\/\//, '');
  let user: string | undefined;
  const at = s.lastIndexOf('@');
  if (at >= 0) {
    user = s.slice(0, at);
    s = s.slice(at + 1);
  }
  let host = s;
  let portText: string | undefined;
  const bracket = /^\[([^\]]+)\](?::(\d+))?$/.exec(s);
  if (bracket) {
    host = bracket[1]!;
    portText = bracket[2];
  } else if ((s.match(/:/g) ?? []).length === 1) {
    [host, portText] = s.split(':') as [string, string];
  }
  if (!host) throw new SshConfigProblem(`proxy jump "${spec}" names no host`);
  let port: number | undefined;
  if (portText !== undefined) {
    port = Number(portText);
    if (!Number.isInteger(port) || port < 1 || port > 65535)
      throw new SshConfigProblem(`proxy jump "${spec}" has a bad port`);
  }
  return { user: user || undefined, host, port };
}

function compute(parsed: SSHConfig | null, host: string, user?: string): Computed {
  if (!parsed) return {};
  // Match exec would run commands from the file inside the worker; aerie does not evaluate it.
  return parsed.compute(user ? { Host: host, User: user } : { Host: host }, { ignoreCase: true, matchExec: false });
}

function resolveOne(
  parsed: SSHConfig | null,
  want: {
    host: string;
    user?: string;
    port?: number;
    identityFile?: string;
    proxyJump?: string;
    knownHostsFile?: string;
  },
  ctx: ResolveContext,
  depth: number,
): SshEndpoint {
  if (depth > MAX_JUMP_DEPTH)
    throw new SshConfigProblem(`ProxyJump chain for ${want.host} is longer than ${MAX_JUMP_DEPTH} hops (a loop?)`);
  const c = compute(parsed, want.host, want.user);
  if (one(c.proxycommand) && !want.proxyJump && !one(c.proxyjump)) {
    throw new SshConfigProblem(
      `the ssh config gives ${want.host} a ProxyCommand, which aerie does not run; use ProxyJump instead`,
    );
  }
  const alias = want.host;
  const hostnameRaw = one(c.hostname) ?? want.host;
  const hostname = hostnameRaw.replace(/%h/g, want.host);
  const port = want.port ?? (one(c.port) ? Number(one(c.port)) : 22);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new SshConfigProblem(`the ssh config gives ${alias} a bad Port "${one(c.port)}"`);
  const user = want.user ?? one(c.user) ?? ctx.localUser;
  const tokens = { h: hostname, p: String(port), r: user, u: ctx.localUser, d: ctx.home, n: alias };

  const identityFiles = want.identityFile
    ? [expandPath(want.identityFile, tokens, ctx.home, ctx.env)]
    : many(c.identityfile).length > 0
      ? many(c.identityfile).map((f) => expandPath(f, tokens, ctx.home, ctx.env))
      : DEFAULT_IDENTITIES.map((f) => `${ctx.home}/.ssh/${f}`);
  const agentSetting = one(c.identityagent);
  let agent: string | null = ctx.env.SSH_AUTH_SOCK || null;
  if (agentSetting !== undefined) {
    if (agentSetting.toLowerCase() === 'none') agent = null;
    else if (agentSetting !== 'SSH_AUTH_SOCK')
      agent = expandPath(agentSetting.replace(/^\$SSH_AUTH_SOCK$/, '${SSH_AUTH_SOCK}'), tokens, ctx.home, ctx.env);
  }
  const knownHostsFiles = want.knownHostsFile
    ? [expandPath(want.knownHostsFile, tokens, ctx.home, ctx.env)]
    : many(c.userknownhostsfile).length > 0
      ? many(c.userknownhostsfile).map((f) => expandPath(f, tokens, ctx.home, ctx.env))
      : [`${ctx.home}/.ssh/known_hosts`, `${ctx.home}/.ssh/known_hosts2`];

  const jumpText = want.proxyJump ?? one(c.proxyjump);
  const jumps: SshEndpoint[] = [];
  if (jumpText && jumpText.toLowerCase() !== 'none') {
    for (const hop of jumpText.split(',')) {
      const spec = parseJumpSpec(hop);
      // A jump host's own ProxyJump applies to it (OpenSSH chains them the same way).
      const resolved = resolveOne(parsed, { host: spec.host, user: spec.user, port: spec.port }, ctx, depth + 1);
      jumps.push(...resolved.jumps, { ...resolved, jumps: [] });
    }
  }
  return {
    alias,
    hostname,
    port,
    user,
    identityFiles,
    identitiesOnly: (one(c.identitiesonly) ?? '').toLowerCase() === 'yes',
    agent,
    hostKeyName: one(c.hostkeyalias) ?? hostname,
    knownHostsFiles,
    jumps,
  };
}

export function resolveEndpoint(target: SshTarget, ctx: ResolveContext): SshEndpoint {
  let parsed: SSHConfig | null = null;
  if (ctx.sshConfigText !== null) {
    try {
      parsed = SSHConfig.parse(ctx.sshConfigText);
    } catch (err) {
      throw new SshConfigProblem(`cannot parse the ssh config: ${(err as Error).message}`);
    }
  }
  return resolveOne(
    parsed,
    {
      host: target.host,
      user: target.user,
      port: target.port,
      identityFile: target['identity-file'],
      proxyJump: target['proxy-jump'],
      knownHostsFile: target['known-hosts-file'],
    },
    ctx,
    0,
  );
}

/** `user@host:port` (via jumps), for messages. */
export function describeEndpoint(e: SshEndpoint): string {
  const self = `${e.user}@${e.hostname}:${e.port}`;
  return e.jumps.length === 0
    ? self
    : `${self} via ${e.jumps.map((j) => `${j.user}@${j.hostname}:${j.port}`).join(' → ')}`;
}

/**
 * `Include` lines replaced by the files they name (ssh-config does not follow them), so
 * aliases kept in ~/.ssh/config.d/* resolve. `readMatching(pattern)` returns the texts of
 * the files a (possibly globbed) absolute path names, in order.
 */
export async function inlineIncludes(
  text: string,
  home: string,
  readMatching: (absolutePattern: string) => Promise<string[]>,
  depth = 0,
): Promise<string> {
  if (depth > 8) throw new SshConfigProblem('ssh config Include nesting is deeper than 8 (a loop?)');
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*include\s*[=\s]\s*(.+?)\s*$/i.exec(line);
    if (!m) {
      out.push(line);
      continue;
    }
    for (const word of m[1]!.split(/\s+/)) {
      const unquoted = word.replace(/^"(.*)"$/, '$1');
      const abs = unquoted.startsWith('~/')
        ? `${home}${unquoted.slice(1)}`
        : unquoted.startsWith('/')
          ? unquoted
          : `${home}/.ssh/${unquoted}`;
      for (const included of await readMatching(abs))
        out.push(await inlineIncludes(included, home, readMatching, depth + 1));
    }
  }
  return out.join('\n');
}
