// Sandbox lifecycle through the control plane: create (with and without a
// template and options), getInfo, setTimeout, connect, list (filters and
// pagination), pause, kill.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, SandboxNotFoundError } from 'e2b'
import { track, killAll, runId, listAll, eventually } from './helpers.mjs'

after(killAll)

// approx asserts that a duration in ms is within tolerance of want.
function approx(got, want, tolerance, what) {
  assert.ok(Math.abs(got - want) <= tolerance, `${what}: ${got} ms, want ${want} ± ${tolerance} ms`)
}

test('Sandbox.create() with no arguments: base template, running, 300 s timeout, access token; kill', async () => {
  const t0 = Date.now()
  const sbx = track(await Sandbox.create())
  assert.match(sbx.sandboxId, /^[a-z0-9]+$/, 'sandbox ids are safe in a host name')
  assert.equal(typeof sbx.envdAccessToken, 'string', 'every sandbox secures envd access (SDK 2.51)')
  assert.ok(sbx.envdAccessToken.length >= 16, 'access token too short to be a secret')

  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.equal(info.templateId, 'base')
  assert.equal(info.state, 'running')
  assert.deepEqual(info.metadata, {})
  assert.match(info.envdVersion, /^\d+\.\d+\.\d+/)
  assert.ok(info.startedAt.getTime() >= t0 - 5_000 && info.startedAt.getTime() <= Date.now() + 5_000, `startedAt ${info.startedAt.toISOString()}`)
  approx(info.endAt - info.startedAt, 300_000, 5_000, 'default timeout (endAt - startedAt)')
  assert.ok(info.cpuCount > 0, `cpuCount ${info.cpuCount}`)
  assert.ok(info.memoryMB > 0, `memoryMB ${info.memoryMB}`)

  assert.equal(await sbx.kill(), true)
  assert.equal(await Sandbox.kill(sbx.sandboxId), false, 'a second kill finds nothing')
  await assert.rejects(sbx.getInfo(), SandboxNotFoundError)
  await assert.rejects(Sandbox.connect(sbx.sandboxId), SandboxNotFoundError)
})

test('Sandbox.kill of an unknown id answers false', async () => {
  assert.equal(await Sandbox.kill('nosuchsandbox0000'), false)
})

// Three sandboxes tagged with this file's runId: a (no template), b (base
// with options), c (base). The tests below share them.
let a, b, c
const envs = { WARREN_E2B_FOO: 'foo value', SHADOWED: 'from sandbox' }

before(async () => {
  ;[a, b, c] = await Promise.all([
    Sandbox.create({ metadata: { run: runId, name: 'a' } }).then(track),
    Sandbox.create('base', { timeoutMs: 120_000, metadata: { run: runId, name: 'b', suite: 'e2b-compat' }, envs }).then(track),
    Sandbox.create('base', { metadata: { run: runId, name: 'c' } }).then(track),
  ])
})

test('create with templateId, timeoutMs, metadata and envs', async () => {
  const info = await b.getInfo()
  assert.equal(info.templateId, 'base')
  assert.deepEqual(info.metadata, { run: runId, name: 'b', suite: 'e2b-compat' })
  approx(info.endAt - info.startedAt, 120_000, 5_000, 'timeoutMs 120 s (endAt - startedAt)')

  // Sandbox envs reach every command; a command's own envs win.
  const r1 = await b.commands.run('echo "$WARREN_E2B_FOO|$SHADOWED"')
  assert.equal(r1.stdout, 'foo value|from sandbox\n')
  const r2 = await b.commands.run('echo "$WARREN_E2B_FOO|$SHADOWED"', { envs: { SHADOWED: 'from command' } })
  assert.equal(r2.stdout, 'foo value|from command\n')

  const infoA = await a.getInfo()
  assert.equal(infoA.templateId, 'base', 'no template means base')
  assert.deepEqual(infoA.metadata, { run: runId, name: 'a' })
  const r3 = await a.commands.run('echo "[$WARREN_E2B_FOO]"')
  assert.equal(r3.stdout, '[]\n', "one sandbox's envs do not leak into another")
})

test('setTimeout extends and reduces endAt', async () => {
  await b.setTimeout(600_000)
  let info = await b.getInfo()
  approx(info.endAt - Date.now(), 600_000, 10_000, 'endAt after setTimeout(600 s)')
  await b.setTimeout(240_000)
  info = await b.getInfo()
  approx(info.endAt - Date.now(), 240_000, 10_000, 'endAt after setTimeout(240 s)')
  assert.equal(info.state, 'running')
})

test('Sandbox.connect(id) to a running sandbox gives a working handle', async () => {
  await b.files.write('/home/user/connect.txt', 'written through b')
  const again = await Sandbox.connect(b.sandboxId)
  assert.equal(again.sandboxId, b.sandboxId)
  assert.equal(await again.files.read('/home/user/connect.txt'), 'written through b')
  const r = await again.commands.run('echo "$WARREN_E2B_FOO"')
  assert.equal(r.stdout, 'foo value\n', 'sandbox envs survive a connect')
  assert.equal((await again.getInfo()).state, 'running')
})

test('Sandbox.list filters by metadata', async () => {
  const all = await listAll({ query: { metadata: { run: runId } } })
  assert.deepEqual(all.map((s) => s.sandboxId).sort(), [a, b, c].map((s) => s.sandboxId).sort())
  for (const s of all) {
    assert.equal(s.templateId, 'base')
    assert.equal(s.state, 'running')
    assert.equal(s.metadata.run, runId)
    assert.ok(s.startedAt instanceof Date && !Number.isNaN(s.startedAt.getTime()))
  }
  const onlyB = await listAll({ query: { metadata: { run: runId, name: 'b' } } })
  assert.deepEqual(onlyB.map((s) => s.sandboxId), [b.sandboxId], 'metadata filters are ANDed')
  assert.deepEqual(onlyB[0].metadata, { run: runId, name: 'b', suite: 'e2b-compat' })
  const none = await listAll({ query: { metadata: { run: runId, name: 'nobody' } } })
  assert.deepEqual(none, [])
})

test('Sandbox.list pages with limit and nextToken', async () => {
  const query = { metadata: { run: runId } }
  const p = Sandbox.list({ query, limit: 2 })
  assert.equal(p.hasNext, true)
  const page1 = await p.nextItems()
  assert.equal(page1.length, 2)
  assert.equal(p.hasNext, true, 'a third sandbox is left')
  assert.equal(typeof p.nextToken, 'string')
  const token = p.nextToken
  const page2 = await p.nextItems()
  assert.equal(page2.length, 1)
  assert.equal(p.hasNext, false)
  await assert.rejects(p.nextItems(), /No more items/)

  const ids = [...page1, ...page2].map((s) => s.sandboxId)
  assert.equal(new Set(ids).size, 3, `pages overlap: ${ids}`)
  assert.deepEqual([...ids].sort(), [a, b, c].map((s) => s.sandboxId).sort())

  // A paginator started from a saved token carries on where the first left off.
  const resumed = Sandbox.list({ query, limit: 2, nextToken: token })
  const again = await resumed.nextItems()
  assert.deepEqual(again.map((s) => s.sandboxId), page2.map((s) => s.sandboxId))
})

test('pause: state filter of list, second pause answers false, kill of a paused sandbox', async () => {
  assert.equal(await c.pause(), true)
  assert.equal(await c.pause(), false, 'pausing a paused sandbox answers false (409)')
  assert.equal((await c.getInfo()).state, 'paused')

  const paused = await listAll({ query: { metadata: { run: runId }, state: ['paused'] } })
  assert.deepEqual(paused.map((s) => s.sandboxId), [c.sandboxId])
  assert.equal(paused[0].state, 'paused')
  const running = await listAll({ query: { metadata: { run: runId }, state: ['running'] } })
  assert.deepEqual(running.map((s) => s.sandboxId).sort(), [a, b].map((s) => s.sandboxId).sort())
  const both = await listAll({ query: { metadata: { run: runId } } })
  assert.equal(both.length, 3, 'no state filter lists running and paused')

  assert.equal(await c.kill(), true)
  assert.equal(await Sandbox.kill(c.sandboxId), false)
  const left = await listAll({ query: { metadata: { run: runId } } })
  assert.deepEqual(left.map((s) => s.sandboxId).sort(), [a, b].map((s) => s.sandboxId).sort())
})

test('kill by id through the static method; isRunning before and after', async () => {
  assert.equal(await a.isRunning(), true)
  assert.equal(await Sandbox.kill(a.sandboxId), true)
  // The sandbox plane answers 502 for a killed sandbox, which isRunning reads as false.
  assert.equal(await a.isRunning(), false)
  await assert.rejects(a.commands.run('true'))
  assert.equal(await Sandbox.kill(a.sandboxId), false)
  await eventually('a killed sandbox to leave the list', async () => {
    const left = await listAll({ query: { metadata: { run: runId } } })
    return left.length === 1 && left[0].sandboxId === b.sandboxId
  })
})

test('getMetrics: cpu, memory and disk samples', async () => {
  const t0 = new Date(Date.now() - 1_000)
  // Give the sandbox something to measure (best effort: commands are tested elsewhere).
  await b.commands.run('head -c 4000000 /dev/urandom | sha256sum > /dev/null').catch(() => {})
  const metrics = await eventually('a metrics sample', async () => {
    const m = await b.getMetrics()
    return m.length > 0 ? m : undefined
  })
  const info = await b.getInfo()
  for (const m of metrics) {
    assert.ok(m.timestamp instanceof Date && !Number.isNaN(m.timestamp.getTime()), `timestamp ${m.timestamp}`)
    assert.ok(m.timestamp.getTime() >= info.startedAt.getTime() - 10_000, 'sample from before the sandbox started')
    assert.ok(m.timestamp.getTime() <= Date.now() + 10_000, 'sample from the future')
    assert.ok(m.cpuCount > 0, `cpuCount ${m.cpuCount}`)
    assert.ok(m.cpuUsedPct >= 0 && m.cpuUsedPct <= 100 * Math.max(m.cpuCount, 1) + 1, `cpuUsedPct ${m.cpuUsedPct}`)
    assert.ok(m.memTotal > 0, `memTotal ${m.memTotal}`)
    assert.ok(m.memUsed > 0 && m.memUsed <= m.memTotal, `memUsed ${m.memUsed} of ${m.memTotal}`)
    assert.ok(m.diskTotal > 0, `diskTotal ${m.diskTotal}`)
    assert.ok(m.diskUsed >= 0 && m.diskUsed <= m.diskTotal, `diskUsed ${m.diskUsed} of ${m.diskTotal}`)
  }

  const ranged = await eventually('a sample since the test began', async () => {
    const m = await b.getMetrics({ start: t0, end: new Date(Date.now() + 1_000) })
    return m.length > 0 ? m : undefined
  })
  for (const m of ranged) assert.ok(m.timestamp.getTime() >= t0.getTime() - 1_000, `sample at ${m.timestamp.toISOString()} before start ${t0.toISOString()}`)
  const before = await b.getMetrics({ start: new Date(Date.now() - 3_600_000), end: new Date(Date.now() - 1_800_000) })
  assert.deepEqual(before, [], 'no samples from before the sandbox existed')
})
