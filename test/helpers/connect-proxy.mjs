// A real HTTP CONNECT proxy, run as its own process by the egress tests.
// Prints "listening PORT", then one line per CONNECT: "CONNECT host:port" and,
// for a refused one, "REFUSED host:port". Targets whose host is in
// PROXY_DENY_HOSTS (comma-separated) get a 403, as a proxy's policy would.
// Plain (non-CONNECT) requests get a 405: the service must always tunnel.
import { createServer } from 'node:http';
import { connect } from 'node:net';

const deny = new Set((process.env.PROXY_DENY_HOSTS ?? '').split(',').filter(Boolean));
const server = createServer((request, response) => {
  console.log(`PLAIN ${request.method} ${request.url}`);
  response.writeHead(405).end();
});
server.on('connect', (request, client, head) => {
  const target = request.url ?? '';
  const colon = target.lastIndexOf(':');
  const host = target.slice(0, colon).replace(/^\[|\]$/g, '');
  const port = Number(target.slice(colon + 1));
  client.on('error', () => {});
  if (deny.has(host)) {
    console.log(`REFUSED ${target}`);
    client.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
    return;
  }
  console.log(`CONNECT ${target}`);
  const upstream = connect(port, host, () => {
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) upstream.write(head);
    upstream.pipe(client);
    client.pipe(upstream);
  });
  upstream.on('error', () => client.destroy());
  client.on('close', () => upstream.destroy());
});
server.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));
process.on('SIGTERM', () => process.exit(0));
