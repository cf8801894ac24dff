// Shared helpers of warren's E2B compatibility suite. The suite drives the
// unmodified `e2b` npm package; these helpers only track what a test file
// created (so it is killed even when a test fails), poll for eventually
// true conditions, and speak raw HTTP to warren where the SDK cannot (a
// Host header, a tampered token).
import http from 'node:http'
import { randomBytes } from 'node:crypto'
import { Sandbox } from 'e2b'

function required(name) {
  const v = process.env[name]
  if (!v) {
    throw new Error(
      `${name} is not set: run the suite through \`make test\` (test/e2e/e2b_test.go starts a daemon and sets E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY, E2B_DOMAIN)`,
    )
  }
  return v
}

export const apiUrl = new URL(required('E2B_API_URL'))
export const apiKey = required('E2B_API_KEY')
required('E2B_SANDBOX_URL')
export const domain = required('E2B_DOMAIN')

// runId tags the sandboxes of one test file so that list filters only
// ever see that file's sandboxes, whatever else the daemon runs.
export const runId = randomBytes(5).toString('hex')

const created = new Map()

// track remembers a sandbox for killAll and returns it.
export function track(sbx) {
  created.set(sbx.sandboxId, sbx)
  return sbx
}

// killAll kills every tracked sandbox; register it with after(). Sandboxes a
// test already killed answer false, which is fine.
export async function killAll() {
  const all = [...created.keys()]
  created.clear()
  await Promise.allSettled(all.map((id) => Sandbox.kill(id)))
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

// eventually calls fn until it returns a truthy value (which it returns) or
// timeoutMs passes, when it throws the last error or a timeout naming what.
export async function eventually(what, fn, { timeoutMs = 15_000, intervalMs = 100 } = {}) {
  const deadline = Date.now() + timeoutMs
  let last
  for (;;) {
    try {
      const v = await fn()
      if (v) return v
      last = undefined
    } catch (err) {
      last = err
    }
    if (Date.now() > deadline) {
      const msg = `timed out after ${timeoutMs} ms waiting for ${what}`
      throw last ? new Error(`${msg}: ${last.stack ?? last}`) : new Error(msg)
    }
    await sleep(intervalMs)
  }
}

// rawRequest sends one HTTP request to warren's address with exactly the
// headers given (Host included, which fetch does not allow) and returns
// { status, headers, body } with the body as a string.
export function rawRequest({ method = 'GET', path = '/', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: apiUrl.hostname,
        port: apiUrl.port || 80,
        method,
        path,
        headers,
        agent: false,
      },
      (res) => {
        const chunks = []
        res.on('data', (c) => chunks.push(c))
        res.on('end', () =>
          resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }),
        )
        res.on('error', reject)
      },
    )
    req.setTimeout(30_000, () => req.destroy(new Error(`${method} ${path}: no answer in 30 s`)))
    req.on('error', reject)
    if (body !== undefined) req.write(body)
    req.end()
  })
}

// envdHeaders are the headers the SDK sends on every sandbox-plane request.
export function envdHeaders(sandboxId, token) {
  const h = { 'E2b-Sandbox-Id': sandboxId, 'E2b-Sandbox-Port': '49983' }
  if (token !== undefined) h['X-Access-Token'] = token
  return h
}

// listAll drains a Sandbox.list paginator.
export async function listAll(opts) {
  const p = Sandbox.list(opts)
  const out = []
  while (p.hasNext) out.push(...(await p.nextItems()))
  return out
}

export const decoder = () => {
  const d = new TextDecoder()
  return (bytes) => d.decode(bytes, { stream: true })
}
