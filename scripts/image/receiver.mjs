// A webhook receiver for test-image.sh: listens on 127.0.0.1 (a free port,
// written to the file argv[2] once listening), appends every request to the
// file argv[3] as one JSON line {method, url, headers, body}, answers 200.
import { appendFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';

const [portFile, requestsFile] = process.argv.slice(2);
if (!portFile || !requestsFile) {
  process.stderr.write('usage: node receiver.mjs PORT_FILE REQUESTS_FILE\n');
  process.exit(2);
}
const server = createServer((request, response) => {
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    appendFileSync(
      requestsFile,
      JSON.stringify({ method: request.method, url: request.url, headers: request.headers, body }) + '\n',
    );
    response.writeHead(200).end();
  });
});
server.listen(0, '127.0.0.1', () => writeFileSync(portFile, String(server.address().port)));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
