#!/usr/bin/env node
// A stand-in for an older SGLang whose /health answered 200 as soon as uvicorn ran, before
// the warmup generation succeeded (see shared/reference/sglang.md, "Readiness endpoints").
// aerie-sim models the newer behaviour only, so this small fake covers the older one:
// /health 200 at once; /health_generate and /generate 503 until the "fired up" line, which
// it prints READY_AFTER_MS after it starts. Takes the launch_server flags aerie passes.
import http from 'node:http';

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(name);
  return i === -1 ? fallback : args[i + 1];
};
const port = Number(flag('--port', '30000'));
const host = flag('--host', '127.0.0.1');
const modelPath = flag('--model-path', '');
const tpSize = Number(flag('--tp-size', '1'));
const readyAfter = Number(process.env.OLD_SGLANG_READY_AFTER_MS ?? '2500');

const stamp = () => new Date().toISOString().replace('T', ' ').slice(0, 19);
const log = (msg) => process.stderr.write(`[${stamp()}] ${msg}\n`);
let ready = false;

const send = (res, status, body) => {
  res.writeHead(status, { 'content-type': typeof body === 'string' ? 'text/plain' : 'application/json' });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
};

// harness-exception: this script is the fake server's own process (started through test/support)
const server = http.createServer((req, res) => {
  const path = (req.url ?? '/').split('?')[0];
  if (path === '/health') return send(res, 200, '');
  if (path === '/health_generate') return send(res, ready ? 200 : 503, '');
  if (path === '/get_server_info' || path === '/server_info') {
    return send(res, 200, {
      model_path: modelPath,
      port,
      tp_size: tpSize,
      speculative_algorithm: null,
      version: '0.3.0',
    });
  }
  if (path === '/generate') {
    req.resume();
    if (!ready) return send(res, 503, { error: { message: 'the server is still warming up' } });
    return send(res, 200, {
      text: ' Paris.',
      meta_info: {
        id: 'x',
        finish_reason: { type: 'length', length: 2 },
        prompt_tokens: 5,
        completion_tokens: 2,
        cached_tokens: 0,
      },
    });
  }
  send(res, 404, { detail: 'Not Found' });
});

server.listen(port, host, () => {
  log('Load weight begin. avail mem=78.00 GB');
  setTimeout(() => {
    log('Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=60.00 GB, mem usage=18.00 GB.');
    process.stdout.write(`INFO:     Uvicorn running on http://${host}:${port} (Press CTRL+C to quit)\n`);
  }, readyAfter / 3);
  setTimeout(() => {
    ready = true;
    log('The server is fired up and ready to roll!');
  }, readyAfter);
});

for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
