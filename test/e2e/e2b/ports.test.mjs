// Port URLs as E2B's users open them: fetch('https://' + sandbox.getHost(port)).
//
// TestE2BSDK starts the daemon with a TLS listener and warren's own CA
// (--tls-listen, --tls-ca auto) and hands node the CA (`warren ca`) in
// NODE_EXTRA_CA_CERTS and the listener's port in WARREN_TLS_PORT: the
// fetches below succeed only when the certificate warren minted for
// <port>-<id>.localhost verifies. *.localhost resolves to loopback
// (libnss-myhostname, which `make deps` installs). The URL names the TLS
// port because the test daemon does not own 443. A daemon without TLS (a
// fleet's gateway) runs the same checks over http.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, SandboxError } from 'e2b'
import { track, killAll, eventually, apiUrl, runId, listAll } from './helpers.mjs'

const tlsPort = process.env.WARREN_TLS_PORT
const portUrl = (s, port, path = '/') =>
  tlsPort ? `https://${s.getHost(port)}:${tlsPort}${path}` : `http://${s.getHost(port)}:${apiUrl.port}${path}`

const meta = { portsRun: runId }
let pub, priv, masked
before(async () => {
  ;[pub, priv, masked] = await Promise.all([
    Sandbox.create({ timeoutMs: 300_000, metadata: meta, network: { allowPublicTraffic: true } }).then(track),
    Sandbox.create({ timeoutMs: 300_000, metadata: meta, network: { allowPublicTraffic: false } }).then(track),
    Sandbox.create({
      timeoutMs: 300_000,
      metadata: meta,
      network: { allowPublicTraffic: true, maskRequestHost: 'localhost:${PORT}' },
    }).then(track),
  ])
})
after(killAll)

const page = (s) => `served from ${s.sandboxId}\n`

// serveFiles runs `python3 -m http.server 8000` in s over a page of its own
// and waits until its port URL answers (with creds, for a private port).
async function serveFiles(s, headers = {}) {
  await s.files.write('/home/user/www/index.txt', page(s))
  await s.commands.run('exec python3 -m http.server 8000', { background: true, cwd: '/home/user/www' })
  await eventually('http.server to answer', async () => (await fetch(portUrl(s, 8000, '/index.txt'), { headers })).status === 200)
}

// A server that answers with the Host header it was sent.
const echoHost = `
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = (self.headers.get('Host') or '').encode()
        self.send_response(200)
        self.send_header('Content-Length', str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(('0.0.0.0', 8000), H).serve_forever()
`

test('fetch(https:// + getHost(8000)) reaches python3 -m http.server in the sandbox', async () => {
  await serveFiles(pub)
  const res = await fetch(portUrl(pub, 8000, '/index.txt'))
  assert.equal(res.status, 200)
  assert.equal(await res.text(), page(pub))
  assert.match(res.headers.get('server') ?? '', /SimpleHTTP/, 'the answer comes from python')
  const listing = await fetch(portUrl(pub, 8000, '/'))
  assert.match(await listing.text(), /index\.txt/)
})

test('a private port: E2B\'s 403 without the traffic token and with a wrong one, served with it', async () => {
  const token = { 'e2b-traffic-access-token': priv.trafficAccessToken }
  await serveFiles(priv, token)
  const without = await fetch(portUrl(priv, 8000, '/index.txt'))
  assert.equal(without.status, 403)
  assert.deepEqual(await without.json(), {
    code: 403,
    message: "Sandbox is secured with traffic access token. Token header 'e2b-traffic-access-token' is missing",
    sandboxId: priv.sandboxId,
  })
  const wrong = await fetch(portUrl(priv, 8000, '/index.txt'), { headers: { 'e2b-traffic-access-token': 'not-the-token' } })
  assert.equal(wrong.status, 403)
  assert.deepEqual(await wrong.json(), {
    code: 403,
    message: 'Sandbox is secured with traffic access token. Provided token is invalid.',
    sandboxId: priv.sandboxId,
  })
  const served = await fetch(portUrl(priv, 8000, '/index.txt'), { headers: token })
  assert.equal(served.status, 200)
  assert.equal(await served.text(), page(priv))
})

test('maskRequestHost: the server inside sees the Host the sandbox asked for, ${PORT} filled in', async () => {
  await masked.files.write('/home/user/echo.py', echoHost)
  await masked.commands.run('exec python3 /home/user/echo.py', { background: true })
  const seen = await eventually('the echo server to answer', async () => {
    const r = await fetch(portUrl(masked, 8000))
    return r.status === 200 && (await r.text())
  })
  assert.equal(seen, 'localhost:8000')
  const info = await masked.getInfo()
  assert.equal(info.network?.maskRequestHost, 'localhost:${PORT}')
})

test('a maskRequestHost that is not a host is a 400 that makes nothing', async () => {
  const bad = { portsRun: runId, bad: 'mask' }
  const err = await Sandbox.create({ metadata: bad, network: { maskRequestHost: 'evil.com\r\nX-Injected: 1' } }).then(
    (s) => (track(s), assert.fail('a header-splitting maskRequestHost was accepted')),
    (e) => e,
  )
  assert.ok(err instanceof SandboxError, `${err?.name}: ${err}`)
  assert.equal(err.statusCode, 400, String(err))
  assert.match(err.message, /maskRequestHost/)
  assert.deepEqual(await listAll({ query: { metadata: bad } }), [])
})

test('a killed sandbox\'s port URL answers E2B\'s 502 "The sandbox was not found"', async () => {
  await Sandbox.kill(pub.sandboxId)
  const res = await fetch(portUrl(pub, 8000, '/index.txt'))
  assert.equal(res.status, 502)
  assert.deepEqual(await res.json(), { code: 502, message: 'The sandbox was not found', sandboxId: pub.sandboxId })
})
