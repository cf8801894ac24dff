// sandbox.files against one shared sandbox.
import { test, describe, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { Sandbox, NotFoundError, FileType, FilesystemEventType } from 'e2b'
import { track, killAll, eventually } from './helpers.mjs'

let sbx
before(async () => {
  sbx = track(await Sandbox.create({ timeoutMs: 300_000 }))
})
after(killAll)

// stat runs stat(1) in the sandbox: the ground truth for getInfo.
async function stat(path) {
  const r = await sbx.commands.run(`stat -c '%U %G %a %s %A' '${path}'`, { user: 'root' })
  const [owner, group, octal, size, ls] = r.stdout.trim().split(' ')
  return { owner, group, mode: parseInt(octal, 8), size: Number(size), ls }
}

describe('write and read', () => {
  test('text; relative paths resolve in /home/user', async () => {
    const info = await sbx.files.write('hello.txt', 'hello world')
    assert.equal(info.name, 'hello.txt')
    assert.equal(info.path, '/home/user/hello.txt')
    assert.equal(info.type, FileType.FILE)
    assert.equal(await sbx.files.read('hello.txt'), 'hello world')
    assert.equal(await sbx.files.read('/home/user/hello.txt'), 'hello world')
    assert.equal((await sbx.commands.run('cat /home/user/hello.txt')).stdout, 'hello world')
    // Writing again replaces the content.
    await sbx.files.write('hello.txt', 'bye')
    assert.equal(await sbx.files.read('hello.txt'), 'bye')
    // Missing directories are made.
    const deep = await sbx.files.write('/tmp/made/on/the/way.txt', 'deep')
    assert.equal(deep.path, '/tmp/made/on/the/way.txt')
    assert.equal(await sbx.files.read('/tmp/made/on/the/way.txt'), 'deep')
  })

  test('bytes and blob round trip every byte value', async () => {
    const data = new Uint8Array(4096)
    for (let i = 0; i < data.length; i++) data[i] = i % 256
    await sbx.files.write('/tmp/bin.dat', data.buffer)
    const back = await sbx.files.read('/tmp/bin.dat', { format: 'bytes' })
    assert.ok(back instanceof Uint8Array)
    assert.deepEqual(Buffer.from(back), Buffer.from(data))
    const blob = await sbx.files.read('/tmp/bin.dat', { format: 'blob' })
    assert.equal(blob.size, data.length)
    const sum = (await sbx.commands.run('sha256sum /tmp/bin.dat')).stdout.split(' ')[0]
    assert.equal(sum, createHash('sha256').update(data).digest('hex'))
  })

  test('empty file', async () => {
    await sbx.files.write('/tmp/empty', '')
    assert.equal(await sbx.files.read('/tmp/empty'), '')
    assert.equal((await sbx.files.getInfo('/tmp/empty')).size, 0)
  })

  test('stream read and stream write of 3 MiB', async () => {
    const data = randomBytes(3 << 20)
    const src = new ReadableStream({
      start(c) {
        for (let off = 0; off < data.length; off += 256 << 10) c.enqueue(new Uint8Array(data.subarray(off, off + (256 << 10))))
        c.close()
      },
    })
    const info = await sbx.files.write('/tmp/streamed.bin', src)
    assert.equal(info.path, '/tmp/streamed.bin')
    const stream = await sbx.files.read('/tmp/streamed.bin', { format: 'stream' })
    const parts = []
    for await (const chunk of stream) parts.push(Buffer.from(chunk))
    const got = Buffer.concat(parts)
    assert.equal(got.length, data.length)
    assert.ok(got.equals(data), 'streamed bytes differ')
  })

  test('many files at once', async () => {
    const infos = await sbx.files.write([
      { path: 'multi/a.txt', data: 'A' },
      { path: '/tmp/multi/b.txt', data: new TextEncoder().encode('B').buffer },
      { path: 'multi/deep/c.txt', data: new Blob(['C']) },
    ])
    assert.equal(infos.length, 3)
    assert.deepEqual(infos.map((i) => i.path).sort(), ['/home/user/multi/a.txt', '/home/user/multi/deep/c.txt', '/tmp/multi/b.txt'])
    assert.equal(await sbx.files.read('multi/a.txt'), 'A')
    assert.equal(await sbx.files.read('/tmp/multi/b.txt'), 'B')
    assert.equal(await sbx.files.read('/home/user/multi/deep/c.txt'), 'C')
  })

  test('reading a missing file fails with NotFoundError', async () => {
    // Its neighbour reads fine, so the 404 is the file's, not the route's.
    await sbx.files.write('neighbour.txt', 'here')
    assert.equal(await sbx.files.read('neighbour.txt'), 'here')
    await assert.rejects(sbx.files.read('no-such-file.txt'), NotFoundError)
  })
})

describe('metadata', () => {
  test('getInfo of a file: name, path, type, size, owner, group, mode, permissions', async () => {
    await sbx.files.write('info.txt', 'twelve bytes')
    const info = await sbx.files.getInfo('info.txt')
    const truth = await stat('/home/user/info.txt')
    assert.equal(info.name, 'info.txt')
    assert.equal(info.path, '/home/user/info.txt')
    assert.equal(info.type, FileType.FILE)
    assert.equal(info.size, 12)
    assert.equal(info.owner, 'user', 'files written by the default user belong to user')
    assert.equal(info.group, 'user')
    assert.equal(truth.owner, 'user')
    assert.equal(info.mode & 0o777, truth.mode)
    assert.equal(info.permissions.slice(-9), truth.ls.slice(-9), `permissions ${info.permissions} vs ${truth.ls}`)
    assert.ok(info.modifiedTime instanceof Date && Math.abs(info.modifiedTime - Date.now()) < 120_000, `modifiedTime ${info.modifiedTime}`)
  })

  test('getInfo of a directory; of a missing path', async () => {
    assert.equal(await sbx.files.makeDir('infodir'), true)
    const info = await sbx.files.getInfo('infodir')
    assert.equal(info.type, FileType.DIR)
    assert.equal(info.path, '/home/user/infodir')
    assert.equal(info.owner, 'user')
    await assert.rejects(sbx.files.getInfo('no-such-dir'), NotFoundError)
  })

  test('user: root writes root-owned files; relative paths then resolve in /root', async () => {
    const w = await sbx.files.write('rootfile.txt', 'r', { user: 'root' })
    assert.equal(w.path, '/root/rootfile.txt')
    const info = await sbx.files.getInfo('/root/rootfile.txt', { user: 'root' })
    assert.equal(info.owner, 'root')
    assert.equal((await stat('/root/rootfile.txt')).owner, 'root')
    assert.equal(await sbx.files.read('rootfile.txt', { user: 'root' }), 'r')
    // A command of the default user cannot read it (/root is root's alone).
    const r = await sbx.commands.run('cat /root/rootfile.txt 2>/dev/null || echo denied')
    assert.equal(r.stdout, 'denied\n')
  })

  test('exists', async () => {
    await sbx.files.write('exists.txt', 'x')
    assert.equal(await sbx.files.exists('exists.txt'), true)
    assert.equal(await sbx.files.exists('/home/user'), true)
    assert.equal(await sbx.files.exists('does-not-exist.txt'), false)
  })
})

describe('directories', () => {
  test('makeDir answers true, then false when it exists', async () => {
    assert.equal(await sbx.files.makeDir('newdir/sub'), true)
    assert.equal(await sbx.files.makeDir('newdir/sub'), false)
    const truth = await stat('/home/user/newdir/sub')
    assert.equal(truth.owner, 'user')
    assert.equal((await stat('/home/user/newdir')).owner, 'user', 'parents made on the way belong to user too')
  })

  test('list, with depth', async () => {
    await sbx.files.write([
      { path: 'tree/top.txt', data: 'top' },
      { path: 'tree/a/mid.txt', data: 'mid' },
      { path: 'tree/a/b/leaf.txt', data: 'leaf' },
    ])
    const one = await sbx.files.list('tree')
    assert.deepEqual(
      one.map((e) => [e.name, e.type, e.path]).sort(),
      [
        ['a', FileType.DIR, '/home/user/tree/a'],
        ['top.txt', FileType.FILE, '/home/user/tree/top.txt'],
      ],
    )
    const top = one.find((e) => e.name === 'top.txt')
    assert.equal(top.size, 3)
    assert.equal(top.owner, 'user')

    const two = await sbx.files.list('/home/user/tree', { depth: 2 })
    assert.deepEqual(two.map((e) => e.path).sort(), ['/home/user/tree/a', '/home/user/tree/a/b', '/home/user/tree/a/mid.txt', '/home/user/tree/top.txt'])
    const three = await sbx.files.list('tree', { depth: 3 })
    assert.ok(three.some((e) => e.path === '/home/user/tree/a/b/leaf.txt' && e.type === FileType.FILE))
    await assert.rejects(sbx.files.list('no-such-dir'), NotFoundError)
  })

  test('rename', async () => {
    await sbx.files.write('ren/src.txt', 'moving')
    const e = await sbx.files.rename('ren/src.txt', 'ren/dst.txt')
    assert.equal(e.name, 'dst.txt')
    assert.equal(e.path, '/home/user/ren/dst.txt')
    assert.equal(e.type, FileType.FILE)
    assert.equal(await sbx.files.exists('ren/src.txt'), false)
    assert.equal(await sbx.files.read('ren/dst.txt'), 'moving')
    // Directories move with their content.
    await sbx.files.rename('ren', 'ren2')
    assert.equal(await sbx.files.read('ren2/dst.txt'), 'moving')
  })

  test('remove a file and a non-empty directory', async () => {
    await sbx.files.write('rm/one.txt', '1')
    await sbx.files.write('rm/sub/two.txt', '2')
    await sbx.files.remove('rm/one.txt')
    assert.equal(await sbx.files.exists('rm/one.txt'), false)
    assert.equal(await sbx.files.exists('rm/sub/two.txt'), true)
    await sbx.files.remove('rm')
    assert.equal(await sbx.files.exists('rm'), false)
    assert.equal((await sbx.commands.run('test -e /home/user/rm && echo present || echo absent')).stdout, 'absent\n')
  })
})

describe('watchDir', () => {
  const seen = (events, name, type) => events.some((e) => e.name === name && e.type === type)

  test('events for create, write and remove', async () => {
    await sbx.files.makeDir('watched')
    const events = []
    const h = await sbx.files.watchDir('watched', (e) => events.push(e))
    try {
      await sbx.files.write('watched/new.txt', 'first')
      await eventually('create and write of new.txt', () => seen(events, 'new.txt', FilesystemEventType.CREATE) && seen(events, 'new.txt', FilesystemEventType.WRITE))
      const writes = events.filter((e) => e.name === 'new.txt' && e.type === FilesystemEventType.WRITE).length
      await sbx.commands.run('echo more >> /home/user/watched/new.txt')
      await eventually('a write by a command', () => events.filter((e) => e.name === 'new.txt' && e.type === FilesystemEventType.WRITE).length > writes)
      await sbx.files.remove('watched/new.txt')
      await eventually('remove of new.txt', () => seen(events, 'new.txt', FilesystemEventType.REMOVE))
      for (const e of events) assert.ok(Object.values(FilesystemEventType).includes(e.type), `event type ${e.type}`)
    } finally {
      await h.stop()
    }
  })

  test('recursive: events from nested directories, also ones made after the watch began', async () => {
    await sbx.files.makeDir('rwatch/nested')
    const events = []
    const h = await sbx.files.watchDir('rwatch', (e) => events.push(e), { recursive: true })
    try {
      await sbx.files.write('rwatch/nested/f.txt', 'f')
      await eventually('write of nested/f.txt', () => seen(events, 'nested/f.txt', FilesystemEventType.WRITE))
      await sbx.files.makeDir('rwatch/later')
      await eventually('create of later', () => seen(events, 'later', FilesystemEventType.CREATE))
      await sbx.files.write('rwatch/later/g.txt', 'g')
      await eventually('write of later/g.txt', () => seen(events, 'later/g.txt', FilesystemEventType.WRITE))
    } finally {
      await h.stop()
    }
  })

  test('watching a missing directory fails with NotFoundError', async () => {
    await assert.rejects(sbx.files.watchDir('no-such-watch-dir', () => {}), NotFoundError)
  })
})
