/** SshHost: the Host interface on a remote machine over one SSH connection. */
export { SshHost } from './ssh-host.js';
