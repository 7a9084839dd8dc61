/** SshHost: the Host interface on a remote machine over one SSH connection. */
export { SshConnectError, SshTrustError } from './connect.js';
export { SshHost } from './ssh-host.js';
