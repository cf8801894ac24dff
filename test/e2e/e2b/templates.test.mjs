// Templates as code (issue 29): E2B's Template SDK builds on warren, each
// step a command in a build sandbox, with a snapshot after each as the
// step cache. Nothing here reaches the network: the steps copy, run, set
// env, workdir and user.
import { test, describe, before, after } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Sandbox, Template, BuildError, waitForURL } from 'e2b'
import { track, killAll, runId, rawRequest, apiKey } from './helpers.mjs'

after(killAll)

// ctx is the build context: a directory with modes and a symlink.
let ctx
before(() => {
  ctx = fs.mkdtempSync(path.join(os.tmpdir(), 'warren-tpl-'))
  fs.mkdirSync(path.join(ctx, 'app', 'sub'), { recursive: true })
  fs.writeFileSync(path.join(ctx, 'app', 'hello.txt'), 'hello from the context\n')
  fs.chmodSync(path.join(ctx, 'app', 'hello.txt'), 0o640)
  fs.writeFileSync(path.join(ctx, 'app', 'run.sh'), '#!/bin/sh\necho ran\n')
  fs.chmodSync(path.join(ctx, 'app', 'run.sh'), 0o755)
  fs.writeFileSync(path.join(ctx, 'app', 'sub', 'deep.txt'), 'deep\n')
  fs.symlinkSync('hello.txt', path.join(ctx, 'app', 'link'))
})
after(() => fs.rmSync(ctx, { recursive: true, force: true }))

const name = `tpl-${runId}`

function recipe(version) {
  return Template({ fileContextPath: ctx })
    .fromTemplate('base')
    .copy('app', '/home/user/app')
    .setEnvs({ GREETING: 'hi there', QUOTED: "it's $HOME" })
    .runCmd('mkdir -p /srv/site && echo served > /srv/site/index.html', { user: 'root' })
    .setWorkdir('/home/user/app')
    .runCmd('cat hello.txt > copied.txt && echo "$GREETING" > env.txt && pwd > pwd.txt')
    .setUser('user')
    .runCmd(`echo VERSION=${version} > version.txt`)
}

async function build(t, alias, opts = {}) {
  const logs = []
  const start = Date.now()
  try {
    await Template.build(t, alias, { ...opts, onBuildLogs: (e) => logs.push(e) })
  } catch (err) {
    throw new Error(`build of ${alias} failed: ${err.message}\n${logs.map((e) => `${e.level} ${e.message}`).join('\n')}`)
  }
  return { logs: logs.map((e) => `${e.level} ${e.message}`), ms: Date.now() - start }
}

describe('templates', () => {
  let first
  test('Template.build from base: files, modes, symlink, env, workdir, user', async () => {
    first = await build(recipe(1), name, { tags: ['v1'] })
    console.log(`first build: ${first.ms} ms`)
    const sbx = track(await Sandbox.create(name))
    assert.equal(await sbx.files.read('/home/user/app/hello.txt'), 'hello from the context\n')
    assert.equal(await sbx.files.read('/home/user/app/sub/deep.txt'), 'deep\n')
    assert.equal(await sbx.files.read('/home/user/app/copied.txt'), 'hello from the context\n')
    assert.equal(await sbx.files.read('/home/user/app/env.txt'), 'hi there\n')
    assert.equal(await sbx.files.read('/home/user/app/pwd.txt'), '/home/user/app\n')
    assert.equal(await sbx.files.read('/home/user/app/version.txt'), 'VERSION=1\n')
    assert.equal(await sbx.files.read('/srv/site/index.html'), 'served\n')
    const hello = await sbx.files.getInfo('/home/user/app/hello.txt')
    assert.equal(hello.permissions, '-rw-r-----')
    assert.equal(hello.owner, 'user')
    assert.equal((await sbx.files.getInfo('/home/user/app/run.sh')).permissions, '-rwxr-xr-x')
    assert.equal((await sbx.commands.run('readlink /home/user/app/link')).stdout, 'hello.txt\n')
    assert.equal((await sbx.commands.run('/home/user/app/run.sh')).stdout, 'ran\n')
    assert.equal((await sbx.commands.run('echo "$GREETING|$QUOTED"')).stdout, "hi there|it's $HOME\n")
    assert.equal((await sbx.commands.run('stat -c %U /home/user/app/version.txt')).stdout, 'user\n')
    // The sandbox reports the template's id (not its build's snapshot),
    // and a list filtered by the template's name or id finds it.
    const get = async (path) => JSON.parse((await rawRequest({ path, headers: { 'X-API-Key': apiKey } })).body)
    const tplID = (await get(`/templates/aliases/${name}`)).templateID
    assert.match(tplID, /^tpl/)
    const info = await sbx.getInfo()
    assert.deepEqual([info.templateId, info.name], [tplID, name])
    for (const ref of [name, tplID]) {
      const found = await get(`/v2/sandboxes?template=${ref}`)
      assert.deepEqual(found.map((s) => s.sandboxID), [sbx.sandboxId], `template=${ref}`)
    }
    const listed = (await get('/templates')).find((t) => t.templateID === tplID)
    assert.deepEqual([listed.aliases, listed.buildStatus, listed.tags], [[name], 'ready', ['v1']])
    // The build's sandbox is gone: only its snapshots outlive it.
    const left = await Sandbox.list({ query: { metadata: { 'warren.template': name } } }).nextItems()
    assert.deepEqual(left, [])
  })

  test('an unchanged rebuild is all cached; a changed last step runs alone', async () => {
    const again = await build(recipe(1), name)
    console.log(`cached rebuild: ${again.ms} ms`)
    assert.equal(again.logs.filter((l) => l.includes('CACHED')).length, 7, again.logs.join('\n'))
    const changed = await build(recipe(2), name)
    console.log(`last step changed: ${changed.ms} ms (first build ${first.ms} ms)`)
    assert.equal(changed.logs.filter((l) => l.includes('CACHED')).length, 6, changed.logs.join('\n'))
    assert.ok(changed.logs.some((l) => l.includes('[builder 7/7] RUN echo VERSION=2')), changed.logs.join('\n'))
    const sbx = track(await Sandbox.create(name))
    assert.equal(await sbx.files.read('/home/user/app/version.txt'), 'VERSION=2\n')
    // The tag still names the first build.
    const v1 = track(await Sandbox.create(`${name}:v1`))
    assert.equal(await v1.files.read('/home/user/app/version.txt'), 'VERSION=1\n')
  })

  test('skipCache reruns from the step it precedes', async () => {
    const t = Template({ fileContextPath: ctx }).fromTemplate('base').runCmd('echo one > /tmp/one').skipCache().runCmd('date +%s%N > /tmp/two')
    const a = await build(t, `${name}-skip`)
    const b = await build(t, `${name}-skip`)
    assert.equal(b.logs.filter((l) => l.includes('CACHED')).length, 1, b.logs.join('\n'))
    assert.equal(a.logs.filter((l) => l.includes('CACHED')).length, 0)
  })

  test('a failing step fails the build with its stderr, and leaves no template', async () => {
    const bad = `${name}-bad`
    const t = Template().fromTemplate('base').runCmd('echo fine').runCmd('echo this-went-wrong >&2; exit 3')
    const logs = []
    await assert.rejects(Template.build(t, bad, { onBuildLogs: (e) => logs.push(e.message) }), (err) => {
      assert.ok(err instanceof BuildError, String(err))
      assert.match(err.message, /this-went-wrong/)
      assert.match(err.message, /exit code 3/)
      return true
    })
    assert.ok(logs.some((l) => l.includes('this-went-wrong')), logs.join('\n'))
    assert.equal(await Template.exists(bad), false)
    await assert.rejects(Sandbox.create(bad))
  })

  test('a start command with a ready check: a create answers with the server up', async () => {
    const t = Template()
      .fromTemplate('base')
      .runCmd('mkdir -p /srv/site && echo up-at-once > /srv/site/index.html', { user: 'root' })
      .setStartCmd('python3 -m http.server 8000 --bind 127.0.0.1 --directory /srv/site', waitForURL('http://127.0.0.1:8000/'))
    const { logs } = await build(t, `${name}-srv`)
    assert.ok(logs.some((l) => l.includes('Start command ready')), logs.join('\n'))
    const sbx = track(await Sandbox.create(`${name}-srv`))
    assert.equal((await sbx.commands.run('curl -s http://127.0.0.1:8000/index.html')).stdout, 'up-at-once\n')
  })

  test("the last setWorkdir and setUser are its sandboxes' defaults, kept across pause/resume", async () => {
    const t = Template().fromTemplate('base').setWorkdir('/app').setUser('root')
    await build(t, `${name}-defaults`)
    const sbx = track(await Sandbox.create(`${name}-defaults`))
    const check = async (s) => {
      assert.equal((await s.commands.run('pwd')).stdout, '/app\n')
      assert.equal((await s.commands.run('whoami')).stdout, 'root\n')
      assert.equal((await s.commands.run('whoami', { user: 'user' })).stdout, 'user\n')
      assert.equal((await s.commands.run('pwd', { cwd: '/tmp' })).stdout, '/tmp\n')
      await s.files.write('rel.txt', 'relative\n')
      assert.equal((await s.commands.run('cat /app/rel.txt')).stdout, 'relative\n')
    }
    await check(sbx)
    assert.equal(await sbx.pause(), true)
    await check(await Sandbox.connect(sbx.sandboxId))
  })

  test('tags and aliases round-trip', async () => {
    assert.equal(await Template.exists(name), true)
    assert.equal(await Template.aliasExists(name), true)
    assert.equal(await Template.exists(`no-such-${runId}`), false)
    const tags = await Template.getTags(name)
    assert.deepEqual(tags.map((t) => t.tag).sort(), ['default', 'v1'])
    const v1 = tags.find((t) => t.tag === 'v1')
    const res = await Template.assignTags(`${name}:v1`, ['prod', 'stable'])
    assert.equal(res.buildId, v1.buildId)
    const prod = track(await Sandbox.create(`${name}:prod`))
    assert.equal(await prod.files.read('/home/user/app/version.txt'), 'VERSION=1\n')
    await Template.removeTags(name, 'stable')
    assert.deepEqual((await Template.getTags(name)).map((t) => t.tag).sort(), ['default', 'prod', 'v1'])
  })

  test("another team's key: the name is taken, its builds and files are out of reach", async () => {
    const made = await api('POST', '/api-keys', { team: `other-${runId}`, name: 'templates' })
    assert.equal(made.status, 201, made.body)
    const other = { apiKey: JSON.parse(made.body).key }
    // Through a fleet gateway a new key reaches the gateway and the nodes
    // through their watches of its Secret: wait until it authenticates.
    for (let i = 0; i < 100; i++) {
      const res = await rawRequest({ method: 'GET', path: `/templates/aliases/${name}`, headers: { 'X-API-Key': other.apiKey } })
      if (res.status !== 401) break
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    assert.equal(await Template.exists(name, other), true, 'E2B: 403 on the alias means the name is taken')
    await assert.rejects(Template.build(Template().fromTemplate('base').runCmd('true'), name, other), /another team/)
    await assert.rejects(Sandbox.create(name, other))
    await assert.rejects(Template.getTags(name, other), /not found/i)
    const { templateID } = JSON.parse((await api('GET', `/templates/aliases/${name}`)).body)
    const peek = await rawRequest({ method: 'GET', path: `/templates/${templateID}/files/${'ab'.repeat(32)}`, headers: { 'X-API-Key': other.apiKey } })
    assert.equal(peek.status, 404, peek.body)
  })

  test('DELETE /templates/{id} deletes a built template', async () => {
    const gone = `${name}-gone`
    await build(Template().fromTemplate('base').runCmd('echo x > /tmp/x'), gone)
    const { templateID } = JSON.parse((await api('GET', `/templates/aliases/${gone}`)).body)
    const del = await api('DELETE', `/templates/${templateID}`)
    assert.equal(del.status, 204, del.body)
    assert.equal(await Template.exists(gone), false)
  })

  test('a template built from another: its chain and builds, and its parent kept while it depends on it', async () => {
    const parent = `${name}-par`
    const child = `${name}-kid`
    await build(Template().fromTemplate('base').runCmd('echo p > /tmp/p'), parent)
    await build(Template().fromTemplate(parent).runCmd('cat /tmp/p > /tmp/k'), child)
    const kid = track(await Sandbox.create(child))
    assert.equal(await kid.files.read('/tmp/k'), 'p\n')
    const show = await api('GET', `/templates/${child}`)
    assert.equal(show.status, 200, show.body)
    const d = JSON.parse(show.body)
    assert.deepEqual(d.template.chain, [parent, 'base'])
    assert.equal(d.builds.length, 1)
    assert.equal(d.builds[0].status, 'ready')
    assert.equal(d.builds[0].steps, 1)
    assert.equal(d.builds[0].parent.kind, 'build')
    assert.equal(d.builds[0].parent.name, parent)
    const listed = JSON.parse((await api('GET', '/templates')).body).find((t) => t.aliases?.[0] === child)
    assert.deepEqual(listed.chain, [parent, 'base'])
    const refused = await api('DELETE', `/templates/${parent}`)
    assert.equal(refused.status, 409, refused.body)
    assert.match(refused.body, new RegExp(child))
    assert.equal((await api('DELETE', `/templates/${child}`)).status, 204)
    assert.equal((await api('DELETE', `/templates/${parent}`)).status, 204)
  })

  test('bad input: a bad name, an unknown step type, an archive escaping its directory', async () => {
    await assert.rejects(Template.build(Template().fromTemplate('base').runCmd('true'), 'Not A Name!'), /template name/)
    await assert.rejects(Template.build(Template().fromTemplate('base'), 'base'), /server's own templates/)
    const req = await api('POST', '/v3/templates', { name: `${name}-raw` })
    assert.equal(req.status, 202, req.body)
    const { templateID, buildID } = JSON.parse(req.body)
    const bad = await api('POST', `/v2/templates/${templateID}/builds/${buildID}`, { fromTemplate: 'base', steps: [{ type: 'FROBNICATE', args: ['x'] }] })
    assert.equal(bad.status, 400, bad.body)
    assert.match(bad.body, /unknown step type/)
    const hash = 'ab'.repeat(32)
    for (const entry of ['../escape', '/etc/passwd']) {
      const up = await rawRequest({ method: 'PUT', path: `/templates/${templateID}/files/${hash}`, headers: { 'X-API-Key': apiKey }, body: tarOf(entry, '0') })
      assert.equal(up.status, 400, up.body)
    }
    const dev = await rawRequest({ method: 'PUT', path: `/templates/${templateID}/files/${hash}`, headers: { 'X-API-Key': apiKey }, body: tarOf('null', '3') })
    assert.equal(dev.status, 400, dev.body)
    assert.match(dev.body, /character device/)
    const link = JSON.parse((await api('GET', `/templates/${templateID}/files/${hash}`)).body)
    assert.equal(link.present, false, 'a refused upload keeps nothing')
    const copy = await api('POST', `/v2/templates/${templateID}/builds/${buildID}`, { fromTemplate: 'base', steps: [{ type: 'COPY', args: ['a', '/a'], filesHash: hash }] })
    assert.equal(copy.status, 400, copy.body)
  })
})

function api(method, p, body) {
  const headers = { 'X-API-Key': apiKey }
  if (body !== undefined) headers['Content-Type'] = 'application/json'
  return rawRequest({ method, path: p, headers, body: body === undefined ? undefined : JSON.stringify(body) })
}

// tarOf is a one-entry tar (type '0' file, '3' character device) whose
// name the SDK would never write: what a hostile client uploads.
function tarOf(name, type) {
  const h = Buffer.alloc(512)
  h.write(name, 0)
  h.write('0000644\0', 100)
  h.write('0000000\0', 108)
  h.write('0000000\0', 116)
  h.write('00000000000\0', 124)
  h.write('00000000000\0', 136)
  h.write('        ', 148)
  h.write(type, 156)
  h.write('ustar\0', 257)
  h.write('00', 263)
  let sum = 0
  for (const b of h) sum += b
  h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148)
  return Buffer.concat([h, Buffer.alloc(1024)])
}
