// pause() then Sandbox.connect() resumes the sandbox where it was: files
// written before the pause read back, and a background process keeps its
// pid, its output stream and its count. The tests run in order on one
// sandbox.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError } from 'e2b'
import { track, killAll, eventually } from './helpers.mjs'

const counterCmd = 'i=0; while true; do i=$((i+1)); echo "tick $i"; echo $i > /tmp/counter.tmp && mv /tmp/counter.tmp /tmp/counter; sleep 0.2; done'
const readCount = async (s) => Number((await s.files.read('/tmp/counter')).trim())

let sbx, counter, before_
before(async () => {
  sbx = track(await Sandbox.create({ timeoutMs: 300_000 }))
})
after(killAll)

test('before the pause: a file and a counting background process', async () => {
  const info = await sbx.files.write('notes/before-pause.txt', 'written before pause')
  assert.equal(info.path, '/home/user/notes/before-pause.txt')
  counter = await sbx.commands.run(counterCmd, { background: true })
  assert.ok(Number.isInteger(counter.pid) && counter.pid > 0, `pid ${counter.pid}`)
  before_ = await eventually('the counter to reach 3', async () => {
    const n = await readCount(sbx).catch(() => 0)
    return n >= 3 ? n : undefined
  })
  await counter.disconnect()
})

test('pause() answers true, then false; the sandbox is paused', async () => {
  assert.equal(await sbx.pause(), true)
  assert.equal((await sbx.getInfo()).state, 'paused')
  assert.equal(await sbx.pause(), false, 'a second pause answers false')
})

test('a paused sandbox is not running (its envd answers 502)', async () => {
  assert.equal(await sbx.isRunning(), false)
})

test('Sandbox.connect() resumes it with its files and process', async () => {
  assert.ok(counter, 'needs the counter of the first test')
  const resumed = await Sandbox.connect(sbx.sandboxId)
  assert.equal(resumed.sandboxId, sbx.sandboxId)
  assert.equal((await resumed.getInfo()).state, 'running')
  assert.equal(await resumed.isRunning(), true)
  // The handle from before the pause works again too.
  assert.equal(await sbx.isRunning(), true)

  assert.equal(await resumed.files.read('notes/before-pause.txt'), 'written before pause')
  assert.equal(await resumed.files.read('/home/user/notes/before-pause.txt'), 'written before pause')

  const procs = await resumed.commands.list()
  const p = procs.find((x) => x.pid === counter.pid)
  assert.ok(p, `counter pid ${counter.pid} missing from ${JSON.stringify(procs)}`)
  assert.equal(p.cmd, '/bin/bash')
  assert.deepEqual(p.args, ['-l', '-c', counterCmd])
  const alive = await resumed.commands.run(`kill -0 ${counter.pid} && echo alive`)
  assert.equal(alive.stdout, 'alive\n')

  const atResume = await readCount(resumed)
  assert.ok(atResume >= before_, `counter went back: ${atResume} < ${before_}`)
  await eventually('the counter to keep counting after resume', async () => (await readCount(resumed)) > atResume + 2)

  // Output produced after a reconnect arrives on the new stream.
  const lines = []
  const handle = await resumed.commands.connect(counter.pid, { onStdout: (d) => lines.push(d) })
  assert.equal(handle.pid, counter.pid)
  const from = await readCount(resumed)
  await eventually('ticks on the reconnected stream', () => {
    const ticks = lines.join('').match(/tick (\d+)/g) ?? []
    return ticks.some((t) => Number(t.slice(5)) > from)
  })

  assert.equal(await handle.kill(), true)
  await assert.rejects(handle.wait(), (err) => err instanceof CommandExitError && err.exitCode !== 0)
  await eventually('the killed counter to leave the process list', async () => !(await resumed.commands.list()).some((x) => x.pid === counter.pid))
  assert.equal(await resumed.kill(), true)
})
