// createSnapshot / Sandbox.create(snapshotId) / listSnapshots /
// deleteSnapshot, and fork.
import { test, describe, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, SandboxNotFoundError } from 'e2b'
import { track, killAll, runId } from './helpers.mjs'

let src
before(async () => {
  src = track(await Sandbox.create({ timeoutMs: 300_000 }))
})
after(killAll)

async function listSnapshotIds(opts) {
  const p = Sandbox.listSnapshots(opts)
  const ids = []
  while (p.hasNext) ids.push(...(await p.nextItems()).map((s) => s.snapshotId))
  return ids
}

describe('snapshots', () => {
  test('createSnapshot, then Sandbox.create(snapshotId) starts from it', async () => {
    await src.files.write('/home/user/state.txt', 'state at snapshot')
    await src.commands.run('echo from-a-command > /home/user/cmd.txt')
    const snap = await src.createSnapshot()
    assert.equal(typeof snap.snapshotId, 'string')
    assert.ok(snap.snapshotId.length > 0)
    assert.ok(Array.isArray(snap.names))

    // The source keeps running and moves on independently.
    assert.equal((await src.getInfo()).state, 'running')
    await src.files.write('/home/user/state.txt', 'state after snapshot')

    const child = track(await Sandbox.create(snap.snapshotId))
    assert.notEqual(child.sandboxId, src.sandboxId)
    assert.equal(await child.files.read('/home/user/state.txt'), 'state at snapshot')
    assert.equal(await child.files.read('/home/user/cmd.txt'), 'from-a-command\n')
    assert.equal((await child.files.getInfo('/home/user/state.txt')).owner, 'user')
    assert.equal((await child.commands.run('whoami')).stdout, 'user\n')
    await child.files.write('/home/user/state.txt', 'changed in child')
    assert.equal(await src.files.read('/home/user/state.txt'), 'state after snapshot')
    assert.equal(await child.kill(), true)

    assert.ok((await listSnapshotIds({ sandboxId: src.sandboxId })).includes(snap.snapshotId), 'listSnapshots({sandboxId})')
    const own = src.listSnapshots()
    const page = await own.nextItems()
    assert.ok(page.some((s) => s.snapshotId === snap.snapshotId), 'sandbox.listSnapshots()')

    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false, 'a deleted snapshot is gone')
    assert.ok(!(await listSnapshotIds({ sandboxId: src.sandboxId })).includes(snap.snapshotId))
  })

  test('a named snapshot carries its name and is listed under it', async () => {
    const name = `e2b-compat-${runId}`
    const snap = await src.createSnapshot({ name })
    try {
      assert.ok(snap.names.some((n) => n.includes(name)), `names ${JSON.stringify(snap.names)} lack ${name}`)
      assert.ok((await listSnapshotIds({ name })).includes(snap.snapshotId), 'listSnapshots({name})')
    } finally {
      await Sandbox.deleteSnapshot(snap.snapshotId)
    }
  })
})

describe('fork', () => {
  test('sandbox.fork() copies the filesystem into an independent sandbox', async () => {
    await src.files.write('/home/user/fork.txt', 'state before fork')
    const forks = await src.fork()
    assert.equal(forks.length, 1)
    const [fork] = forks
    assert.ok(fork instanceof Sandbox, `fork failed: ${fork?.stack ?? fork}`)
    track(fork)
    assert.notEqual(fork.sandboxId, src.sandboxId)
    assert.equal(await src.isRunning(), true)
    assert.equal(await fork.isRunning(), true)
    assert.equal(await fork.files.read('/home/user/fork.txt'), 'state before fork')
    await fork.files.write('/home/user/fork.txt', 'modified in fork')
    assert.equal(await src.files.read('/home/user/fork.txt'), 'state before fork')
    assert.equal(await fork.files.read('/home/user/fork.txt'), 'modified in fork')
    assert.equal(await fork.kill(), true)
  })

  test('Sandbox.fork(id, { count: 2 }) makes two distinct sandboxes', async () => {
    const forks = await Sandbox.fork(src.sandboxId, { count: 2, timeoutMs: 120_000 })
    assert.equal(forks.length, 2)
    const ok = forks.filter((f) => f instanceof Sandbox)
    ok.forEach(track)
    assert.equal(ok.length, 2, `fork errors: ${forks.filter((f) => !(f instanceof Sandbox)).map(String)}`)
    const ids = new Set(ok.map((s) => s.sandboxId))
    assert.equal(ids.size, 2)
    assert.ok(!ids.has(src.sandboxId))
    for (const f of ok) {
      assert.equal((await f.commands.run('cat /home/user/fork.txt')).stdout, 'state before fork')
      assert.equal(await f.kill(), true)
    }
  })

  test('fork of an unknown sandbox fails with SandboxNotFoundError', async () => {
    await assert.rejects(Sandbox.fork('nosuchsandbox0000'), SandboxNotFoundError)
  })
})
