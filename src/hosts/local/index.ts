/** LocalHost: the Host interface on the worker's own machine. */
export { LocalHost } from './local-host.js';
