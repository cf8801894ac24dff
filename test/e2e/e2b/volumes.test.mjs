// Volumes, as code written against E2B uses them: Volume.create, two
// sandboxes mounting one volume at once (Sandbox.create({ volumeMounts })),
// its data kept after both are killed, its quota (the daemon runs with
// --volume-size-mb 64) inside the sandbox and through the content API (507),
// a snapshot or a rollback that leaves the volume alone, the content API
// (list, makeDir, getInfo, updateMetadata, readFile, writeFile, remove),
// and the errors: a mounted volume refuses destroy (409), a bad name or
// mount path is a 400.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, Volume, VolumeError, VolumeFileType, CommandExitError } from 'e2b'
import { track, killAll, runId, apiUrl, apiKey } from './helpers.mjs'

after(killAll)
const volumes = []
after(async () => {
  await Promise.allSettled(volumes.map((v) => Volume.destroy(v.volumeId)))
})

// volumeStatus matches the SDK's VolumeError for an HTTP status: it
// carries the status only in its message ("409: ...").
const volumeStatus = (code) => (err) => err instanceof VolumeError && err.message.startsWith(`${code}:`)

async function newVolume(tag) {
  const v = await Volume.create(`${tag}-${runId}`)
  volumes.push(v)
  return v
}

test('two sandboxes share one volume; its data outlives both', async () => {
  const vol = await newVolume('shared')
  assert.ok(vol.volumeId && vol.token, 'create answers the id and the content token')
  const listed = await Volume.list()
  assert.ok(listed.some((v) => v.volumeId === vol.volumeId && v.name === vol.name))
  const info = await Volume.getInfo(vol.volumeId)
  assert.equal(info.token, vol.token)

  const a = track(await Sandbox.create({ volumeMounts: { '/mnt/vol': vol } }))
  const b = track(await Sandbox.create({ volumeMounts: { '/data': vol.name } }))
  assert.deepEqual((await a.getInfo()).volumeMounts, [{ name: vol.name, path: '/mnt/vol' }])
  const w = await a.commands.run('echo from-a > /mnt/vol/a.txt && stat -c %U /mnt/vol/a.txt')
  assert.equal(w.stdout.trim(), 'user', 'the default user owns what it writes to the volume')
  assert.equal((await b.commands.run('cat /data/a.txt')).stdout, 'from-a\n')
  await b.files.write('/data/b.txt', 'from-b')
  assert.equal(await a.files.read('/mnt/vol/b.txt'), 'from-b')

  // Destroying a mounted volume is refused (409).
  await assert.rejects(Volume.destroy(vol.volumeId), volumeStatus(409))

  await a.kill()
  await b.kill()
  const c = track(await Sandbox.create({ volumeMounts: { '/v': vol } }))
  assert.equal((await c.commands.run('cat /v/a.txt /v/b.txt')).stdout, 'from-a\nfrom-b')
  await c.kill()
  assert.equal(await vol.readFile('/a.txt'), 'from-a\n')
  assert.equal(await Volume.destroy(vol.volumeId), true)
  assert.equal(await Volume.destroy(vol.volumeId), false, 'a destroyed volume is gone')
})

test('the quota: EDQUOT inside the sandbox, 507 through the content API', async () => {
  const vol = await newVolume('quota')
  const s = track(await Sandbox.create({ volumeMounts: { '/q': vol } }))
  await assert.rejects(
    s.commands.run('dd if=/dev/zero of=/q/big bs=1M count=100'),
    (err) => err instanceof CommandExitError && /quota/i.test(err.stderr),
  )
  await s.commands.run('rm -f /q/big && sync')
  await assert.rejects(vol.writeFile('/big.bin', new Uint8Array(100 << 20)), volumeStatus(507))
  assert.equal(await vol.exists('/big.bin'), false, 'a refused write leaves no partial file')
  await s.kill()
})

test('a snapshot and a rollback leave the volume alone', async () => {
  const vol = await newVolume('rollback')
  const s = track(await Sandbox.create({ volumeMounts: { '/keep': vol } }))
  await s.commands.run('echo before > /keep/v.txt && echo before > /home/user/own.txt')
  const snap = await s.createSnapshot()
  await s.commands.run('echo after > /keep/v.txt && echo after > /home/user/own.txt')
  const res = await fetch(new URL(`/sandboxes/${s.sandboxId}/rollback`, apiUrl), {
    method: 'POST',
    headers: { 'X-API-Key': apiKey, 'Content-Type': 'application/json' },
    body: JSON.stringify({ snapshotID: snap.snapshotId }),
  })
  assert.equal(res.status, 200, await res.text())
  const again = await Sandbox.connect(s.sandboxId)
  assert.equal((await again.commands.run('cat /home/user/own.txt')).stdout, 'before\n', "the sandbox's own tree rolled back")
  assert.equal((await again.commands.run('cat /keep/v.txt')).stdout, 'after\n', 'the volume did not')
  // A sandbox started from the snapshot mounts the volume as it is now.
  const fromSnap = track(await Sandbox.create(snap.snapshotId, { volumeMounts: { '/keep': vol } }))
  assert.equal((await fromSnap.commands.run('cat /keep/v.txt /home/user/own.txt')).stdout, 'after\nbefore\n')
  await fromSnap.kill()
  await s.kill()
})

test('the content API', async () => {
  const vol = await newVolume('content')
  const dir = await vol.makeDir('/a/b', { force: true })
  assert.equal(dir.type, VolumeFileType.DIRECTORY)
  assert.equal(dir.uid, 1000)
  const file = await vol.writeFile('/a/b/hello.txt', 'hello volume')
  assert.equal(file.type, VolumeFileType.FILE)
  assert.equal(file.size, 12)
  assert.ok(file.mtime instanceof Date && !Number.isNaN(file.mtime.getTime()))
  assert.equal(await vol.readFile('/a/b/hello.txt'), 'hello volume')
  const bytes = await vol.readFile('/a/b/hello.txt', { format: 'bytes' })
  assert.equal(bytes.length, 12)
  const top = await vol.list('/')
  assert.deepEqual(top.map((e) => e.name), ['a'])
  const deep = await vol.list('/', { depth: 3 })
  assert.deepEqual(deep.map((e) => e.path).sort(), ['/a', '/a/b', '/a/b/hello.txt'])
  const st = await vol.getInfo('/a/b/hello.txt')
  assert.equal(st.path, '/a/b/hello.txt')
  const upd = await vol.updateMetadata('/a/b/hello.txt', { mode: 0o600 })
  assert.equal(upd.mode & 0o777, 0o600)
  assert.equal(await vol.exists('/nope'), false)
  await vol.remove('/a')
  assert.equal(await vol.exists('/a'), false)
  // A sandbox sees what the content API wrote.
  await vol.writeFile('/x.txt', 'seen')
  const s = track(await Sandbox.create({ volumeMounts: { '/x': vol } }))
  assert.equal(await s.files.read('/x/x.txt'), 'seen')
  await s.kill()
})

const is400 = (err) => err.statusCode === 400

test('bad input: 400, nothing made', async () => {
  await assert.rejects(Volume.create('../escape'), volumeStatus(400))
  assert.ok(!(await Volume.list()).some((v) => v.name === '../escape'))
  const vol = await newVolume('bad')
  const tag = { run: runId, suite: 'volumes-bad' }
  const create = (volumeMounts) => Sandbox.create({ volumeMounts, metadata: tag }).then(track)
  for (const path of ['/proc', '/', '/sys/x', '/dev', '/a/../etc', 'relative']) {
    await assert.rejects(create({ [path]: vol }), is400, path)
  }
  await assert.rejects(create({ '/x': `nosuch-${runId}` }), is400)
  await assert.rejects(create({ '/x': vol, '/y': vol }), is400)
  const left = await Sandbox.list({ query: { metadata: tag } }).nextItems()
  assert.equal(left.length, 0, 'a refused create left a sandbox')
})
