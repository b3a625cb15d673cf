// A fault-injecting HTTP proxy in front of the tests' S3 server (tests/support/aws_servers.cpp):
// requests pass through to the target unless the current plan picks them for a fault. The plan is
// set, and counters read, on the proxy's own path /__faults (POST a JSON plan, GET the counters).
//
// A plan (every field optional; "every N" counts the requests a rule may apply to, 1-based):
//   {"status_every": N, "status": 500|503, "code": "InternalError"|"SlowDown"}
//        answer with that S3 error instead of forwarding
//   {"reset_body_every": N}   forward a GET, pass half of the answer's body, then cut the connection
//   {"lose_put_every": N}     forward a PUT or POST (it takes effect), then cut the connection
//                             without answering: the client cannot know it succeeded
//   {"stall_every": N, "stall_ms": M}
//                             forward a request (it takes effect), then hold the answer M ms
//                             (default 5000) before sending it: a client with a shorter stall
//                             timeout gives up and retries
//   {"methods": ["GET"]}      apply status_every only to these methods (default: all)
//
//   node s3_fault_proxy.mjs <listen port> <target port>
import http from 'node:http';

const [listenPort, targetPort] = process.argv.slice(2).map(Number);
let plan = {};
let counters = {};

function resetCounters() {
  counters = {requests: 0, statuses: 0, resets: 0, lost_puts: 0, ranged_gets: 0, stalls: 0,
              seen: {}};
}
resetCounters();

// Whether the `rule`'s nth eligible request is this one.
function picks(rule, key) {
  const every = plan[rule];
  if (!every) return false;
  counters.seen[key] = (counters.seen[key] || 0) + 1;
  return counters.seen[key] % every === 0;
}

function forward(request, body, onResponse) {
  const upstream = http.request(
      {host: '127.0.0.1', port: targetPort, method: request.method, path: request.url,
       headers: request.headers},
      onResponse);
  upstream.on('error', () => request.socket.destroy());
  upstream.end(body);
}

const server = http.createServer((request, response) => {
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
    const body = Buffer.concat(chunks);
    if (request.url === '/__faults') {
      if (request.method === 'POST') {
        plan = JSON.parse(body.toString() || '{}');
        resetCounters();
      }
      response.writeHead(200, {'content-type': 'application/json'});
      response.end(JSON.stringify(counters));
      return;
    }
    counters.requests++;
    if (request.method === 'GET' && request.headers.range) counters.ranged_gets++;
    const methods = plan.methods || null;
    if ((!methods || methods.includes(request.method)) && picks('status_every', 'status')) {
      counters.statuses++;
      const code = plan.code || 'InternalError';
      response.writeHead(plan.status || 500, {'content-type': 'application/xml'});
      response.end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code>` +
                   `<Message>injected by the test proxy</Message></Error>`);
      return;
    }
    const isWrite = request.method === 'PUT' || request.method === 'POST';
    if (isWrite && picks('lose_put_every', 'put')) {
      forward(request, body, (upstream) => {
        upstream.resume();
        upstream.on('end', () => {
          counters.lost_puts++;
          request.socket.destroy();
        });
      });
      return;
    }
    if (picks('stall_every', 'stall')) {
      counters.stalls++;
      forward(request, body, (upstream) => {
        const chunks = [];
        upstream.on('data', (chunk) => chunks.push(chunk));
        upstream.on('end', () => setTimeout(() => {
          if (request.socket.destroyed) return;
          response.writeHead(upstream.statusCode, upstream.headers);
          response.end(Buffer.concat(chunks));
        }, plan.stall_ms || 5000));
      });
      return;
    }
    const cutsBody = request.method === 'GET' && picks('reset_body_every', 'get');
    forward(request, body, (upstream) => {
      const length = Number(upstream.headers['content-length'] || 0);
      if (!cutsBody || length < 2) {
        response.writeHead(upstream.statusCode, upstream.headers);
        upstream.pipe(response);
        return;
      }
      response.writeHead(upstream.statusCode, upstream.headers);
      let passed = 0;
      upstream.on('data', (chunk) => {
        if (passed >= length / 2) return;
        const part = chunk.subarray(0, Math.max(0, Math.ceil(length / 2) - passed));
        passed += part.length;
        response.write(part);
        if (passed >= length / 2) {
          counters.resets++;
          setTimeout(() => request.socket.destroy(), 20);
        }
      });
    });
  });
});
server.keepAliveTimeout = 5000;
server.listen(listenPort, '127.0.0.1');
