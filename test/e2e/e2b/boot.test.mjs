// Boot ids and sudo, as code written against E2B uses them. Every sandbox
// boots with its own /proc/sys/kernel/random/boot_id, and a pause that
// keeps memory (the SDK's default) resumes on connect with the same one: a
// resume, not a reboot. `user` has passwordless sudo, as in E2B's
// templates (warren's --no-new-privileges turns it off; docs/security.md).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { track, killAll } from './helpers.mjs'

const bootIdPath = '/proc/sys/kernel/random/boot_id'
const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

const bootId = async (s) => (await s.commands.run(`cat ${bootIdPath}`)).stdout.trim()

let sbx, first
before(async () => {
  sbx = track(await Sandbox.create({ timeoutMs: 300_000 }))
})
after(killAll)

test('a sandbox has a boot id of its own', async () => {
  first = await bootId(sbx)
  assert.match(first, uuid)
  const other = track(await Sandbox.create({ timeoutMs: 120_000 }))
  assert.notEqual(await bootId(other), first, 'two sandboxes share a boot id')
  // What the files API reads is the same file.
  assert.equal((await sbx.files.read(bootIdPath)).trim(), first)
  await other.kill()
})

test('the boot id is the same after a memory-keeping pause and connect', async () => {
  assert.ok(first, 'needs the boot id of the first test')
  assert.equal(await sbx.pause(), true)
  const resumed = await Sandbox.connect(sbx.sandboxId)
  assert.equal((await resumed.getInfo()).state, 'running')
  assert.equal(await bootId(resumed), first)
})

test('sudo works for user, without a password', async () => {
  const who = await sbx.commands.run('whoami && sudo whoami && sudo -n id -u')
  assert.equal(who.stdout, 'user\nroot\n0\n')
  // What code written for E2B does with it: write where only root may.
  await sbx.commands.run('sudo sh -c "echo installed > /usr/local/bin/marker" && sudo chmod 755 /usr/local/bin/marker')
  assert.equal((await sbx.commands.run('cat /usr/local/bin/marker')).stdout, 'installed\n')
})
