// The errors E2B's service answers and its SDK shows users, word for word:
// signed URLs past their expiration or not verifying (downloads and
// uploads), a fork with count 0 (before the sandbox is looked up), a
// sandbox-plane call for a killed sandbox, and the typed errors the SDK
// makes of 4xx answers.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, SandboxError, SandboxNotFoundError, NotFoundError, AuthenticationError, InvalidArgumentError } from 'e2b'
import { track, killAll, rawRequest, envdHeaders } from './helpers.mjs'

let sbx
before(async () => {
  sbx = track(await Sandbox.create({ secure: true }))
  await sbx.files.write('/home/user/kept.txt', 'kept')
})
after(killAll)

// answer fetches url and returns its status and parsed JSON body.
async function answer(url, init) {
  const res = await fetch(url, init)
  const text = await res.text()
  let body
  try {
    body = JSON.parse(text)
  } catch {
    body = text
  }
  return { status: res.status, body }
}

const upload = (content) => {
  const form = new FormData()
  form.append('file', content)
  return { method: 'POST', body: form }
}

test('an expired signed download URL is E2B\'s 401 "signature is already expired"', async () => {
  const url = await sbx.downloadUrl('/home/user/kept.txt', { useSignatureExpiration: -10 })
  assert.deepEqual(await answer(url), { status: 401, body: { code: 401, message: 'signature is already expired' } })
})

test('an expired signed upload URL is the same 401, and writes nothing', async () => {
  const url = await sbx.uploadUrl('/home/user/late.txt', { useSignatureExpiration: -10 })
  assert.deepEqual(await answer(url, upload('too late')), {
    status: 401,
    body: { code: 401, message: 'signature is already expired' },
  })
  assert.equal(await sbx.files.exists('/home/user/late.txt'), false)
})

test('a signature that does not verify is E2B\'s 401 "invalid signature", even with a past expiration', async () => {
  const invalid = { status: 401, body: { code: 401, message: 'invalid signature' } }
  const good = new URL(await sbx.downloadUrl('/home/user/kept.txt', { useSignatureExpiration: 120 }))
  assert.equal((await answer(good)).body, 'kept')

  const flipped = new URL(good)
  const sig = good.searchParams.get('signature')
  flipped.searchParams.set('signature', sig.slice(0, -1) + (sig.endsWith('A') ? 'B' : 'A'))
  assert.deepEqual(await answer(flipped), invalid, 'a flipped character')

  const extended = new URL(good)
  extended.searchParams.set('signature_expiration', String(Number(good.searchParams.get('signature_expiration')) + 3600))
  assert.deepEqual(await answer(extended), invalid, 'an expiration moved without re-signing')

  // Checked before the expiration, as envd does: a forger does not learn
  // whether the expiration was the problem.
  const forgedPast = new URL(good)
  forgedPast.searchParams.set('signature', 'v1_forged')
  forgedPast.searchParams.set('signature_expiration', String(Math.floor(Date.now() / 1000) - 10))
  assert.deepEqual(await answer(forgedPast), invalid, 'a forged signature with a past expiration')

  const upUrl = new URL(await sbx.uploadUrl('/home/user/forged.txt'))
  upUrl.searchParams.set('path', '/home/user/elsewhere.txt')
  assert.deepEqual(await answer(upUrl, upload('no')), invalid, 'an upload to another path than signed')
  assert.equal(await sbx.files.exists('/home/user/elsewhere.txt'), false)
})

test('fork with count 0 is a 400 before the sandbox is looked up, also for an unknown id', async () => {
  for (const id of ['nosuchsandbox00', sbx.sandboxId]) {
    const err = await Sandbox.fork(id, { count: 0 }).then(
      () => assert.fail(`fork of ${id} with count 0 was accepted`),
      (e) => e,
    )
    // SDK 2.51 makes a control-plane 400 a SandboxError with statusCode
    // 400 (its InvalidArgumentError is for the sandbox plane's 400s).
    assert.ok(err instanceof SandboxError && !(err instanceof NotFoundError), `${id}: ${err?.name}: ${err}`)
    assert.equal(err.statusCode, 400, `${id}: ${err}`)
    assert.match(err.message, /count 0/)
  }
})

test('the SDK\'s typed errors: 401 AuthenticationError, 404 SandboxNotFoundError, 400 from the sandbox plane InvalidArgumentError', async () => {
  await assert.rejects(Sandbox.list({ apiKey: 'e2b_not_a_key' }).nextItems(), AuthenticationError)
  await assert.rejects(Sandbox.getInfo('nosuchsandbox00'), SandboxNotFoundError)
  await assert.rejects(Sandbox.connect('nosuchsandbox00'), SandboxNotFoundError)
  await assert.rejects(sbx.files.read('/home/user/no-such-file'), NotFoundError)
  await assert.rejects(sbx.files.read('/home/user'), InvalidArgumentError, 'reading a directory')
})

test('a killed sandbox\'s sandbox plane is E2B\'s 502 "The sandbox was not found"', async () => {
  const gone = await Sandbox.create()
  const url = await gone.downloadUrl('/home/user/.bashrc')
  assert.equal(await gone.kill(), true)
  const res = await rawRequest({ path: '/health', headers: envdHeaders(gone.sandboxId, gone.envdAccessToken) })
  assert.equal(res.status, 502)
  assert.deepEqual(JSON.parse(res.body), { code: 502, message: 'The sandbox was not found', sandboxId: gone.sandboxId })
  // Its signed URLs verify against no running sandbox any more.
  assert.deepEqual(await answer(url), { status: 401, body: { code: 401, message: 'invalid signature' } })
})
