/**
 * POSIX shell quoting. Every argv element, path and environment value that aerie puts into
 * shell text goes through here, so a config value can never inject shell syntax: inside
 * single quotes the shell interprets nothing, and the only character that needs care is
 * the single quote itself.
 */

function singleQuoted(word: string): string {
  // A shell word cannot carry NUL; refusing beats silently truncating an argument.
  if (word.includes('\0')) throw new Error('a shell word cannot contain a NUL byte');
  // Close the quote, emit an escaped quote, reopen: ' → '\''
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** One word for a POSIX shell, exactly as given (no globbing, expansion or splitting). */
export function shQuote(word: string): string {
  // Plain words stay readable in logs and golden tests; everything else is single-quoted.
  // '=' is not plain: a leading NAME=value word would become an assignment, not a program.
  if (/^[A-Za-z0-9_@%+:,./-]+$/.test(word)) return word;
  return singleQuoted(word);
}

/** An argv as one shell command line, each element quoted. */
export function shJoin(argv: readonly string[]): string {
  return argv.map(shQuote).join(' ');
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Environment names are spliced unquoted into `NAME=...`, so only safe names pass. */
export function assertEnvName(name: string): void {
  if (!ENV_NAME.test(name)) throw new Error(`not an environment variable name: ${JSON.stringify(name)}`);
}

/** `NAME='value'` prefix words (they set the environment of one command only), sorted for stable output. */
export function shAssignments(env: Record<string, string> | undefined): string[] {
  if (!env) return [];
  return Object.keys(env)
    .sort()
    .map((name) => {
      assertEnvName(name);
      return `${name}=${singleQuoted(env[name])}`;
    });
}
