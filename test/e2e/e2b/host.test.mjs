// getHost(port): a server inside the sandbox is reached through warren, by
// Host `<port>-<id>.<domain>` or by the E2b-Sandbox-Id/-Port headers.
//
// Node's fetch cannot resolve *.<domain> (nor set Host), so requests go to
// warren's own address with the Host header set by hand.
//
// Who may reach a port: with network.allowPublicTraffic false, E2B wants the
// sandbox's trafficAccessToken in e2b-traffic-access-token; with true,
// anyone. warren's ports are private unless allowPublicTraffic is true, and
// also take the sandbox's envd access token or an API key of its team.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { track, killAll, eventually, rawRequest, apiKey, apiUrl, domain } from './helpers.mjs'

let sbx, pub
before(async () => {
  ;[sbx, pub] = await Promise.all([
    Sandbox.create({ timeoutMs: 300_000, network: { allowPublicTraffic: false } }).then(track),
    Sandbox.create({ timeoutMs: 300_000, network: { allowPublicTraffic: true } }).then(track),
  ])
})
after(killAll)

const page = (s) => `hello from inside ${s.sandboxId}\n`

// startServer starts python's http.server on port 8000 of s once, for the
// tests that need it (not in before(), so that getHost's test runs
// regardless) and waits until it answers.
const servers = new Map()
function startServer(s, creds) {
  if (!servers.has(s)) {
    servers.set(
      s,
      (async () => {
        await s.files.write('/home/user/www/index.txt', page(s))
        const h = await s.commands.run('exec python3 -m http.server 8000', { background: true, cwd: '/home/user/www' })
        await eventually('http.server to answer', async () => (await byHeaders(s, 8000, creds)).status === 200)
        return h
      })(),
    )
  }
  return servers.get(s)
}

const trafficCreds = () => ({ 'e2b-traffic-access-token': sbx.trafficAccessToken })
const byHeaders = (s, port, creds = {}, path = '/index.txt') =>
  rawRequest({ path, headers: { 'E2b-Sandbox-Id': s.sandboxId, 'E2b-Sandbox-Port': String(port), ...creds } })
const byHost = (host, creds = {}, path = '/index.txt') => rawRequest({ path, headers: { Host: host, ...creds } })

test('getHost names <port>-<id>.<domain>, the domain warren reports', async () => {
  assert.equal(typeof sbx.sandboxDomain, 'string')
  assert.ok(sbx.sandboxDomain.length > 0)
  assert.equal(sbx.getHost(8000), `8000-${sbx.sandboxId}.${sbx.sandboxDomain}`)
  // The daemon names its domain (the SDK falls back to E2B_DOMAIN, which the
  // harness sets to warren's configured domain, only when it does not).
  assert.equal((await sbx.getInfo()).sandboxDomain, sbx.sandboxDomain)
  assert.equal(sbx.sandboxDomain, domain)
})

test('allowPublicTraffic: false hands out a traffic access token', () => {
  assert.equal(typeof sbx.trafficAccessToken, 'string')
  assert.ok(sbx.trafficAccessToken.length >= 16)
  assert.notEqual(sbx.trafficAccessToken, sbx.envdAccessToken)
})

test('a python http.server is reached by the E2b-Sandbox-Id/-Port headers', async () => {
  await startServer(sbx, trafficCreds())
  const res = await byHeaders(sbx, 8000, trafficCreds())
  assert.equal(res.status, 200, res.body)
  assert.equal(res.body, page(sbx))
  assert.match(res.headers['server'] ?? '', /SimpleHTTP/, 'the answer comes from python')
  const listing = await byHeaders(sbx, 8000, trafficCreds(), '/')
  assert.equal(listing.status, 200)
  assert.match(listing.body, /index\.txt/)
  const missing = await byHeaders(sbx, 8000, trafficCreds(), '/nope')
  assert.equal(missing.status, 404, "python's own 404 passes through")
})

test('the same server is reached by Host: getHost(8000)', async () => {
  await startServer(sbx, trafficCreds())
  const res = await byHost(sbx.getHost(8000), trafficCreds())
  assert.equal(res.status, 200, res.body)
  assert.equal(res.body, page(sbx))
  // With a port in the Host too, as a browser would send it.
  const withPort = await byHost(`${sbx.getHost(8000)}:${apiUrl.port}`, trafficCreds())
  assert.equal(withPort.status, 200)
  assert.equal(withPort.body, page(sbx))
})

test('a private port refuses a request without credentials; warren also takes the envd token or an API key', async () => {
  await startServer(sbx, trafficCreds())
  for (const [what, creds] of [
    ['no credential', {}],
    ['a wrong traffic token', { 'e2b-traffic-access-token': 'wrong' }],
    ["the public sandbox's traffic token", { 'e2b-traffic-access-token': pub.trafficAccessToken ?? 'none' }],
  ]) {
    const r = await byHost(sbx.getHost(8000), creds)
    assert.ok(r.status === 401 || r.status === 403, `${what}: want 401 or 403, got ${r.status} ${r.body}`)
    assert.ok(!r.body.includes(page(sbx)), `${what}: the page leaked`)
  }
  const byEnvdToken = await byHost(sbx.getHost(8000), { 'X-Access-Token': sbx.envdAccessToken })
  assert.equal(byEnvdToken.status, 200)
  const byKey = await byHeaders(sbx, 8000, { 'X-API-Key': apiKey })
  assert.equal(byKey.status, 200)
  assert.equal(byKey.body, page(sbx))
})

test('allowPublicTraffic: true serves a port without credentials', async () => {
  await startServer(pub)
  const res = await byHost(pub.getHost(8000))
  assert.equal(res.status, 200, res.body)
  assert.equal(res.body, page(pub))
})

test('a port nothing listens on answers 502', async () => {
  const r1 = await byHeaders(sbx, 8001, trafficCreds())
  assert.equal(r1.status, 502, r1.body)
  const r2 = await byHost(sbx.getHost(8001), trafficCreds())
  assert.equal(r2.status, 502, r2.body)
})

test('once the server is killed, its port answers 502', async () => {
  const server = await startServer(sbx, trafficCreds())
  assert.equal(await server.kill(), true)
  await eventually('502 after the server is gone', async () => (await byHeaders(sbx, 8000, trafficCreds())).status === 502)
})
