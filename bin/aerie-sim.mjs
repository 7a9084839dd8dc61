#!/usr/bin/env node
// aerie-sim: the SGLang-compatible server and SpecForge-compatible trainer used for dry runs
// and tests. Registers tsx so the TypeScript sources run as they are, from any cwd.
import { register } from 'tsx/esm/api';

register();
const { main } = await import(new URL('../sim/main.ts', import.meta.url).href);
const code = await main(process.argv.slice(2));
// Exit explicitly: a server leaves sockets and timers behind on purpose.
process.exit(code);
