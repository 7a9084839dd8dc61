/** Small helpers both hosts use: shell quoting, output caps, UTF-8 cuts, exec errors, /proc/net/tcp. */
export { ExecAbortedError, ExecTimeoutError } from './exec-errors.js';
export { listenersOnPort, parseProcNetTcp, parseProcNetTcpScan, PROC_NET_TCP_SCAN } from './net-tcp.js';
export { assertEnvName, shAssignments, shJoin, shQuote } from './shell-quote.js';
export { DEFAULT_OUTPUT_CAP, TailBuffer } from './tail-buffer.js';
export { completeUtf8Length } from './utf8.js';
