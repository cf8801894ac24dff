// Templates as code with packages (issue 29): aptInstall, pipInstall and a
// start command with waitForPort, built from `base` with the build's
// network denied (warren's build extension: allowInternetAccess false).
// Nothing leaves the machine: apt reads a repository of one .deb this
// test makes, pip a wheel it makes, both copied into the build.
import { test, describe, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import zlib from 'node:zlib'
import { Sandbox, Template, waitForPort } from 'e2b'
import { track, killAll, runId, rawRequest, apiKey, apiUrl } from './helpers.mjs'

after(killAll)

const sha256 = (b) => crypto.createHash('sha256').update(b).digest()

// makeRepo writes a flat apt repository: one .deb (dpkg-deb) whose payload
// is a script in /usr/local/bin, and its Packages index.
function makeRepo(dir) {
  const pkg = path.join(os.tmpdir(), `warren-deb-${runId}`)
  fs.mkdirSync(path.join(pkg, 'DEBIAN'), { recursive: true })
  fs.mkdirSync(path.join(pkg, 'usr/local/bin'), { recursive: true })
  const control = ['Package: warren-hello', 'Version: 1.0', 'Architecture: all',
    'Maintainer: warren tests <tests@warren.invalid>', 'Description: says hello from a local apt repository']
  fs.writeFileSync(path.join(pkg, 'DEBIAN/control'), control.join('\n') + '\n')
  fs.writeFileSync(path.join(pkg, 'usr/local/bin/warren-hello'), '#!/bin/sh\necho hello from a local deb\n', { mode: 0o755 })
  fs.mkdirSync(dir, { recursive: true })
  const deb = 'warren-hello_1.0_all.deb'
  execFileSync('dpkg-deb', ['--root-owner-group', '--build', pkg, path.join(dir, deb)], { stdio: 'pipe' })
  fs.rmSync(pkg, { recursive: true, force: true })
  const data = fs.readFileSync(path.join(dir, deb))
  const entry = [...control.slice(0, 4), `Filename: ./${deb}`, `Size: ${data.length}`,
    `SHA256: ${sha256(data).toString('hex')}`, control[4]]
  fs.writeFileSync(path.join(dir, 'Packages'), entry.join('\n') + '\n')
}

// zipStored is a zip archive of files ({name: Buffer}), stored uncompressed.
function zipStored(files) {
  const locals = []
  const central = []
  let offset = 0
  for (const [name, data] of Object.entries(files)) {
    const n = Buffer.from(name)
    const crc = zlib.crc32(data)
    const head = Buffer.alloc(30)
    head.writeUInt32LE(0x04034b50, 0); head.writeUInt16LE(20, 4)
    head.writeUInt32LE(crc, 14); head.writeUInt32LE(data.length, 18); head.writeUInt32LE(data.length, 22)
    head.writeUInt16LE(n.length, 26)
    const dir = Buffer.alloc(46)
    dir.writeUInt32LE(0x02014b50, 0); dir.writeUInt16LE(20, 4); dir.writeUInt16LE(20, 6)
    dir.writeUInt32LE(crc, 16); dir.writeUInt32LE(data.length, 20); dir.writeUInt32LE(data.length, 24)
    dir.writeUInt16LE(n.length, 28); dir.writeUInt32LE(offset, 42)
    locals.push(head, n, data)
    central.push(dir, n)
    offset += 30 + n.length + data.length
  }
  const cd = Buffer.concat(central)
  const end = Buffer.alloc(22)
  const count = Object.keys(files).length
  end.writeUInt32LE(0x06054b50, 0); end.writeUInt16LE(count, 8); end.writeUInt16LE(count, 10)
  end.writeUInt32LE(cd.length, 12); end.writeUInt32LE(offset, 16)
  return Buffer.concat([...locals, cd, end])
}

// makeWheel writes a pure-Python wheel of the module warren_hello.
function makeWheel(dir) {
  const info = 'warren_hello-1.0.dist-info'
  const files = {
    'warren_hello/__init__.py': Buffer.from('def hello():\n    return "hello from a local wheel"\n'),
    [`${info}/METADATA`]: Buffer.from('Metadata-Version: 2.1\nName: warren_hello\nVersion: 1.0\nSummary: a test wheel\n'),
    [`${info}/WHEEL`]: Buffer.from('Wheel-Version: 1.0\nGenerator: warren-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n'),
  }
  const record = Object.entries(files).map(([n, b]) => `${n},sha256=${sha256(b).toString('base64url')},${b.length}`)
  files[`${info}/RECORD`] = Buffer.from([...record, `${info}/RECORD,,`].join('\n') + '\n')
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, 'warren_hello-1.0-py3-none-any.whl'), zipStored(files))
}

// buildProxy is an API proxy on loopback that adds warren's build
// extension fields (extra) to the SDK's build request (POST
// /v2/templates/{id}/builds/{buildID}): the SDK has no option for them.
// It keeps the build's ids in lastBuild.
let lastBuild
async function buildProxy(extra) {
  const server = http.createServer(async (req, res) => {
    const chunks = []
    for await (const c of req) chunks.push(c)
    let body = Buffer.concat(chunks)
    const m = req.url.match(/^\/v2\/templates\/([^/?]+)\/builds\/([^/?]+)$/)
    if (req.method === 'POST' && m) {
      lastBuild = { templateID: m[1], buildID: m[2] }
      body = Buffer.from(JSON.stringify({ ...JSON.parse(body.toString()), ...extra }))
    }
    const headers = { ...req.headers }
    for (const h of ['host', 'content-length', 'connection', 'keep-alive', 'transfer-encoding', 'expect']) delete headers[h]
    try {
      const up = await fetch(new URL(req.url, apiUrl), { method: req.method, headers, body: ['GET', 'HEAD'].includes(req.method) ? undefined : body })
      const out = Buffer.from(await up.arrayBuffer())
      const back = { 'content-length': String(out.length) }
      if (up.headers.has('content-type')) back['content-type'] = up.headers.get('content-type')
      res.writeHead(up.status, back)
      res.end(out)
    } catch (err) {
      res.writeHead(502)
      res.end(`${err} (${err.cause ?? ''})`)
    }
  })
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => server.close() }
}

async function build(t, alias, extra) {
  const logs = []
  const proxy = await buildProxy(extra)
  try {
    await Template.build(t, alias, { apiUrl: proxy.url, onBuildLogs: (e) => logs.push(e) })
  } catch (err) {
    throw new Error(`build of ${alias} failed: ${err.message}\n${logs.map((e) => `${e.level} ${e.message}`).join('\n')}`)
  } finally {
    proxy.close()
  }
  return logs.map((e) => `${e.level} ${e.message}`)
}

// hostAddresses are this host's IPv4 addresses other than loopback (its
// uplink's, warren's bridge's): what a build must not reach without a network.
function hostAddresses() {
  return Object.values(os.networkInterfaces()).flat()
    .filter((a) => a.family === 'IPv4' && !a.internal).map((a) => a.address)
}

describe('templates with packages, network denied', () => {
  let ctx, server, hits = 0
  before(async () => {
    ctx = fs.mkdtempSync(path.join(os.tmpdir(), 'warren-tplpkg-'))
    makeRepo(path.join(ctx, 'repo'))
    makeWheel(path.join(ctx, 'wheels'))
    server = http.createServer((req, res) => { hits++; res.end('reached\n') })
    await new Promise((r) => server.listen(0, '0.0.0.0', r))
  })
  after(() => {
    server?.close()
    fs.rmSync(ctx, { recursive: true, force: true })
  })

  test('aptInstall and pipInstall from local repositories, start command with waitForPort', async () => {
    const alias = `tplpkg-${runId}`
    const port = server.address().port
    const probes = hostAddresses().map((a) => `curl -s -m 3 http://${a}:${port}/ >/dev/null 2>&1; echo "${a} $?" >> /srv/probes.txt`)
    const t = Template({ fileContextPath: ctx })
      .fromTemplate('base')
      .copy('repo', '/srv/repo')
      .copy('wheels', '/srv/wheels')
      .runCmd(['rm -f /etc/apt/sources.list.d/*', "echo 'deb [trusted=yes] file:/srv/repo ./' > /etc/apt/sources.list",
        'touch /srv/probes.txt', ...probes], { user: 'root' })
      .aptInstall(['warren-hello'])
      .setEnvs({ PIP_NO_INDEX: '1', PIP_FIND_LINKS: '/srv/wheels' })
      .pipInstall(['warren_hello'])
      .setStartCmd('python3 -m http.server 8000 --directory /srv/repo', waitForPort(8000))
    const logs = await build(t, alias, { allowInternetAccess: false })
    assert.ok(logs.some((l) => l.includes('network: none (loopback only)')), logs.join('\n'))
    assert.ok(logs.some((l) => l.includes('Start command ready')), logs.join('\n'))

    const sbx = track(await Sandbox.create(alias))
    // The server answers at once: the create waited for waitForPort.
    const served = await sbx.commands.run('curl -s http://127.0.0.1:8000/Packages')
    assert.match(served.stdout, /^Package: warren-hello$/m)
    assert.equal((await sbx.commands.run('warren-hello')).stdout, 'hello from a local deb\n')
    assert.equal((await sbx.commands.run('dpkg-query -W -f=\'${Status}\' warren-hello')).stdout, 'install ok installed')
    const py = await sbx.commands.run('python3 -c "import warren_hello; print(warren_hello.hello())"')
    assert.equal(py.stdout, 'hello from a local wheel\n')
    // pipInstall ran as root into the system Python (base's pip.conf).
    assert.match((await sbx.commands.run('pip show -f warren_hello')).stdout, /Location: \/usr\/local\/lib\/python3/)

    // The build with network denied reached none of the host's addresses.
    const probed = (await sbx.files.read('/srv/probes.txt')).trim().split('\n').filter(Boolean)
    assert.equal(probed.length, hostAddresses().length, probed.join('\n'))
    for (const line of probed) assert.notEqual(line.split(' ')[1], '0', `the build reached ${line}`)
    assert.equal(hits, 0)

    // The build's record says which network it had.
    const { templateID, buildID } = lastBuild
    const st = JSON.parse((await rawRequest({ path: `/templates/${templateID}/builds/${buildID}/status`, headers: { 'X-API-Key': apiKey } })).body)
    assert.equal(st.status, 'ready')
    assert.equal(st.network, 'none (loopback only)')
  })

  test('a malformed build network is a 400', async () => {
    const t = Template().fromTemplate('base').runCmd('true')
    await assert.rejects(build(t, `tplpkg-bad-${runId}`, { network: { allowOut: ['not a/cidr'] } }), /not a\/cidr/)
    // The API's answer itself, for a network and for allowInternetAccess
    // that is not a boolean.
    const headers = { 'X-API-Key': apiKey, 'Content-Type': 'application/json' }
    const req = await rawRequest({ method: 'POST', path: '/v3/templates', headers, body: JSON.stringify({ name: `tplpkg-raw-${runId}` }) })
    assert.equal(req.status, 202, req.body)
    const { templateID, buildID } = JSON.parse(req.body)
    for (const extra of [{ network: { denyOut: ['10.0.0.0/99'] } }, { allowInternetAccess: 'yes' }]) {
      const res = await rawRequest({ method: 'POST', path: `/v2/templates/${templateID}/builds/${buildID}`, headers,
        body: JSON.stringify({ fromTemplate: 'base', steps: [{ type: 'RUN', args: ['true'] }], ...extra }) })
      assert.equal(res.status, 400, `${JSON.stringify(extra)}: ${res.status} ${res.body}`)
    }
  })
})
