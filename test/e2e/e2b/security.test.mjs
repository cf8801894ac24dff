// Access tokens and signed file URLs: a sandbox's envd routes answer only
// to its own token, and signed URLs work without any header but not once
// tampered with.
import { test, describe, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, AuthenticationError } from 'e2b'
import { track, killAll, rawRequest, envdHeaders, apiUrl } from './helpers.mjs'

let a, b, envdVersion
before(async () => {
  ;[a, b] = await Promise.all([Sandbox.create({ secure: true }).then(track), Sandbox.create().then(track)])
  envdVersion = (await a.getInfo()).envdVersion
})
after(killAll)

// secret writes the file of a that the refused requests below try to read;
// a test that needs it calls it (not a before hook, so that the tests that
// do not need the sandbox plane run whatever state it is in).
let secretWritten
const secret = () => (secretWritten ??= a.files.write('/home/user/a-only.txt', 'secret of a'))

// impostor is an SDK object for sandbox id whose access token is token.
function impostor(id, token) {
  return new Sandbox({ sandboxId: id, envdVersion, envdAccessToken: token })
}

const refused = (res, what) => {
  assert.ok(res.status === 401 || res.status === 403, `${what}: want 401 or 403, got ${res.status} ${res.body}`)
  assert.ok(!res.body.includes('secret of a'), `${what}: leaked the file`)
}

describe('access tokens', () => {
  test('a sandbox created with secure: true gets its own envd access token', async () => {
    assert.equal(typeof a.envdAccessToken, 'string')
    assert.ok(a.envdAccessToken.length >= 16)
    assert.equal(typeof b.envdAccessToken, 'string')
    assert.notEqual(a.envdAccessToken, b.envdAccessToken)
    // connect hands out the same token.
    const again = await Sandbox.connect(a.sandboxId)
    assert.equal(again.envdAccessToken, a.envdAccessToken)
  })

  test('a secured sandbox answers the SDK, which sends its token', async () => {
    assert.equal((await a.commands.run('echo Hello World!')).stdout, 'Hello World!\n')
    const again = await Sandbox.connect(a.sandboxId)
    assert.equal((await again.commands.run('whoami')).stdout, 'user\n')
  })

  test('an SDK object with a wrong token is refused', async () => {
    await secret()
    const bad = impostor(a.sandboxId, 'not-the-token-' + a.envdAccessToken.slice(0, 4))
    await assert.rejects(bad.commands.run('touch /tmp/intruder'), AuthenticationError)
    await assert.rejects(bad.files.read('/home/user/a-only.txt'), AuthenticationError)
    await assert.rejects(bad.files.write('/tmp/intruder', 'x'), AuthenticationError)
    await assert.rejects(bad.files.list('/home/user'), AuthenticationError)
    assert.equal(await a.files.exists('/tmp/intruder'), false)
  })

  test('a token tampered with after connect is refused', async () => {
    const c = await Sandbox.connect(a.sandboxId)
    assert.equal((await c.commands.run('echo ok')).stdout, 'ok\n')
    // The RPC transport reads the token on every call.
    c.envdAccessToken = c.envdAccessToken.slice(0, -1) + (c.envdAccessToken.endsWith('x') ? 'y' : 'x')
    await assert.rejects(c.commands.run('echo ok'), AuthenticationError)
    await assert.rejects(c.commands.list(), AuthenticationError)
  })

  test("one sandbox's token never opens another's", async () => {
    await secret()
    const cross = impostor(a.sandboxId, b.envdAccessToken)
    await assert.rejects(cross.commands.run('cat /home/user/a-only.txt'), AuthenticationError)
    await assert.rejects(cross.files.read('/home/user/a-only.txt'), AuthenticationError)
    await assert.rejects(cross.files.getInfo('/home/user/a-only.txt'), AuthenticationError)
  })

  test('raw requests: only the right token opens the envd routes', async () => {
    await secret()
    const list = (token) =>
      rawRequest({
        method: 'POST',
        path: '/process.Process/List',
        headers: { ...envdHeaders(a.sandboxId, token), 'Content-Type': 'application/json', 'Connect-Protocol-Version': '1' },
        body: '{}',
      })
    const read = (token) => rawRequest({ path: '/files?path=%2Fhome%2Fuser%2Fa-only.txt', headers: envdHeaders(a.sandboxId, token) })

    const ok = await list(a.envdAccessToken)
    assert.equal(ok.status, 200, ok.body)
    assert.ok(Array.isArray(JSON.parse(ok.body).processes ?? []))
    const okRead = await read(a.envdAccessToken)
    assert.equal(okRead.status, 200, okRead.body)
    assert.equal(okRead.body, 'secret of a')

    for (const [what, token] of [
      ['no token', undefined],
      ['empty token', ''],
      ['wrong token', 'wrong'],
      ["b's token", b.envdAccessToken],
    ]) {
      refused(await list(token), `Process/List with ${what}`)
      refused(await read(token), `GET /files with ${what}`)
    }
  })
})

describe('signed URLs', () => {
  test('downloadUrl works with plain fetch and no sandbox header', async () => {
    await a.files.write('signed.txt', 'signed content')
    const url = new URL(await a.downloadUrl('signed.txt'))
    assert.equal(url.origin, apiUrl.origin)
    assert.equal(url.pathname, '/files')
    assert.match(url.searchParams.get('signature'), /^v1_/)
    const res = await fetch(url)
    assert.equal(res.status, 200)
    assert.equal(await res.text(), 'signed content')

    const withExpiry = new URL(await a.downloadUrl('/home/user/signed.txt', { useSignatureExpiration: 120 }))
    assert.ok(Number(withExpiry.searchParams.get('signature_expiration')) > Date.now() / 1000)
    const res2 = await fetch(withExpiry)
    assert.equal(res2.status, 200)
    assert.equal(await res2.text(), 'signed content')
  })

  test('downloadUrl for root reads root files', async () => {
    await a.files.write('/root/root-signed.txt', 'root content', { user: 'root' })
    const res = await fetch(await a.downloadUrl('/root/root-signed.txt', { user: 'root', useSignatureExpiration: 120 }))
    assert.equal(res.status, 200)
    assert.equal(await res.text(), 'root content')
  })

  test('tampered, expired or foreign download URLs are refused', async () => {
    await secret()
    const good = new URL(await a.downloadUrl('/home/user/a-only.txt'))
    const check = async (url, what) => {
      const res = await fetch(url)
      refused({ status: res.status, body: await res.text() }, what)
    }
    const sig = good.searchParams.get('signature')
    const flipped = new URL(good)
    flipped.searchParams.set('signature', sig.slice(0, -1) + (sig.endsWith('A') ? 'B' : 'A'))
    await check(flipped, 'a flipped signature character')

    const otherPath = new URL(good)
    otherPath.searchParams.set('path', '/home/user/signed.txt')
    await check(otherPath, 'the signature of another path')

    const otherUser = new URL(good)
    otherUser.searchParams.set('username', 'root')
    await check(otherUser, 'the signature of another user')

    const unsigned = new URL(good)
    unsigned.searchParams.delete('signature')
    const res = await fetch(unsigned)
    assert.ok(res.status >= 400 && res.status < 500, `no signature: got ${res.status}`)
    assert.ok(!(await res.text()).includes('secret of a'))

    const expired = await fetch(await a.downloadUrl('/home/user/a-only.txt', { useSignatureExpiration: -10 }))
    assert.equal(expired.status, 401, 'an expired signature is a 401')
    const body = await expired.json()
    assert.equal(body.code, 401)
    assert.equal(typeof body.message, 'string')

    // b's token signs for b only: the same path signed by b never reads a's file.
    const foreign = await fetch(await b.downloadUrl('/home/user/a-only.txt'))
    const text = await foreign.text()
    assert.ok(foreign.status >= 400 && foreign.status < 500, `b's signature for a's file: got ${foreign.status} ${text}`)
    assert.ok(!text.includes('secret of a'), "b's signature read a's file")
  })

  test('uploadUrl works with plain fetch; a tampered one is refused', async () => {
    const form = new FormData()
    form.append('file', 'uploaded content')
    const res = await fetch(await a.uploadUrl('uploaded.txt'), { method: 'POST', body: form })
    assert.equal(res.status, 200)
    assert.deepEqual(await res.json(), [{ name: 'uploaded.txt', path: '/home/user/uploaded.txt', type: 'file' }])
    assert.equal(await a.files.read('uploaded.txt'), 'uploaded content')
    assert.equal((await a.files.getInfo('uploaded.txt')).owner, 'user')

    const url = new URL(await a.uploadUrl('tampered.txt', { useSignatureExpiration: 120 }))
    url.searchParams.set('path', 'elsewhere.txt')
    const form2 = new FormData()
    form2.append('file', 'should not land')
    const bad = await fetch(url, { method: 'POST', body: form2 })
    refused({ status: bad.status, body: await bad.text() }, 'upload to another path than signed')
    assert.equal(await a.files.exists('elsewhere.txt'), false)
    assert.equal(await a.files.exists('tampered.txt'), false)
  })
})
