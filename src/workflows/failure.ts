/** Reading a failure the workflow caught: what the activity said, not Temporal's wrapper text. */

/** The innermost failure message. */
export function failureMessage(err: unknown): string {
  let e = err as { message?: string; cause?: unknown } | undefined;
  let msg = e?.message ?? String(err);
  while (e?.cause) {
    e = e.cause as { message?: string; cause?: unknown };
    if (e?.message) msg = e.message;
  }
  return msg;
}
