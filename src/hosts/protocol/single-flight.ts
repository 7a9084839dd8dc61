/**
 * One launch per id at a time within a worker: a second caller asking for the same id while
 * the first launch is still in flight shares its outcome instead of starting a process.
 */
export async function sharedInFlight<T>(
  inFlight: Map<string, Promise<T>>,
  key: string,
  start: () => Promise<T>,
): Promise<{ value: T; shared: boolean }> {
  const pending = inFlight.get(key);
  if (pending) return { value: await pending, shared: true };
  const running = start();
  inFlight.set(key, running);
  try {
    return { value: await running, shared: false };
  } finally {
    inFlight.delete(key);
  }
}
