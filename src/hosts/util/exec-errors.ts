/**
 * Why an exec did not produce a normal result. Both carry the output seen so far so a
 * failure report can show it.
 */
export class ExecTimeoutError extends Error {
  override readonly name = 'ExecTimeoutError';
  constructor(
    readonly argv: readonly string[],
    readonly timeoutMs: number,
    readonly stdout: string,
    readonly stderr: string,
  ) {
    super(`${argv[0]} did not finish within ${timeoutMs} ms and was stopped`);
  }
}

export class ExecAbortedError extends Error {
  override readonly name = 'AbortError';
  constructor(
    readonly argv: readonly string[],
    readonly stdout: string,
    readonly stderr: string,
  ) {
    super(`${argv[0]} was cancelled`);
  }
}
