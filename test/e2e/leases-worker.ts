/**
 * `node --import tsx leases-worker.ts <address> <taskQueue> <bundle.js>`: an aerie worker on
 * one task queue (test/e2e/leases-support.ts starts it), with the prebuilt workflow bundle.
 */
import { NativeConnection } from '@temporalio/worker';
import { createWorker } from '../../src/worker.js';

const [address, taskQueue, codePath] = process.argv.slice(2);
if (!address || !taskQueue || !codePath) throw new Error('usage: leases-worker.ts <address> <taskQueue> <bundle.js>');
// harness-exception: the worker process's own entry point (started by test/support/worker-process's spawnWorkerProcess)
const connection = await NativeConnection.connect({ address });
const { worker } = await createWorker({ connection, taskQueue, workflowBundle: { codePath } });
process.stdout.write(`worker on ${taskQueue}\n`);
await worker.run();
