// What a person is told when a listener cannot bind: the port and the system's code, and what to
// do about it, instead of Node's "listen EADDRINUSE: address already in use 127.0.0.1:7330".

/** Why binding `host`:`port` failed, in one line; the error's own address and port win (the admin listener's). */
export function cannotListen(err: unknown, host: string, port: number): string {
  const e = err as NodeJS.ErrnoException & { address?: string; port?: number };
  const where = e.port ?? port;
  const address = e.address ?? host;
  switch (e.code) {
    case 'EADDRINUSE':
      return `port ${where} is in use (EADDRINUSE) on ${address}: another mcpmux serve or another program listens there; stop it, or choose another port (--port N, or listen.port / listen.adminPort in the config)`;
    case 'EACCES':
      return `port ${where} on ${address} is not allowed for this user (EACCES): ports below 1024 need privileges; choose a port from 1024 up`;
    case 'EADDRNOTAVAIL':
      return `address ${address} is not one of this machine's (EADDRNOTAVAIL): check listen.host / --host`;
    default:
      return `cannot listen on ${address} port ${where}: ${e.message}`;
  }
}
