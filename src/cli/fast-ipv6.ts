// grpc-js asks net.isIPv6 about every address it dials and logs (seven times for one broker).
// Node's check runs a large regular expression that V8 compiles on first use, 3-4 ms of every
// gazctl start here, though a broker address is almost always an IPv4 address or a host name.
// An IPv6 address always holds a ':', so a string without one is answered at once, with the
// answer Node's check gives; anything else goes to Node's check. Installed by the CLI only.
import net from 'node:net';

let installed = false;

/** Answers net.isIPv6 for strings without a ':' without Node's regular expression. */
export function installFastIsIPv6(): void {
  if (installed) return;
  installed = true;
  const nodeIsIPv6 = net.isIPv6;
  net.isIPv6 = function isIPv6(input: string): boolean {
    if (typeof input === 'string' && !input.includes(':')) return false;
    return nodeIsIPv6(input);
  };
}
