// Sandbox.list as E2B's service answers it: the latest started first unless
// order is 'asc', running and paused in one order, startedAfter and
// template filters, and pages that neither repeat nor miss a sandbox while
// others are made and killed between them. Then connect, which never
// shortens a running sandbox's timeout.
import { test, describe, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, SandboxError } from 'e2b'
import { track, killAll, runId, listAll, sleep } from './helpers.mjs'

after(killAll)

// Every sandbox of this file carries its run and a name; the filter keeps
// other files' sandboxes out of these lists.
const query = (extra = {}) => ({ ...extra, metadata: { run: runId, suite: 'list' } })
const make = (name, opts = {}) =>
  Sandbox.create({ ...opts, metadata: { run: runId, suite: 'list', name } }).then(track)
const ids = (list) => list.map((s) => s.sandboxId)

// pages follows a paginator to its end, calling between(pageNumber) after
// every page but the last.
async function pages(opts, between = async () => {}) {
  const p = Sandbox.list(opts)
  const out = []
  for (let n = 0; p.hasNext; n++) {
    const page = await p.nextItems()
    assert.ok(page.length <= opts.limit, `a page of ${page.length} with limit ${opts.limit}`)
    out.push(...page)
    if (p.hasNext) await between(n)
  }
  return out
}

// Four sandboxes made one after another, so their start times differ; s[1]
// is paused (running and paused come back in one order).
let s = []
before(async () => {
  for (const name of ['s0', 's1', 's2', 's3']) {
    s.push(await make(name))
    await sleep(20)
  }
  assert.equal(await s[1].pause(), true)
})

describe('Sandbox.list order and filters', () => {
  test('the latest started first by default, the earliest first with order asc', async () => {
    const desc = await listAll({ query: query() })
    assert.deepEqual(ids(desc), ids([...s].reverse()))
    assert.deepEqual(desc.map((x) => x.state), ['running', 'running', 'paused', 'running'], 'paused and running in one order')
    for (let i = 1; i < desc.length; i++) {
      assert.ok(desc[i - 1].startedAt >= desc[i].startedAt, `${desc[i - 1].startedAt.toISOString()} before ${desc[i].startedAt.toISOString()}`)
    }
    assert.deepEqual(ids(await listAll({ query: query(), order: 'desc' })), ids([...s].reverse()))
    assert.deepEqual(ids(await listAll({ query: query(), order: 'asc' })), ids(s))
    assert.deepEqual(ids(await listAll({ query: query({ state: ['running', 'paused'] }), order: 'asc' })), ids(s))
    assert.deepEqual(ids(await listAll({ query: query({ state: ['paused'] }) })), [s[1].sandboxId])
  })

  test('startedAfter keeps the sandboxes started after the time', async () => {
    const listed = await listAll({ query: query(), order: 'asc' })
    // Between s1's and s2's starts: the SDK sends milliseconds.
    const between = new Date((listed[1].startedAt.getTime() + listed[2].startedAt.getTime()) / 2)
    assert.ok(between > listed[1].startedAt && between < listed[2].startedAt, 'the sandboxes started in the same millisecond')
    assert.deepEqual(ids(await listAll({ query: query({ startedAfter: between }), order: 'asc' })), ids(s.slice(2)))
    assert.deepEqual(ids(await listAll({ query: query({ startedAfter: between }) })), ids(s.slice(2).reverse()))
    assert.deepEqual(await listAll({ query: query({ startedAfter: new Date(Date.now() + 60_000) }) }), [])
    assert.equal((await listAll({ query: query({ startedAfter: new Date(0) }) })).length, 4)
  })

  test('template keeps the sandboxes of one template', async () => {
    assert.deepEqual(ids(await listAll({ query: query({ template: 'base' }), order: 'asc' })), ids(s))
    assert.deepEqual(await listAll({ query: query({ template: 'nosuchtemplate' }) }), [])
  })

  test('bad values are a 400 naming the parameter', async () => {
    const refused = async (opts, what) => {
      const err = await Sandbox.list(opts).nextItems().then(
        () => assert.fail(`${what} was accepted`),
        (e) => e,
      )
      assert.ok(err instanceof SandboxError, `${what}: ${err}`)
      assert.equal(err.statusCode, 400, `${what}: ${err}`)
      assert.match(err.message, new RegExp(what), `${what}: ${err.message}`)
    }
    await refused({ query: query(), order: 'sideways' }, 'order')
    await refused({ query: query(), limit: 5000 }, 'limit')
    await refused({ query: query(), limit: -1 }, 'limit')
    await refused({ query: query(), nextToken: 'not a token!' }, 'nextToken')
    await refused({ query: query({ template: 'Not A Template' }) }, 'template')
  })
})

describe('Sandbox.list pages stay whole while sandboxes come and go', () => {
  test('newest first: a sandbox made between pages is not listed, a killed one not yet listed is gone, none twice', async () => {
    const p = []
    for (const name of ['p0', 'p1', 'p2', 'p3', 'p4']) {
      p.push(await make(name))
      await sleep(20)
    }
    let made
    const listed = await pages({ query: query(), limit: 2 }, async (n) => {
      if (n === 0) {
        made = await make('newer')
        assert.equal(await Sandbox.kill(p[1].sandboxId), true) // not listed yet
        assert.equal(await Sandbox.kill(p[4].sandboxId), true) // listed on the first page
      }
    })
    assert.equal(new Set(ids(listed)).size, listed.length, `a sandbox listed twice: ${ids(listed)}`)
    // p4 p3 | p2 p0 s3 | … : p1 was killed before its page came.
    assert.deepEqual(ids(listed), ids([p[4], p[3], p[2], p[0], ...[...s].reverse()]))
    assert.ok(!ids(listed).includes(made.sandboxId), 'a sandbox started after the walk began is before its position')
    await Promise.all([p[0], p[2], p[3], made].map((x) => x.kill()))
  })

  test('oldest first: the sandboxes made between pages come at the end, once', async () => {
    await make('q0')
    const listed = await pages({ query: query(), limit: 2, order: 'asc' }, async (n) => {
      if (n < 2) await make(`q-new${n}`)
    })
    assert.equal(new Set(ids(listed)).size, listed.length, `a sandbox listed twice: ${ids(listed)}`)
    const names = listed.map((x) => x.metadata.name)
    assert.ok(names.indexOf('q0') >= 0 && names.indexOf('q0') < names.indexOf('q-new0'), `order: ${names}`)
    assert.deepEqual(names.slice(-2), ['q-new0', 'q-new1'], `the new sandboxes last: ${names}`)
    assert.equal(names[0], 's0', `the earliest first: ${names}`)
    for (let i = 1; i < listed.length; i++) assert.ok(listed[i - 1].startedAt <= listed[i].startedAt)
  })
})

describe('Sandbox.connect and the timeout', () => {
  test('connect to a running sandbox never shortens its timeout; a longer one extends it', async () => {
    const sbx = await make('connect', { timeoutMs: 600_000 })
    const end0 = (await sbx.getInfo()).endAt.getTime()
    assert.ok(Math.abs(end0 - Date.now() - 600_000) < 10_000, `endAt ${new Date(end0).toISOString()}`)

    await Sandbox.connect(sbx.sandboxId, { timeoutMs: 60_000 })
    assert.equal((await sbx.getInfo()).endAt.getTime(), end0, 'a shorter connect timeout moved the end')
    await sbx.connect({ timeoutMs: 120_000 })
    assert.equal((await sbx.getInfo()).endAt.getTime(), end0, 'a shorter connect timeout moved the end')

    await Sandbox.connect(sbx.sandboxId, { timeoutMs: 1_200_000 })
    const end1 = (await sbx.getInfo()).endAt.getTime()
    assert.ok(Math.abs(end1 - Date.now() - 1_200_000) < 10_000, `a longer connect: endAt ${new Date(end1).toISOString()}`)

    // setTimeout still sets the end either way.
    await sbx.setTimeout(60_000)
    assert.ok((await sbx.getInfo()).endAt.getTime() < end0)
  })
})
