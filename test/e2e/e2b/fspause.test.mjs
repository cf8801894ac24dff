// A filesystem-only pause, as code written against E2B uses it:
// pause({ keepMemory: false }) keeps the files and drops the processes, and
// the next connect boots the sandbox cold (a new boot id); the default
// pause() keeps memory, and connect resumes with the same boot id. An
// auto-pause with onTimeout { action: 'pause', keepMemory: false } pauses
// the same way, and connect({ onResume: 'reboot' }) reboots a sandbox paused
// with its memory.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { track, killAll, eventually } from './helpers.mjs'

const bootId = async (s) => (await s.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout.trim()

let sbx
before(async () => {
  sbx = track(await Sandbox.create({ timeoutMs: 300_000 }))
})
after(killAll)

test('pause({ keepMemory: false }) then connect: a new boot id, the file kept', async () => {
  await sbx.files.write('kept.txt', 'files survive')
  const first = await bootId(sbx)
  assert.equal(await sbx.pause({ keepMemory: false }), true)
  assert.equal((await sbx.getInfo()).state, 'paused')
  assert.equal(await sbx.isRunning(), false)
  const resumed = await Sandbox.connect(sbx.sandboxId)
  assert.equal((await resumed.getInfo()).state, 'running')
  assert.notEqual(await bootId(resumed), first, 'a filesystem-only pause resumed instead of rebooting')
  assert.equal(await resumed.files.read('kept.txt'), 'files survive')
})

test('pause() then connect: the same boot id', async () => {
  const first = await bootId(sbx)
  assert.equal(await sbx.pause(), true)
  const resumed = await Sandbox.connect(sbx.sandboxId)
  assert.equal(await bootId(resumed), first)
})

test("pause() then connect({ onResume: 'reboot' }): a new boot id, the file kept", async () => {
  const first = await bootId(sbx)
  assert.equal(await sbx.pause(), true)
  const rebooted = await Sandbox.connect(sbx.sandboxId, { onResume: 'reboot' })
  assert.notEqual(await bootId(rebooted), first)
  assert.equal(await rebooted.files.read('kept.txt'), 'files survive')
})

test("an auto-pause with keepMemory: false boots cold on connect", async () => {
  const auto = track(await Sandbox.create({ timeoutMs: 2_000, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } }))
  const first = await bootId(auto)
  await eventually('the auto-pause', async () => ((await auto.getInfo()).state === 'paused' ? true : undefined))
  const resumed = await Sandbox.connect(auto.sandboxId, { timeoutMs: 60_000 })
  assert.notEqual(await bootId(resumed), first)
})
